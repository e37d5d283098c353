// Package postgres implements the domain services on PostgreSQL through pgx. It is the only package that speaks
// SQL; it translates pgx errors into catalog errors at its boundary, so callers never see a driver type. Its
// subsystems, each with its files:
//
//   - The pool: db.go (DB: the pool, the clock, the transaction helper; Open; error translation), outage.go
//     (a server that cannot serve now), poolmetrics.go.
//   - Datasets and settings: dataset.go (DatasetService), policy.go (the org's TTL limits), expiry.go (TTL settings'
//     history and the expiry rule in SQL, the twin of retention/expiry.go), preview.go (what a TTL change would
//     delete).
//   - The row store: rowstore.go (rowStore: the partition and size caches, the test hooks), partition.go (the
//     expiry-placed partitions), ingest.go (placement and the ingestion write path), idfilter.go (the _id filters),
//     rows.go and rows_page.go (RowService: ingestion's chunks, reads, deletes by _id).
//   - The sweep: runs.go and runs_read.go (RunRepository: runs, their parts, the ledger), sweeper.go (Sweeper: the
//     algorithm), sweep.go (its statements, on the row store), pacing.go (resting beside ingestion).
//   - Audit: audit.go (AuditService: the hash-chained events), audit_query.go (search, export, verify, purge).
//   - Expirations: expiration.go (ExpirationService), expiration_run.go (ExpirationRunner: carrying them out).
//   - Holds: hold.go (legal holds on DatasetService).
//   - Migrations: migrate.go, applying the SQL files that package migrations embeds.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/retention/catalog"
)

// DB is the service's connection pool with an injected clock, so that tests control every timestamp written, and
// the transaction helper. What the service keeps about its rows between requests (caches, filters, test hooks) is
// the row store's (rows, rowstore.go).
type DB struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Now returns the current time; every row written in one transaction shares one reading of it.
	Now func() time.Time

	// rows is the row store on this pool.
	rows *rowStore
}

// Open connects to the database at url with one pool, sized by the url's pool_max_conns or defaultMaxConns: what
// tools and tests need. Sessions run in UTC, because period arithmetic on timestamptz follows the session time zone
// and the expiry rule is defined in UTC, and without JIT unless the url asks for it.
func Open(ctx context.Context, url string, logger *slog.Logger) (*DB, error) {
	return OpenPool(ctx, url, logger, PoolOptions{})
}

// PoolOptions name and size one of several pools on the same database.
type PoolOptions struct {
	// Name is added to the sessions' application_name (retentiond-<name>), so pg_stat_activity tells the pools
	// apart.
	Name string
	// MaxConns bounds the pool, overriding the url's pool_max_conns; zero keeps that, else defaultMaxConns.
	MaxConns int32
}

// OpenPool is Open with a pool of its own name and size. The service opens one pool for API requests, one for jobs
// and one for health checks, so that no amount of requests can take the connections the others need: a bulkhead
// between them, where one shared pool let stalled requests starve retention runs and /readyz.
func OpenPool(ctx context.Context, url string, logger *slog.Logger, opts PoolOptions) (*DB, error) {
	cfg, err := poolConfig(url, opts)
	if err != nil {
		return nil, err
	}
	return openWithConfig(ctx, cfg, logger)
}

// poolConfig is the pool configuration of OpenPool: the sessions' settings every connection of the service needs.
func poolConfig(url string, opts PoolOptions) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		// pgxpool's default (the number of CPUs, at least 4) starves an API under concurrent load.
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "retentiond"
		if opts.Name != "" {
			cfg.ConnConfig.RuntimeParams["application_name"] = "retentiond-" + opts.Name
		}
	}
	if cfg.ConnConfig.RuntimeParams["jit"] == "" {
		// Every statement here is short or works in batches, so compiling one whose estimate crossed jit_above_cost
		// costs more than it saves (docs/storage.md, "Figures behind code choices"). DATABASE_URL may turn it on.
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	return cfg, nil
}

// openWithConfig connects a pool with cfg and wraps it as a DB on the system clock.
func openWithConfig(ctx context.Context, cfg *pgxpool.Config, logger *slog.Logger) (*DB, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db := &DB{Pool: pool, Logger: logger, Now: time.Now}
	db.rows = &rowStore{db: db}
	return db, nil
}

// defaultMaxConns is the pool size of Open when DATABASE_URL does not set pool_max_conns.
const defaultMaxConns = 32

// Close closes the pool, waiting for acquired connections to be released.
func (db *DB) Close() { db.Pool.Close() }

// now returns the clock's time in UTC at millisecond precision: the API shows epoch milliseconds, so storing more
// would make a value read back differ from the one shown.
func (db *DB) now() time.Time { return db.Now().UTC().Truncate(time.Millisecond) }

// inTx runs fn in a transaction that commits when fn returns nil and rolls back otherwise.
func (db *DB) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.Pool, fn)
}

// Ready returns nil when Postgres answers and every migration is applied.
func (db *DB) Ready(ctx context.Context) error {
	status, err := MigrationStatus(ctx, db.Pool)
	if err != nil {
		return err
	}
	for _, m := range status {
		if !m.Applied {
			return fmt.Errorf("migration %04d_%s is not applied", m.Version, m.Name)
		}
	}
	return nil
}

// SQLSTATE codes the adapter translates.
const (
	uniqueViolation = "23505"
	// dataException is the class of SQLSTATEs for a value the database cannot store or compare: text holding
	// U+0000 or bytes that are not UTF-8 (22021, 22P05), a number out of range (22003), and the like.
	dataException = "22"
)

// translate turns driver errors into catalog errors: no rows means not found, a unique violation a conflict, a
// data exception a bad value. Everything else stays as it is and surfaces as an internal error.
func translate(err error, notFound string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Errorf(catalog.ENOTFOUND, "%s", notFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
		return catalog.Errorf(catalog.ECONFLICT, "%s", pgErr.Detail)
	}
	return TranslateError(err)
}

// TranslateError turns a data exception (SQLSTATE class 22) anywhere in err into an EINVALID error, and returns
// any other error as it is. The domain's rules refuse such values earlier, naming the field; this is the net under
// them, which the API applies to every error it answers, so that a value the database refuses is the client's
// 400 and never a 500.
func TranslateError(err error) error {
	var domain *catalog.Error
	if errors.As(err, &domain) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, dataException) {
		return catalog.Invalid("invalid-value", "", "the request holds a value the database cannot store or compare: %s", pgErr.Message)
	}
	return err
}

func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
