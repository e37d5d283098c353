// Package testdb gives each test its own migrated PostgreSQL database, cloned from a template that is migrated once
// per schema version. Tests run against the real server named by TEST_DATABASE_URL (make test starts a throwaway
// cluster and sets it); there is no mock of Postgres.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/retention/migrations"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/riverjobs"
)

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// URL returns TEST_DATABASE_URL, failing the test when it is unset: a database test that silently skipped would
// count as passing.
func URL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		tb.Fatal("TEST_DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway PostgreSQL")
	}
	return url
}

// New creates a fresh database from the migrated template and returns its URL; the database is dropped when the
// test ends.
func New(tb testing.TB) string {
	tb.Helper()
	base := URL(tb)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(base) })
	if templateErr != nil {
		tb.Fatalf("prepare template database: %v", templateErr)
	}
	return create(tb, base, "t_"+randomSuffix(), " TEMPLATE "+templateName)
}

// Empty creates a fresh database with no schema at all, for tests of the migrations themselves, and returns its URL;
// it is dropped when the test ends.
func Empty(tb testing.TB) string {
	tb.Helper()
	return create(tb, URL(tb), "e_"+randomSuffix(), "")
}

func create(tb testing.TB, base, name, template string) string {
	tb.Helper()
	ctx := context.Background()
	admin := connect(tb, base)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name+template); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	_ = admin.Close(ctx)
	tb.Cleanup(func() {
		admin := connect(tb, base)
		defer func() { _ = admin.Close(context.Background()) }()
		if _, err := admin.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name)); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	return withDatabaseURL(base, name)
}

// NewDB returns a postgres.DB on a fresh database, closed when the test ends.
func NewDB(tb testing.TB) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), New(tb), nil)
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	tb.Cleanup(db.Close)
	return db
}

// Pool returns a pool on the database at url, closed when the test ends.
func Pool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func connect(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		tb.Fatalf("connect to TEST_DATABASE_URL: %v", err)
	}
	return conn
}

// ensureTemplate builds the template for the current migrations once per cluster. Test binaries of several packages
// run at once, so building happens under an advisory lock, into a scratch name that is renamed only when complete:
// a crash mid-build never leaves a half-migrated template behind.
func ensureTemplate(base string) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "tmpl_" + sum
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("connect to TEST_DATABASE_URL: %w", err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7436500002)`); err != nil {
		return "", fmt.Errorf("lock template build: %w", err)
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return name, nil
	}
	scratch := name + "_build"
	for _, stmt := range []string{
		`DROP DATABASE IF EXISTS ` + scratch + ` WITH (FORCE)`,
		`CREATE DATABASE ` + scratch,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			return "", fmt.Errorf("build template: %w", err)
		}
	}
	if err := migrate(ctx, withDatabaseURL(base, scratch)); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+scratch+` RENAME TO `+name); err != nil {
		return "", fmt.Errorf("publish template: %w", err)
	}
	return name, nil
}

func migrate(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to template: %w", err)
	}
	defer pool.Close()
	if _, err := postgres.MigrateUp(ctx, pool); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	return riverjobs.Migrate(ctx, pool)
}

// withDatabaseURL returns url with its database replaced by name.
func withDatabaseURL(url, name string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return url
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(body)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
