// Package postgres implements the domain services on PostgreSQL through pgx: datasets, TTL policies, audit events
// and the schema migrations. It is the only package that speaks SQL; it translates pgx errors into catalog errors at
// its boundary, so callers never see a driver type.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/retention/catalog"
)

// DB is the service's connection pool with an injected clock, so that tests control every timestamp written.
type DB struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Now returns the current time; every row written in one transaction shares one reading of it.
	Now func() time.Time

	// partitions caches each store's partitions, so ingestion does not ask the catalog for every chunk. A partition
	// a run drops is forgotten; the cache is read again before a partition is created, and when a chunk finds one
	// of its partitions gone (dropped by another replica).
	partitionsMu sync.Mutex
	partitions   map[catalog.Store][]partitionSpec

	// hooks let tests act at the points where a request has looked up partitions and not yet used them.
	hooks testHooks

	// sizes caches each lake partition's bytes per row for a minute: measuring a partition's size on disk costs a
	// file-system call per relation, too much for every GET of a dataset, and storageSize is an estimate anyway.
	// Only the partitions of the datasets asked about are measured, so that one tenant's many partitions cost
	// nothing to another's GET (internal/hostile holds it).
	sizesMu sync.Mutex
	sizes   map[string]measuredSize
}

// measuredSize is a partition's bytes per row and when it was measured.
type measuredSize struct {
	perRow float64
	at     time.Time
}

// testHooks are called, when set, at the points where a concurrent run could drop a partition under a request.
// Tests set them (export_test.go) to drop partitions there deterministically.
type testHooks struct {
	// beforeChunkTx gets the partitions a chunk was placed in, before the transaction that writes it begins.
	beforeChunkTx func(partitions []string)
	// afterPartitionLookup runs after a delete by _id has read which partitions hold the dataset's rows.
	afterPartitionLookup func()
	// afterPreviewCounters runs after a preview has read the dataset's counters, before it reads rows.
	afterPreviewCounters func()
	// afterRemoval runs after each removal transaction of a sweep (a drop, a batch, a block range) has committed.
	afterRemoval func()
}

// sizesMaxAge is how long the bytes-per-row figures are reused.
const sizesMaxAge = time.Minute

// partitionSizes measures the named partitions; to_regclass makes one a run dropped meanwhile measure NULL, not
// fail.
const partitionSizes = `
SELECT p.name, pg_total_relation_size(to_regclass(p.name))::float8 / NULLIF(sum(st.row_count), 0)
FROM row_partitions p JOIN row_stats st ON st.partition_name = p.name
WHERE p.name = ANY($1) GROUP BY p.name`

// bytesPerRow returns the named lake partitions' sizes on disk divided by their rows, each measured at most once a
// minute. It measures on q, the caller's connection: a request that held one connection and waited for a second
// could, with as many such requests as the pool has connections, wait on the pool for ever.
func (db *DB) bytesPerRow(ctx context.Context, q querier, partitions []string) (map[string]float64, error) {
	out := make(map[string]float64, len(partitions))
	var stale []string
	db.sizesMu.Lock()
	for _, name := range partitions {
		if m, ok := db.sizes[name]; ok && time.Since(m.at) < sizesMaxAge {
			out[name] = m.perRow
		} else {
			stale = append(stale, name)
		}
	}
	db.sizesMu.Unlock()
	if len(stale) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, partitionSizes, stale)
	if err != nil {
		return nil, fmt.Errorf("measure partitions: %w", err)
	}
	measured := map[string]float64{}
	var name string
	var perRow *float64
	if _, err := pgx.ForEachRow(rows, []any{&name, &perRow}, func() error {
		if perRow != nil {
			measured[name] = *perRow
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("measure partitions: %w", err)
	}
	at := time.Now()
	db.sizesMu.Lock()
	defer db.sizesMu.Unlock()
	if db.sizes == nil {
		db.sizes = map[string]measuredSize{}
	}
	for name, m := range db.sizes {
		if time.Since(m.at) >= sizesMaxAge {
			delete(db.sizes, name) // a dropped partition's figure would otherwise stay forever
		}
	}
	for _, name := range stale {
		out[name] = measured[name]
		db.sizes[name] = measuredSize{perRow: measured[name], at: at}
	}
	return out, nil
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
	return &DB{Pool: pool, Logger: logger, Now: time.Now}, nil
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
