package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// storeTable is the partitioned table holding a store's rows.
func storeTable(store catalog.Store) string {
	if store == catalog.Profile {
		return "profile_rows"
	}
	return "lake_rows"
}

// The partitions of a store, by placed expiry (docs/storage.md, "How many partitions"). Whatever rows arrive, a store
// has at most maxPartitionsAhead partitions whose range lies after the current month began, plus the past and far
// ones and the months that time has passed while they still hold rows:
//   - the past partition, [MINVALUE, pastBoundary), holds every row placed when its expiry had come at least
//     pastMargin before: such a row is expired on arrival and stays so, and its placed_expiry is stored as
//     -infinity, not as its expiry, so that one partition that never moves takes them all (a run drops it once its
//     newest row is past the grace);
//   - calendar months for the expiries within horizon of the current month, which every expiry the built-in limits
//     allow falls in (the largest maxValue, P10Y, from a timestamp at most catalog.MaxFutureSkew ahead);
//   - beyond it, the coarsest calendar-aligned cell (a year, a decade, a century) that starts at least its level's
//     distance after the current month and overlaps no partition: a cell is never wider than a tenth of its distance
//     from now, so a cell that time brings near was made only by rows that far ahead, and is walked for at most a
//     year when its time comes;
//   - the far partition, [farBoundary, MAXVALUE), for rows that never expire or expire after year 9999.
// A row goes to the partition that already covers its expiry, if any, so that partitions made at different times
// never need to agree on the cells.

// farBoundary starts the last partition of each store. Rows placed at or past it (placed under a null TTL, or
// expiring beyond year 9999) share that partition, which is never dropped whole while it holds a live row.
var farBoundary = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// pastBoundary ends the past partition. Its rows are all placed at -infinity; the bound only has to lie below every
// real expiry, and event times start in 1900.
var pastBoundary = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)

// pastMargin is how long before now a row's expiry must have come for the row to go to the past partition. A
// row placed there is expired for every reader from then on, so the margin covers any clock that is behind ours
// (another replica's, a run's evaluation time): none of them sees such a row as live, nor may delete it before its
// expiry. Rows that expired more recently go to their month, as live rows do.
const pastMargin = 24 * time.Hour

// horizon is how far after the current month's start expiries get a partition per calendar month: the built-in
// limits' largest maxValue (P10Y) from a timestamp catalog.MaxFutureSkew ahead, rounded up to whole months, and a
// month of margin. TestHorizonCoversBuiltinLimits holds it to that.
var horizon = retention.Period{Years: 10, Months: 2}

// cellLevels are the coarser cells, finest first: a cell of a level is used only where it starts at least `from`
// after the current month's start, so that it is at most a tenth as wide as its distance from now.
var cellLevels = []struct {
	years int
	from  retention.Period
}{
	{1, horizon},
	{10, retention.Period{Years: 100}},
	{100, retention.Period{Years: 1000}},
}

// maxPartitionsAhead bounds how many partitions of a store can cover expiries after the current month began, whatever
// rows arrive: the months of the horizon and the coarsest cells beyond it (TestPartitionCountIsBounded).
const maxPartitionsAhead = 400

// partitionKind tells the past and far partitions from the cells between them.
type partitionKind int

const (
	cellPartition partitionKind = iota
	pastPartition
	farPartition
)

// partitionSpec is one partition of a store: its kind and, for a cell, its range of placed expiries [lower, upper).
type partitionSpec struct {
	store        catalog.Store
	kind         partitionKind
	lower, upper time.Time
}

func (p partitionSpec) name() string {
	switch {
	case p.kind == pastPartition:
		return storeTable(p.store) + "_ppast"
	case p.kind == farPartition:
		return storeTable(p.store) + "_pfar"
	case p.lower.AddDate(0, 1, 0).Equal(p.upper):
		return fmt.Sprintf("%s_p%04d%02d", storeTable(p.store), p.lower.Year(), int(p.lower.Month()))
	default:
		return fmt.Sprintf("%s_p%04d_%04d", storeTable(p.store), p.lower.Year(), p.upper.Year())
	}
}

