package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
)

// storeTable is the partitioned table holding a store's rows.
func storeTable(store catalog.Store) string {
	if store == catalog.Profile {
		return "profile_rows"
	}
	return "lake_rows"
}

// farBoundary starts the last partition of each store. Rows placed at or past it (placed under a null TTL, or
// expiring beyond year 9999) share that partition, which is never dropped whole: its rows leave one by one.
var farBoundary = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// partitionSpec names one monthly partition of a store.
type partitionSpec struct {
	store catalog.Store
	lower time.Time // first instant of the month, or farBoundary
}

func (p partitionSpec) far() bool { return !p.lower.Before(farBoundary) }

func (p partitionSpec) name() string {
	if p.far() {
		return storeTable(p.store) + "_pfar"
	}
	return fmt.Sprintf("%s_p%04d%02d", storeTable(p.store), p.lower.Year(), int(p.lower.Month()))
}

// placement is the partition a placed expiry belongs in.
func placement(store catalog.Store, expiry *time.Time) partitionSpec {
	if expiry == nil || !expiry.Before(farBoundary) {
		return partitionSpec{store: store, lower: farBoundary}
	}
	t := expiry.UTC()
	return partitionSpec{store: store, lower: time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)}
}

// placedValue is the placed_expiry column value: the expiry, or 'infinity' for rows placed under a null TTL.
func placedValue(expiry *time.Time) pgtype.Timestamptz {
	if expiry == nil {
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return pgtype.Timestamptz{Time: *expiry, Valid: true}
}

// ensurePartitions creates the partitions that do not exist yet, each in its own short transaction. Creating a
// partition locks the parent, so it waits at most lockTimeout and retries, rather than letting every read queue
// behind it.
func (db *DB) ensurePartitions(ctx context.Context, specs map[string]partitionSpec) error {
	var missing []partitionSpec
	for name, spec := range specs {
		if db.knownPartition(name) {
			continue
		}
		missing = append(missing, spec)
	}
	for _, spec := range missing {
		if err := db.createPartition(ctx, spec); err != nil {
			return err
		}
		db.rememberPartition(spec.name())
	}
	return nil
}

func (db *DB) createPartition(ctx context.Context, spec partitionSpec) error {
	upper := "MAXVALUE"
	lowerText := "'10000-01-01 00:00:00+00'"
	if !spec.far() {
		lowerText = "'" + spec.lower.Format("2006-01-02 15:04:05Z07:00") + "'"
		upper = "'" + spec.lower.AddDate(0, 1, 0).Format("2006-01-02 15:04:05Z07:00") + "'"
	}
	create := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)`,
		spec.name(), storeTable(spec.store), lowerText, upper)
	upperBound := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	if !spec.far() {
		upperBound = pgtype.Timestamptz{Time: spec.lower.AddDate(0, 1, 0), Valid: true}
	}
	return db.withLockRetry(ctx, func(ctx context.Context) error {
		return db.inTx(ctx, func(tx pgx.Tx) error {
			if err := setLockTimeout(ctx, tx, 100*time.Millisecond); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, create); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO row_partitions (name, store, lower_bound, upper_bound)
				VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`, spec.name(), string(spec.store), spec.lower, upperBound)
			return err
		})
	})
}

// setLockTimeout bounds, for the rest of the transaction, how long a statement waits for a lock: DDL on a partition
// waits behind every open statement on it, and every later statement would queue behind the waiting DDL.
func setLockTimeout(ctx context.Context, tx pgx.Tx, d time.Duration) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, max(d.Milliseconds(), 1)))
	return err
}

// tableList is the partitions' names as a comma-separated list of quoted identifiers, for LOCK and DROP.
func tableList(names []string) string {
	tables := make([]string, 0, len(names))
	for _, name := range names {
		tables = append(tables, pgx.Identifier{name}.Sanitize())
	}
	return strings.Join(tables, ", ")
}

// Lock and race SQLSTATEs a short-locking DDL statement retries on.
const (
	lockNotAvailable = "55P03"
	duplicateTable   = "42P07"
	uniqueViolated   = "23505"
)

// withLockRetry runs fn until it succeeds, giving up after a bounded number of lock timeouts. A concurrent creator
// of the same partition is a success, not an error.
func (db *DB) withLockRetry(ctx context.Context, fn func(ctx context.Context) error) error {
	var err error
	for attempt := range 50 {
		err = fn(ctx)
		var pgErr *pgconn.PgError
		if err == nil || (errors.As(err, &pgErr) && (pgErr.Code == duplicateTable || pgErr.Code == uniqueViolated)) {
			return nil
		}
		if !errors.As(err, &pgErr) || pgErr.Code != lockNotAvailable {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10*(attempt+1)) * time.Millisecond):
		}
	}
	return fmt.Errorf("gave up waiting for a lock: %w", err)
}

func (db *DB) knownPartition(name string) bool {
	db.partitionsMu.Lock()
	defer db.partitionsMu.Unlock()
	_, ok := db.partitions[name]
	return ok
}

func (db *DB) rememberPartition(name string) {
	db.partitionsMu.Lock()
	defer db.partitionsMu.Unlock()
	if db.partitions == nil {
		db.partitions = map[string]struct{}{}
	}
	db.partitions[name] = struct{}{}
}

// forgetPartition drops a partition from the cache after a run dropped it, so the next ingestion recreates it.
func (db *DB) forgetPartition(name string) {
	db.partitionsMu.Lock()
	defer db.partitionsMu.Unlock()
	delete(db.partitions, name)
}
