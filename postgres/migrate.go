package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/retention/migrations"
)

// migrationLockKey is the advisory lock that serializes migrations, so that replicas starting at the same moment
// apply each migration once. It is a session lock on one dedicated connection; a transaction-pooling proxy in front
// of Postgres would break it, so migrate through a direct connection.
const migrationLockKey = 7_436_500_001

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
	Applied bool
}

var migrationFile = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migrations returns the embedded migrations in order. Every version must have both an up and a down file.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		version, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(migrations.FS, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		mig := byVersion[version]
		if mig == nil {
			mig = &Migration{Version: version, Name: m[2]}
			byVersion[version] = mig
		}
		if m[3] == "up" {
			mig.Up = string(body)
		} else {
			mig.Down = string(body)
		}
	}
	var out []Migration
	for _, v := range slices.Sorted(maps.Keys(byVersion)) {
		m := byVersion[v]
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %04d_%s needs both an up and a down file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	return out, nil
}

const createMigrationTable = `
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// MigrationStatus returns every migration with whether it is applied.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool) ([]Migration, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, pool)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i].Applied = applied[all[i].Version]
	}
	return all, nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func appliedVersions(ctx context.Context, q querier) (map[int]bool, error) {
	rows, err := q.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		// Before the first migration the table does not exist; that means nothing is applied.
		if isUndefinedTable(err) {
			return map[int]bool{}, nil
		}
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		if isUndefinedTable(err) {
			return map[int]bool{}, nil
		}
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	out := map[int]bool{}
	for _, v := range versions {
		out[v] = true
	}
	return out, nil
}

// MigrateUp applies every pending migration, oldest first, each in its own transaction, and returns how many it
// applied.
func MigrateUp(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	return migrate(ctx, pool, up, math.MaxInt)
}

// MigrateDown reverts the newest steps applied migrations, newest first, and returns how many it reverted.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool, steps int) (int, error) {
	return migrate(ctx, pool, down, steps)
}

// direction is one way through the migrations: which ones it takes (the pending going up, the applied going down),
// in which order, which of their two files it runs and how it records that in schema_migrations.
type direction struct {
	takesApplied bool
	newestFirst  bool
	body         func(Migration) string
	record       string
}

var (
	up = direction{body: func(m Migration) string { return m.Up },
		record: `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`}
	down = direction{takesApplied: true, newestFirst: true, body: func(m Migration) string { return m.Down },
		record: `DELETE FROM schema_migrations WHERE version = $1 AND name = $2`}
)

// migrate runs, under the migration lock, at most limit of the migrations that d takes, in its order, each in its
// own transaction, and returns how many it ran.
func migrate(ctx context.Context, pool *pgxpool.Pool, d direction, limit int) (int, error) {
	all, err := Migrations()
	if err != nil {
		return 0, err
	}
	if d.newestFirst {
		slices.Reverse(all)
	}
	n := 0
	err = withMigrationLock(ctx, pool, func(conn *pgxpool.Conn) error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for _, m := range all {
			if n >= limit {
				break
			}
			if applied[m.Version] != d.takesApplied {
				continue
			}
			if err := runMigration(ctx, conn, d.body(m), d.record, m); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

func runMigration(ctx context.Context, conn *pgxpool.Conn, body, record string, m Migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, body); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, record, m.Version, m.Name)
		return err
	})
	if err != nil {
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return nil
}

func withMigrationLock(ctx context.Context, pool *pgxpool.Pool, fn func(conn *pgxpool.Conn) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection for migrations: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLockKey)); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// Unlock with a fresh context: the caller's may be cancelled, and a lock left behind would stall replicas.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLockKey))
	}()
	if _, err := conn.Exec(ctx, createMigrationTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return fn(conn)
}
