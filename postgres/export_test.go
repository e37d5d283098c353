package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// OnChunkTx makes every ingestion chunk call f with the partitions it was placed in, before the transaction that
// writes it begins: where a run can drop them under it.
func (db *DB) OnChunkTx(f func(partitions []string)) { db.rows.hooks.beforeChunkTx = f }

// OnPartitionLookup makes every delete by _id call f after it has read which partitions hold its dataset's rows.
func (db *DB) OnPartitionLookup(f func()) { db.rows.hooks.afterPartitionLookup = f }

// OnRemovalCommit makes every removal transaction of a sweep (a drop, a batch, a block range) call f once it has
// committed; nil stops it. Set it only while no sweep runs.
func (db *DB) OnRemovalCommit(f func()) { db.rows.hooks.afterRemoval = f }

// OnDropAttempt makes every attempt at a batch of drops call f and take what it returns as its BatchTimeout; nil
// stops it. Set it only while no sweep runs.
func (db *DB) OnDropAttempt(f func() time.Duration) { db.rows.hooks.dropTimeout = f }

// OnPendingLock makes every listing of a pending listing, by a reader or a release, call f with its detached table
// and its context once it holds the listing's lock, before it lists; nil stops it. Set it only while nothing lists.
func (db *DB) OnPendingLock(f func(ctx context.Context, name string)) {
	db.rows.hooks.pendingLocked = f
}

// OnManifestFlush makes every reader of a run's manifest call f after it has written out the run's pending
// listings, before it counts the manifest: where a drop of the run can commit under it. nil stops it.
func (db *DB) OnManifestFlush(f func()) { db.rows.hooks.afterManifestFlush = f }

// OnPreviewCounters makes every preview call f after it has read its dataset's counters, before it reads rows.
func (db *DB) OnPreviewCounters(f func()) { db.rows.hooks.afterPreviewCounters = f }

// MeasuredPartitions lists the partitions whose sizes the metrics have measured.
func (db *DB) MeasuredPartitions() []string {
	db.rows.sizesMu.Lock()
	defer db.rows.sizesMu.Unlock()
	var names []string
	for name := range db.rows.sizes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// PlannedPartitions returns the partitions of the lake store that Postgres plans to read for a page of the
// dataset's rows (FindRows) and for a delete of its rows by _id, from EXPLAIN.
func (s *RowService) PlannedPartitions(ctx context.Context, datasetID string) (read, deleteByID []string, err error) {
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		parts, err := datasetPartitions(ctx, tx, datasetID, catalog.LakeHouse)
		if err != nil {
			return err
		}
		query, args := rowQuery(datasetID, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 5}, s.db.now(), nil, parts)
		if read, err = plannedRelations(ctx, tx, query, args); err != nil {
			return err
		}
		deleteByID, err = plannedRelations(ctx, tx, fmt.Sprintf(deleteByIDSQL, "lake_rows", parts.sql(), "", "", ""),
			[]any{datasetID, []string{"x"}, string(catalog.LakeHouse)})
		return err
	})
	return read, deleteByID, err
}

// plannedRelations returns the lake partitions a statement's plan reads, from EXPLAIN (FORMAT JSON).
func plannedRelations(ctx context.Context, tx pgx.Tx, query string, args []any) ([]string, error) {
	var plan []map[string]any
	if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+query, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&plan); err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	var names []string
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		if rel, ok := node["Relation Name"].(string); ok && strings.HasPrefix(rel, "lake_rows_") && !slices.Contains(names, rel) {
			names = append(names, rel)
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
	slices.Sort(names)
	return names, nil
}

// The sweep's steps, for tests that drive a sweep directly rather than through the port (jobs.Sweeper).

// DropPartitions is dropPartitions.
func (w *Sweeper) DropPartitions(ctx context.Context, s Sweep) (DropResult, error) {
	return w.dropPartitions(ctx, s)
}

// SweepPlaced is sweepPlaced.
func (w *Sweeper) SweepPlaced(ctx context.Context, s Sweep) (PlacedResult, error) {
	return w.sweepPlaced(ctx, s)
}

// SweepDataset is sweepDataset.
func (w *Sweeper) SweepDataset(ctx context.Context, s Sweep, datasetID string) (SweepResult, error) {
	return w.sweepDataset(ctx, s, datasetID)
}

// SweepResult, DropResult and PlacedResult are the sweep's results, for tests that compare them.
type (
	SweepResult  = sweepResult
	DropResult   = dropResult
	PlacedResult = placedResult
)

// SweepQueries are the row store's statements the sweeper drives, for tests that call them one at a time.
type SweepQueries struct{ rows *rowStore }

// Queries returns the statements the sweeper drives.
func (w *Sweeper) Queries() SweepQueries { return SweepQueries{rows: w.rows()} }

// DropPartitions is dropPartitions.
func (q SweepQueries) DropPartitions(ctx context.Context, sw Sweep, names []string, lockTimeout time.Duration) (map[string]map[string]int64, error) {
	return q.rows.dropPartitions(ctx, sw, names, lockTimeout)
}

// ForgetIDFilters is forgetIDFilters.
func (q SweepQueries) ForgetIDFilters(ctx context.Context, names []string) error {
	return q.rows.forgetIDFilters(ctx, names)
}