// contains reports whether a placed expiry falls in the partition.
func (p partitionSpec) contains(e time.Time) bool {
	switch p.kind {
	case pastPartition:
		return false // placed at -infinity, never at an expiry
	case farPartition:
		return !e.Before(farBoundary)
	}
	return !e.Before(p.lower) && e.Before(p.upper)
}

// overlaps reports whether the partition shares an instant with the cell [lower, upper).
func (p partitionSpec) overlaps(lower, upper time.Time) bool {
	switch p.kind {
	case pastPartition:
		return lower.Before(pastBoundary)
	case farPartition:
		return upper.After(farBoundary)
	}
	return lower.Before(p.upper) && p.lower.Before(upper)
}

// bounds is the partition's range as SQL partition bounds.
func (p partitionSpec) bounds() string {
	switch p.kind {
	case pastPartition:
		return "FROM (MINVALUE) TO (" + sqlTime(pastBoundary) + ")"
	case farPartition:
		return "FROM (" + sqlTime(farBoundary) + ") TO (MAXVALUE)"
	}
	return "FROM (" + sqlTime(p.lower) + ") TO (" + sqlTime(p.upper) + ")"
}

// listedBounds is the range row_partitions records: the past partition from -infinity, the far one to infinity.
func (p partitionSpec) listedBounds() (lower, upper pgtype.Timestamptz) {
	lower = pgtype.Timestamptz{Time: p.lower, Valid: true}
	upper = pgtype.Timestamptz{Time: p.upper, Valid: true}
	switch p.kind {
	case pastPartition:
		lower = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		upper.Time = pastBoundary
	case farPartition:
		lower.Time = farBoundary
		upper = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return lower, upper
}

// sqlTime is a UTC instant as an SQL literal. The times it formats are computed here, never taken from a request.
func sqlTime(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02 15:04:05Z07:00") + "'"
}

// placedAt is where a row whose expiry under its setting is expiry (nil: never) goes at now, given the store's
// partitions: the past partition when it expired at least pastMargin ago, the far one when it never does or after year 9999,
// the partition covering it if there is one, and otherwise the coarsest cell its distance allows that overlaps
// none.
func placedAt(store catalog.Store, expiry *time.Time, now time.Time, existing []partitionSpec) partitionSpec {
	if expiry == nil || !expiry.Before(farBoundary) {
		return partitionSpec{store: store, kind: farPartition}
	}
	e := expiry.UTC()
	if !e.After(now.Add(-pastMargin)) {
		return partitionSpec{store: store, kind: pastPartition}
	}
	for _, p := range existing {
		if p.contains(e) {
			return p
		}
	}
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	for i := len(cellLevels) - 1; i >= 0; i-- {
		lvl := cellLevels[i]
		lower := time.Date(e.Year()-e.Year()%lvl.years, 1, 1, 0, 0, 0, 0, time.UTC)
		upper := lower.AddDate(lvl.years, 0, 0)
		if lower.Before(lvl.from.AddTo(month)) || overlapsAny(existing, lower, upper) {
			continue
		}
		return partitionSpec{store: store, lower: lower, upper: upper}
	}
	lower := time.Date(e.Year(), e.Month(), 1, 0, 0, 0, 0, time.UTC)
	return partitionSpec{store: store, lower: lower, upper: lower.AddDate(0, 1, 0)}
}

// overlapsAny reports whether any of the partitions shares an instant with the cell [lower, upper).
func overlapsAny(parts []partitionSpec, lower, upper time.Time) bool {
	for _, p := range parts {
		if p.overlaps(lower, upper) {
			return true
		}
	}
	return false
}

// placedValue is the placed_expiry column value of a row in the partition: -infinity in the past partition,
// 'infinity' for a row that never expires, else its expiry.
func placedValue(p partitionSpec, expiry *time.Time) pgtype.Timestamptz {
	switch {
	case p.kind == pastPartition:
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	case expiry == nil:
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return pgtype.Timestamptz{Time: *expiry, Valid: true}
}

// partitionsOf returns the store's partitions the cache knows.
func (rs *rowStore) partitionsOf(store catalog.Store) []partitionSpec {
	rs.partitionsMu.Lock()
	defer rs.partitionsMu.Unlock()
	return rs.partitions[store]
}

const selectPartitions = `SELECT store, lower_bound, upper_bound FROM row_partitions`

// loadPartitions reads every partition of both stores into the cache: before a chunk creates a partition, so that
// it sees those other replicas made, and after a statement found one gone.
func (rs *rowStore) loadPartitions(ctx context.Context) error {
	rows, err := rs.db.Pool.Query(ctx, selectPartitions)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	loaded := map[catalog.Store][]partitionSpec{}
	var store string
	var lower, upper pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&store, &lower, &upper}, func() error {
		p := partitionSpec{store: catalog.Store(store), lower: lower.Time, upper: upper.Time}
		switch {
		case lower.InfinityModifier == pgtype.NegativeInfinity:
			p.kind = pastPartition
		case upper.InfinityModifier == pgtype.Infinity:
			p.kind = farPartition
		}
		loaded[p.store] = append(loaded[p.store], p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	rs.partitionsMu.Lock()
	defer rs.partitionsMu.Unlock()
	rs.partitions = loaded
	return nil
}

// copyPinned writes a chunk that lost its partitions to runs on every earlier attempt: in one transaction it takes
// the stores' parent tables ACCESS EXCLUSIVE, which a run's detach needs too, creates whichever of the chunk's
// partitions a run dropped, and writes the chunk. No run can drop a partition between its creation and the write,
// so the chunk is stored whatever the runs beside it do. The cost is that the stores' reads and writes wait for
// this one chunk (its lock waits at most lockTimeout at a time, as createPartition's does); it is paid only after
// chunkAttempts-1 lost races in a row.
func (rs *rowStore) copyPinned(ctx context.Context, t *ingestTarget, chunk []catalog.RowInput, groups map[string]*placedGroup, now time.Time) error {
	return retryLockTimeouts(ctx, func(ctx context.Context) error {
		return rs.db.inTx(ctx, func(tx pgx.Tx) error {
			if err := pinPartitions(ctx, tx, groups); err != nil {
				return err
			}
			return rs.copyChunk(ctx, tx, t, chunk, groups, now)
		})
	})
}

// pinPartitions locks the groups' parent tables ACCESS EXCLUSIVE, waiting at most 100 ms, and creates the groups'
// partitions that do not exist, within tx; the rest of tx waits for locks as long as any transaction does.
func pinPartitions(ctx context.Context, tx pgx.Tx, groups map[string]*placedGroup) error {
	if err := setLockTimeout(ctx, tx, 100*time.Millisecond); err != nil {
		return err
	}
	var parents []string
	for _, g := range groups {
		parents = append(parents, "ONLY "+storeTable(g.spec.store))
	}
	slices.Sort(parents)
	if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(slices.Compact(parents), ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		if err := createPartitionIn(ctx, tx, groups[name].spec); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `SET LOCAL lock_timeout TO DEFAULT`)
	return err
}

// createPartitionIn creates a partition, if it does not exist, and lists it in row_partitions, within tx.
func createPartitionIn(ctx context.Context, tx pgx.Tx, spec partitionSpec) error {
	create := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES %s`,
		pgx.Identifier{spec.name()}.Sanitize(), storeTable(spec.store), spec.bounds())
	if _, err := tx.Exec(ctx, create); err != nil {
		return err
	}
	lower, upper := spec.listedBounds()
	_, err := tx.Exec(ctx, `INSERT INTO row_partitions (name, store, lower_bound, upper_bound)
		VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`, spec.name(), string(spec.store), lower, upper)
	return err
}

// createPartition creates a partition in its own short transaction. Creating a partition locks the parent, so it
// waits at most lockTimeout and retries, rather than letting every read queue behind it. A partition another
// replica created in the meantime over part of the same range makes it fail with invalidObjectDefinition; the
// caller reloads the partitions and places its rows again.
func (rs *rowStore) createPartition(ctx context.Context, spec partitionSpec) error {
	err := rs.withLockRetry(ctx, func(ctx context.Context) error {
		return rs.db.inTx(ctx, func(tx pgx.Tx) error {
			if err := setLockTimeout(ctx, tx, 100*time.Millisecond); err != nil {
				return err
			}
			return createPartitionIn(ctx, tx, spec)
		})
	})
	if err != nil {
		return err
	}
	rs.partitionsMu.Lock()
	defer rs.partitionsMu.Unlock()
	if rs.partitions == nil {
		rs.partitions = map[catalog.Store][]partitionSpec{}
	}
	if !slices.ContainsFunc(rs.partitions[spec.store], func(p partitionSpec) bool { return p.name() == spec.name() }) {
		rs.partitions[spec.store] = append(slices.Clip(rs.partitions[spec.store]), spec)
	}
	return nil
}

// setLockTimeout bounds, for the rest of the transaction, how long a statement waits for a lock: DDL on a partition
// waits behind every open statement on it, and every later statement would queue behind the waiting DDL.
func setLockTimeout(ctx context.Context, tx pgx.Tx, d time.Duration) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, max(d.Milliseconds(), 1)))
	return err
}

// Lock order. A request that writes rows, and a run's drop, lock in this order: the stores' parent tables, then
// partitions in name order, then a dataset's advisory lock, then counters in key order. The drop takes the parent
// first (ACCESS EXCLUSIVE, which a detach needs), so it waits for the requests in flight, at most its lock timeout,
// and none of them waits for it while holding what it needs: a drop that locked its partitions first and the parent
// last deadlocked with every request that held the parent and wanted one of them, and lost. A run's batch deletes
// name one partition and never lock a parent.

// lockRows is the statement that takes, in the lock order, the locks of a transaction that writes rows: the stores'
// parent tables alone (ONLY: no partition can be detached or created under it), then the partitions it writes to,
// in name order.
func lockRows(stores []catalog.Store, partitions []string) string {
	parents := make([]string, 0, len(stores))
	for _, s := range stores {
		parents = append(parents, "ONLY "+storeTable(s))
	}
	slices.Sort(parents)
	tables := slices.Compact(parents)
	if len(partitions) > 0 {
		tables = append(tables, tableList(slices.Sorted(slices.Values(partitions))))
	}
	return `LOCK TABLE ` + strings.Join(tables, ", ") + ` IN ROW EXCLUSIVE MODE`
}

// tableList is the partitions' names as a comma-separated list of quoted identifiers, for LOCK and DROP.
func tableList(names []string) string {
	tables := make([]string, 0, len(names))
	for _, name := range names {
		tables = append(tables, pgx.Identifier{name}.Sanitize())
	}
	return strings.Join(tables, ", ")
}

// Lock and race SQLSTATEs a short-locking DDL statement retries on, and the one of a partition that would overlap
// another.
const (
	lockNotAvailable        = "55P03"
	duplicateTable          = "42P07"
	uniqueViolated          = "23505"
	invalidObjectDefinition = "42P17"
)

// withLockRetry runs fn until it succeeds, giving up after a bounded number of lock timeouts. A concurrent creator
// of the same partition is a success, not an error.
func (rs *rowStore) withLockRetry(ctx context.Context, fn func(ctx context.Context) error) error {
	return retryLockTimeouts(ctx, func(ctx context.Context) error {
		err := fn(ctx)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == duplicateTable || pgErr.Code == uniqueViolated) {
			return nil
		}
		return err
	})
}

// retryLockTimeouts runs fn until it ends in anything but a lock timeout, waiting a little longer after each, 50
// times at most: a statement that gave up its lock after a short lock_timeout, so as not to hold a queue of
// requests behind it, tries again once they are through.
func retryLockTimeouts(ctx context.Context, fn func(ctx context.Context) error) error {
	var err error
	for attempt := range 50 {
		err = fn(ctx)
		var pgErr *pgconn.PgError
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

// forgetPartition drops a partition from the cache after a run dropped it, so that rows for its range make a new one.
func (rs *rowStore) forgetPartition(name string) {
	rs.partitionsMu.Lock()
	defer rs.partitionsMu.Unlock()
	for store, parts := range rs.partitions {
		rs.partitions[store] = slices.DeleteFunc(slices.Clone(parts), func(p partitionSpec) bool { return p.name() == name })
	}
}

// partitionRange is a range of placed expiries; a nil bound is unbounded.
type partitionRange struct {
	lower, upper *time.Time
}

// partitionFilter is the partitions of a store that hold rows of one dataset, as ranges of the partition key. A read
// or delete through the store's parent table with it as constants is planned over those partitions only: planning
// one over every partition cost 12.5 s with 5,000 of them (docs/storage.md), and a statement naming a partition
// fails when a run has detached it meanwhile, where one through the parent simply no longer sees it.
type partitionFilter []partitionRange

// none reports whether the dataset has no rows in the store.
func (f partitionFilter) none() bool { return len(f) == 0 }

// sql is the filter as a condition on the partition key of a row r: constants, so that Postgres prunes while it
// plans, whatever the plan cache does with the statement's parameters.
func (f partitionFilter) sql() string {
	const col = "r.placed_expiry"
	if f.none() {
		return "false"
	}
	terms := make([]string, 0, len(f))
	for _, r := range f {
		var conds []string
		if r.lower != nil {
			conds = append(conds, col+" >= "+sqlTime(*r.lower))
		}
		if r.upper != nil {
			conds = append(conds, col+" < "+sqlTime(*r.upper))
		}
		if len(conds) == 0 {
			return "true"
		}
		terms = append(terms, strings.Join(conds, " AND "))
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}

// selectDatasetPartitions lists the ranges of the store's partitions that hold rows of the dataset, by the counters.
const selectDatasetPartitions = `
SELECT p.lower_bound, p.upper_bound FROM row_partitions p
WHERE p.store = $2 AND EXISTS (
    SELECT 1 FROM row_stats st WHERE st.partition_name = p.name AND st.dataset_id = $1 AND st.row_count > 0)
ORDER BY p.lower_bound`

// datasetPartitions returns the partitions of the store that hold rows of the dataset, adjacent ones merged into one
// range.
func datasetPartitions(ctx context.Context, q querier, datasetID string, store catalog.Store) (partitionFilter, error) {
	rows, err := q.Query(ctx, selectDatasetPartitions, datasetID, string(store))
	if err != nil {
		return nil, fmt.Errorf("find partitions of %s: %w", datasetID, err)
	}
	var f partitionFilter
	var lower, upper pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&lower, &upper}, func() error {
		f = f.with(rangeOf(lower, upper))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find partitions of %s: %w", datasetID, err)
	}
	return f, nil
}

// rangeOf is a partition's range from its bounds in row_partitions, infinite bounds left open.
func rangeOf(lower, upper pgtype.Timestamptz) partitionRange {
	r := partitionRange{}
	if lower.InfinityModifier == pgtype.Finite {
		r.lower = new(lower.Time)
	}
	if upper.InfinityModifier == pgtype.Finite {
		r.upper = new(upper.Time)
	}
	return r
}

// with adds a range that starts at or after every range of f, merged into the last one when adjacent.
func (f partitionFilter) with(r partitionRange) partitionFilter {
	if n := len(f); n > 0 && f[n-1].upper != nil && r.lower != nil && f[n-1].upper.Equal(*r.lower) {
		f[n-1].upper = r.upper
		return f
	}
	return append(f, r)
}
