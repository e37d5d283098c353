package postgres_test

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/migrations"
	"github.com/acme/retention/postgres"
)

// migrateBundle is an empty database, a pool on it and the embedded migrations.
type migrateBundle struct {
	url  string
	pool *pgxpool.Pool
	all  []postgres.Migration
}

func setup(t *testing.T) *migrateBundle {
	t.Helper()
	all, err := postgres.Migrations()
	require.NoError(t, err)
	// Without at least one migration every assertion below would hold vacuously.
	require.NotEmpty(t, all)
	dbURL := testdb.Empty(t)
	return &migrateBundle{url: dbURL, pool: testdb.Pool(t, dbURL), all: all}
}

func (b *migrateBundle) status(t *testing.T) map[int]bool {
	t.Helper()
	status, err := postgres.MigrationStatus(context.Background(), b.pool)
	require.NoError(t, err)
	require.Len(t, status, len(b.all))
	applied := map[int]bool{}
	for i, m := range status {
		require.Equal(t, b.all[i].Version, m.Version)
		require.Equal(t, b.all[i].Name, m.Name)
		applied[m.Version] = m.Applied
	}
	return applied
}

// recorded returns the rows of schema_migrations, so a test sees duplicates that a set of versions would hide.
func (b *migrateBundle) recorded(t *testing.T) []int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT version FROM schema_migrations ORDER BY version`)
	require.NoError(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return versions
}

func (b *migrateBundle) tableExists(t *testing.T, name string) bool {
	t.Helper()
	var exists bool
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists))
	return exists
}

// objectExists reports whether a table or an index, a column named table.column, or a function named name(), exists.
func (b *migrateBundle) objectExists(t *testing.T, name string) bool {
	t.Helper()
	var exists bool
	if fn, ok := strings.CutSuffix(name, "()"); ok {
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_proc p
			WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace)`, fn).Scan(&exists))
		return exists
	}
	table, column, ok := strings.Cut(name, ".")
	if !ok {
		return b.tableExists(t, name)
	}
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2)`, table, column).Scan(&exists))
	return exists
}

// The tables a migration file creates or drops by name; a dropped name ends its statement, so that dynamic SQL
// such as format('DROP TABLE IF EXISTS %I', t) names none.
var (
	createdTable = regexp.MustCompile(`(?i)\bCREATE TABLE (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`)
	droppedTable = regexp.MustCompile(`(?i)\bDROP TABLE (?:IF EXISTS )?([a-z_][a-z0-9_]*)\s*;`)
	alterTable   = regexp.MustCompile(`(?is)\bALTER TABLE ([a-z_][a-z0-9_]*)\s([^;]*);`)
	droppedCol   = regexp.MustCompile(`(?i)\bDROP COLUMN (?:IF EXISTS )?([a-z_][a-z0-9_]*)`)
	droppedFunc  = regexp.MustCompile(`(?i)\bDROP FUNCTION (?:IF EXISTS )?([a-z_][a-z0-9_]*)\(`)
	droppedIndex = regexp.MustCompile(`(?i)\bDROP INDEX (?:IF EXISTS )?([a-z_][a-z0-9_]*)\s*;`)
	createdIndex = regexp.MustCompile(`(?i)\bCREATE (?:UNIQUE )?INDEX (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`)
)

// indexesDroppedIn lists the indexes an SQL file drops and does not create again (migration 0024 replaces indexes).
func indexesDroppedIn(t *testing.T, sql string) []string {
	t.Helper()
	created := tablesIn(t, createdIndex, sql)
	var names []string
	for _, name := range tablesIn(t, droppedIndex, sql) {
		if !slices.Contains(created, name) {
			names = append(names, name)
		}
	}
	return names
}

// functionsDroppedIn lists the functions an SQL file drops, as name() (migration 0021 drops only functions).
func functionsDroppedIn(sql string) []string {
	var names []string
	for _, m := range droppedFunc.FindAllStringSubmatch(sql, -1) {
		names = append(names, strings.ToLower(m[1])+"()")
	}
	return names
}

// columnsDroppedIn lists the columns an SQL file drops, as table.column.
func columnsDroppedIn(sql string) []string {
	var names []string
	for _, m := range alterTable.FindAllStringSubmatch(sql, -1) {
		for _, c := range droppedCol.FindAllStringSubmatch(m[2], -1) {
			names = append(names, strings.ToLower(m[1]+"."+c[1]))
		}
	}
	return names
}

// tablesIn lists the tables an SQL file creates or drops, so the test follows the migrations as they grow.
func tablesIn(t *testing.T, re *regexp.Regexp, sql string) []string {
	t.Helper()
	var names []string
	for _, m := range re.FindAllStringSubmatch(sql, -1) {
		names = append(names, strings.ToLower(m[1]))
	}
	return names
}

func allVersions(all []postgres.Migration) []int {
	out := make([]int, 0, len(all))
	for _, m := range all {
		out = append(out, m.Version)
	}
	return out
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	all, err := postgres.Migrations()
	require.NoError(t, err)

	// Read the embedded files independently of Migrations, so a file it skipped or mispaired shows up.
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	ups, downs := map[string]string{}, map[string]string{}
	for _, e := range entries {
		body, err := fs.ReadFile(migrations.FS, e.Name())
		require.NoError(t, err)
		if base, ok := strings.CutSuffix(e.Name(), ".up.sql"); ok {
			ups[base] = string(body)
		}
		if base, ok := strings.CutSuffix(e.Name(), ".down.sql"); ok {
			downs[base] = string(body)
		}
	}
	require.NotEmpty(t, ups)
	require.Len(t, all, len(ups))
	require.Len(t, downs, len(ups), "every up file needs a down file")

	for i, m := range all {
		if i > 0 {
			require.Greater(t, m.Version, all[i-1].Version, "migrations must be in ascending version order")
		}
		base := fmt.Sprintf("%04d_%s", m.Version, m.Name)
		require.Contains(t, ups, base)
		require.Contains(t, downs, base)
		require.Equal(t, ups[base], m.Up, base)
		require.Equal(t, downs[base], m.Down, base)
		require.False(t, m.Applied, "Migrations knows nothing about a database")
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("FreshDatabaseShowsAllPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for version, applied := range b.status(t) {
			require.False(t, applied, "migration %04d", version)
		}
		// Reading the status must not create anything: a status check is not a migration.
		require.False(t, b.tableExists(t, "schema_migrations"))
	})

	t.Run("UpAppliesAllThenNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		n, err := postgres.MigrateUp(ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, len(b.all), n)
		for version, applied := range b.status(t) {
			require.True(t, applied, "migration %04d", version)
		}
		require.Equal(t, allVersions(b.all), b.recorded(t))
		for _, m := range b.all {
			for _, table := range tablesIn(t, createdTable, m.Up) {
				require.True(t, b.tableExists(t, table), "%s after up", table)
			}
		}

		n, err = postgres.MigrateUp(ctx, b.pool)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, allVersions(b.all), b.recorded(t))
	})

	t.Run("DownOneRevertsNewest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := postgres.MigrateUp(ctx, b.pool)
		require.NoError(t, err)

		newest := b.all[len(b.all)-1]
		dropped := append(tablesIn(t, droppedTable, newest.Down), columnsDroppedIn(newest.Down)...)
		dropped = append(dropped, functionsDroppedIn(newest.Down)...)
		dropped = append(dropped, indexesDroppedIn(t, newest.Down)...)
		require.NotEmpty(t, dropped, "the newest down file drops no table, column, function or index, so this test would check nothing")
		for _, name := range dropped {
			require.True(t, b.objectExists(t, name), "%s before down", name)
		}

		n, err := postgres.MigrateDown(ctx, b.pool, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		status := b.status(t)
		for _, m := range b.all {
			require.Equal(t, m.Version != newest.Version, status[m.Version], "migration %04d", m.Version)
		}
		for _, name := range dropped {
			require.False(t, b.objectExists(t, name), "%s after down", name)
		}
		// One step means one migration: the schema of the older ones stays.
		for _, m := range b.all[:len(b.all)-1] {
			for _, table := range tablesIn(t, createdTable, m.Up) {
				require.True(t, b.tableExists(t, table), "%s of %04d after down", table, m.Version)
			}
		}
		require.Equal(t, allVersions(b.all[:len(b.all)-1]), b.recorded(t))
	})

	t.Run("UpDownUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		_, err := postgres.MigrateUp(ctx, b.pool)
		require.NoError(t, err)

		// Asking for more steps than there are migrations reverts what is applied, and no more.
		n, err := postgres.MigrateDown(ctx, b.pool, len(b.all)+5)
		require.NoError(t, err)
		require.Equal(t, len(b.all), n)
		for version, applied := range b.status(t) {
			require.False(t, applied, "migration %04d", version)
		}
		require.Empty(t, b.recorded(t))
		for _, m := range b.all {
			for _, table := range tablesIn(t, createdTable, m.Up) {
				require.False(t, b.tableExists(t, table), "%s after down all", table)
			}
		}

		n, err = postgres.MigrateUp(ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, len(b.all), n)
		require.Equal(t, allVersions(b.all), b.recorded(t))
		for _, m := range b.all {
			for _, table := range tablesIn(t, createdTable, m.Up) {
				require.True(t, b.tableExists(t, table), "%s after up again", table)
			}
		}
	})

	t.Run("DownOnFreshDatabaseRevertsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		n, err := postgres.MigrateDown(context.Background(), b.pool, 1)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Empty(t, b.recorded(t))
	})

	t.Run("ConcurrentUpAppliesEachOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		// Two pools stand for two replicas starting at once; each has its own connections, so only the advisory
		// lock in Postgres can keep them from applying the same migration twice.
		pools := []*pgxpool.Pool{testdb.Pool(t, b.url), testdb.Pool(t, b.url)}
		for _, p := range pools {
			// Connect before the barrier, so both start migrating at the same moment rather than after a dial.
			require.NoError(t, p.Ping(ctx))
		}
		type result struct {
			n   int
			err error
		}
		start := make(chan struct{})
		results := make(chan result, len(pools))
		for _, p := range pools {
			go func() {
				<-start
				n, err := postgres.MigrateUp(ctx, p)
				results <- result{n, err}
			}()
		}
		close(start)
		total := 0
		for range pools {
			r := <-results
			require.NoError(t, r.err)
			total += r.n
		}
		require.Equal(t, len(b.all), total, "between them the two runs apply each migration exactly once")
		require.Equal(t, allVersions(b.all), b.recorded(t))
	})
}

func TestReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, b.url, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)

	err = db.Ready(ctx)
	require.Error(t, err)
	first := b.all[0]
	require.Contains(t, err.Error(), fmt.Sprintf("%04d_%s", first.Version, first.Name), "the error names a pending migration")

	_, err = postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	require.NoError(t, db.Ready(ctx))

	// Reverting the newest migration makes the service unready again.
	_, err = postgres.MigrateDown(ctx, b.pool, 1)
	require.NoError(t, err)
	require.Error(t, db.Ready(ctx))
}

// TestRowStatsEarliestMigrationFillsEventTimes: migration 0007 fills each counter group's earliest event time from
// its rows and leaves its earliest ingestion time unknown (NULL), which runs read as "may be anything".
func TestRowStatsEarliestMigrationFillsEventTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	for _, sql := range []string{
		`CREATE TABLE lake_rows_ptest PARTITION OF lake_rows FOR VALUES FROM ('2030-01-01+00') TO ('2030-02-01+00')`,
		`INSERT INTO row_partitions VALUES ('lake_rows_ptest', 'adobe_lakeHouse', '2030-01-01+00', '2030-02-01+00')`,
		`INSERT INTO lake_rows (dataset_id, row_id, ts, ingested_at, placed_expiry, setting_id, payload) VALUES
		    ('d', 'a', '2029-01-05+00', '2029-01-06+00', '2030-01-05+00', 1, '{}'), ('d', 'b', '2029-01-09+00', '2029-01-10+00', '2030-01-09+00', 1, '{}'),
		    ('d', 'c', '2029-01-02+00', '2029-01-10+00', '2030-01-02+00', 2, '{}')`,
		`INSERT INTO row_stats (partition_name, dataset_id, setting_id, row_count, max_ingested_at) VALUES
		    ('lake_rows_ptest', 'd', 1, 2, '2029-01-10+00'), ('lake_rows_ptest', 'd', 2, 1, '2029-01-10+00')`,
	} {
		_, err := b.pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	// Back to before 0007, however many migrations came after it, and up again.
	_, err = postgres.MigrateDown(ctx, b.pool, len(b.all)-slices.IndexFunc(b.all, func(m postgres.Migration) bool { return m.Version == 7 }))
	require.NoError(t, err)
	_, err = postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	rows, err := b.pool.Query(ctx, `SELECT setting_id, to_char(min_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), min_ingested_at IS NULL FROM row_stats ORDER BY setting_id`)
	require.NoError(t, err)
	type group struct {
		Setting       int64
		MinTS         string
		IngestedUnset bool
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[group])
	require.NoError(t, err)
	require.Equal(t, []group{
		{1, "2029-01-05 00:00", true},
		{2, "2029-01-02 00:00", true},
	}, got)
}

// TestExpirationHistoryMigration: 0014 moves each expiration's JSON history into rows, keeping its newest 100, takes
// away the stale reason of one not cancelled, and its down migration puts the kept rows back as JSON.
func TestExpirationHistoryMigration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	_, err = postgres.MigrateDown(ctx, b.pool, len(b.all)-slices.IndexFunc(b.all, func(m postgres.Migration) bool { return m.Version == 14 }))
	require.NoError(t, err)
	const id = "SD-00000000-0000-4000-8000-000000000001"
	for _, sql := range []string{
		`INSERT INTO datasets (id, org_id, sandbox_name, name, data_behavior, managed_by, created_at, updated_at, created_user, updated_user, created_client)
		    VALUES ('0123456789abcdef01234567', 'o', 'prod', 'n', 'record', 'CUSTOMER', now(), now(), 'u', 'u', 'c')`,
		`INSERT INTO dataset_expirations (id, org_id, sandbox_name, dataset_id, display_name, status, expiry, reason, created_at, created_by, updated_at, updated_by, history)
		    SELECT '` + id + `', 'o', 'prod', '0123456789abcdef01234567', 'x', 'pending', '2030-01-01+00', 'held by an old hold', now(), 'u', now(), 'u',
		      jsonb_agg(jsonb_build_object('status', 'updated', 'expiry', '2030-01-01T00:00:00Z', 'updatedAt', '2026-01-01T00:00:00Z', 'updatedBy', 'u' || i) ORDER BY i)
		    FROM generate_series(1, 105) i`,
	} {
		_, err := b.pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	_, err = postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	var n int
	var first, last string
	var reason *string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*), min(updated_by || '@' || seq) FILTER (WHERE seq = (SELECT min(seq) FROM dataset_expiration_history)),
		max(updated_by) FILTER (WHERE seq = (SELECT max(seq) FROM dataset_expiration_history)), (SELECT reason FROM dataset_expirations)
		FROM dataset_expiration_history WHERE expiration_id = $1`, id).Scan(&n, &first, &last, &reason))
	require.Equal(t, 100, n, "the newest 100 kept")
	require.Equal(t, "u6@6", first)
	require.Equal(t, "u105", last)
	require.Nil(t, reason, "a pending expiration's reason is derived when read")

	_, err = postgres.MigrateDown(ctx, b.pool, len(b.all)-slices.IndexFunc(b.all, func(m postgres.Migration) bool { return m.Version == 14 }))
	require.NoError(t, err)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT jsonb_array_length(history), history->0->>'updatedBy' FROM dataset_expirations`).Scan(&n, &first))
	require.Equal(t, []any{100, "u6"}, []any{n, first})
}

// TestDeletionManifestChunksMigration: 0019 regroups the entries of each removing statement (removal, dataset,
// store, reason and time) into chunks of 1,000 in their order, keeping each entry's values, and its down migration
// puts them back a row an entry in the same order.
func TestDeletionManifestChunksMigration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	steps := len(b.all) - slices.IndexFunc(b.all, func(m postgres.Migration) bool { return m.Version == 19 })
	_, err = postgres.MigrateDown(ctx, b.pool, steps)
	require.NoError(t, err)
	// 2,005 entries of a run, written in the order of their numbers, and a delete by _id's one, in between.
	for _, sql := range []string{
		`INSERT INTO deletion_manifests (removal_kind, removal_id, dataset_id, store, row_id, ts, expires_at, reason, removed_at)
		    SELECT 'run', 'r', 'd', 'adobe_lakeHouse', 'x' || lpad(i::text, 4, '0'), '2025-01-01+00'::timestamptz + i * interval '1 minute',
		        '2025-02-01+00'::timestamptz + i * interval '1 minute', 'expired', '2025-03-01+00' FROM generate_series(1, 1500) i`,
		`INSERT INTO deletion_manifests (removal_kind, removal_id, dataset_id, store, row_id, ts, expires_at, reason, removed_at)
		    VALUES ('row-delete', 'e', 'd', 'adobe_lakeHouse', 'gone', '2025-01-05+00', NULL, 'row-delete', '2025-03-02+00')`,
		`INSERT INTO deletion_manifests (removal_kind, removal_id, dataset_id, store, row_id, ts, expires_at, reason, removed_at)
		    SELECT 'run', 'r', 'd', 'adobe_lakeHouse', 'x' || lpad(i::text, 4, '0'), '2025-01-01+00'::timestamptz + i * interval '1 minute',
		        '2025-02-01+00'::timestamptz + i * interval '1 minute', 'expired', '2025-03-01+00' FROM generate_series(1501, 2005) i`,
	} {
		_, err := b.pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	const wantRun = `SELECT string_agg('x' || lpad(i::text, 4, '0') || '@' || i, ',' ORDER BY i) FROM generate_series(1, 2005) i`
	var want string
	require.NoError(t, b.pool.QueryRow(ctx, wantRun).Scan(&want))

	_, err = postgres.MigrateUp(ctx, b.pool)
	require.NoError(t, err)
	rows, err := b.pool.Query(ctx, `SELECT removal_kind || ':' || entries FROM deletion_manifests ORDER BY id`)
	require.NoError(t, err)
	chunks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"run:1000", "run:1000", "row-delete:1", "run:5"}, chunks, "chunks of 1,000 in the order of their first entry")
	var got string
	var unexpired int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT
		    string_agg(u.row_id || '@' || (extract(epoch FROM u.ts - '2025-01-01+00'::timestamptz) / 60)::int, ',' ORDER BY m.id, u.ord)
		        FILTER (WHERE m.removal_kind = 'run' AND u.expires_at = u.ts + interval '1 month'),
		    count(*) FILTER (WHERE u.expires_at IS NULL)
		FROM deletion_manifests m, unnest(m.row_ids, m.timestamps, m.expiries) WITH ORDINALITY AS u (row_id, ts, expires_at, ord)`).
		Scan(&got, &unexpired))
	require.Equal(t, want, got, "every entry in its place, with its clock and expiry")
	require.Equal(t, 1, unexpired, "the delete's entry has no expiry")

	_, err = postgres.MigrateDown(ctx, b.pool, steps)
	require.NoError(t, err)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT string_agg(row_id || '@' || (extract(epoch FROM ts - '2025-01-01+00'::timestamptz) / 60)::int, ',' ORDER BY id)
		FROM deletion_manifests WHERE removal_kind = 'run' AND expires_at = ts + interval '1 month'`).Scan(&got))
	require.Equal(t, want, got, "back a row an entry, in the same order")
	var deleted string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT row_id || '/' || reason || '/' || (expires_at IS NULL)
		FROM deletion_manifests WHERE removal_kind = 'row-delete'`).Scan(&deleted))
	require.Equal(t, "gone/row-delete/true", deleted)
}