// DatasetsWithLaterWork is datasetsWithLaterWork.
func (q SweepQueries) DatasetsWithLaterWork(ctx context.Context, sw Sweep, datasetIDs []string) ([]string, error) {
	return q.rows.datasetsWithLaterWork(ctx, sw, datasetIDs)
}

// MustSweeper is NewSweeper for a configuration the test knows to be valid.
func MustSweeper(db *DB, cfg SweepConfig) *Sweeper {
	w, err := NewSweeper(db, cfg, nil)
	if err != nil {
		panic(err)
	}
	return w
}

// OpenTraced is Open with every statement of the pool's connections reported to tracer (which may also implement
// pgx.CopyFromTracer): the sessions' settings are the service's.
func OpenTraced(ctx context.Context, url string, tracer pgx.QueryTracer) (*DB, error) {
	cfg, err := poolConfig(url, PoolOptions{})
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Tracer = tracer
	return openWithConfig(ctx, cfg, nil)
}

// PartitionSizesSQL is the statement that measures partitions for the datasets' storageSize: it sums the counters
// of every dataset in a partition.
const PartitionSizesSQL = partitionSizes

// SetPacingClock gives the sweeper's pacing a clock: now times the batches and the busy hold, and sleep takes the
// rests instead of waiting. Set it before the sweep starts.
func (w *Sweeper) SetPacingClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) {
	w.pace.now, w.pace.sleep = now, sleep
}

// BeginTaggedIngestion begins a transaction on its own connection whose session is tagged as an ingestion's, as a
// chunk's transaction is, until the transaction ends.
func (db *DB) BeginTaggedIngestion(ctx context.Context) (pgx.Tx, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := tagIngestion(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

// IngestionBusy says whether a session of the database is tagged as an ingestion's now.
func (db *DB) IngestionBusy(ctx context.Context) (bool, error) {
	var busy bool
	err := db.Pool.QueryRow(ctx, ingestionBusySQL).Scan(&busy)
	return busy, err
}

// PaceAfter is the pacing of a batch that began at started, as a worker does after each batch.
func (w *Sweeper) PaceAfter(ctx context.Context, started time.Time) error {
	return w.pace.after(ctx, started)
}

// OrgTableNames lists the tables a move copies, in its order.
func OrgTableNames() []string {
	out := make([]string, len(orgTables))
	for i, ot := range orgTables {
		out[i] = ot.name
	}
	return out
}

// NotMovedTables is the registry's list of tables a move leaves, with why.
func NotMovedTables() map[string]string { return notMoved }

// OrgRowCounts counts the org's rows in each table of the registry.
func OrgRowCounts(ctx context.Context, db *DB, org string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, ot := range orgTables {
		var n int64
		if err := db.Pool.QueryRow(ctx, countSQL(ot, org)).Scan(&n); err != nil {
			return nil, err
		}
		out[ot.name] = n
	}
	return out, nil
}

// IdentityDeletePlan is EXPLAIN (FORMAT JSON) of a work order's delete of the dataset's rows of a store carrying any
// of keys, planned with sequential scans disabled: a plan without a sequential scan shows that the statement can
// find the rows through the identities indexes, whatever the table's size makes the planner prefer.
func (db *DB) IdentityDeletePlan(ctx context.Context, datasetID string, store catalog.Store, keys []string) (string, error) {
	var plan string
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		parts, err := datasetPartitions(ctx, tx, datasetID, store)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		query := identityDeleteSQL(storeTable(store), parts, len(keys))
		return tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query, datasetID, keys, string(store), maxAuditedIdentities,
			"DI-plan", db.now()).Scan(&plan)
	})
	return plan, err
}

// SetPassRows makes the runner plan passes of about n rows (passRows), so that a test's few rows take several.
func (r *WorkOrderRunner) SetPassRows(n int64) { r.passRows = n }

// SetPassTimeout bounds each pass's statements to d instead of the time the context has left; 0 goes back to that.
func (r *WorkOrderRunner) SetPassTimeout(d time.Duration) { r.passTimeout = d }

// BeforePassCommit makes each pass call f at the end of its transaction; an error from f rolls the pass back. nil
// stops it.
func (r *WorkOrderRunner) BeforePassCommit(f func() error) { r.beforePassCommit = f }

// WorkOrderPasses returns the order's passes: how many are planned and how many are done.
func (db *DB) WorkOrderPasses(ctx context.Context, id string) (planned, done int, err error) {
	err = db.Pool.QueryRow(ctx, `SELECT count(*), count(done_at) FROM workorder_passes WHERE workorder_id = $1`, id).Scan(&planned, &done)
	return planned, done, err
}

// WorkOrderPassPlan is EXPLAIN (FORMAT JSON) of order id's pass over the whole of a partition for the datasets,
// under the pass's planner settings, with sequential scans priced out as on a table large enough that the planner
// would rather read an index.
func (db *DB) WorkOrderPassPlan(ctx context.Context, id, partition string, datasets []string) (string, error) {
	var plan string
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, blockScanSettings+`; SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		p := workOrderPass{store: catalog.LakeHouse, partition: partition}
		return tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+passSQL(p, false), passArgs(id, p, datasets, nil, db.now())...).Scan(&plan)
	})
	return plan, err
}
