package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// This file is the sweep: the algorithm that removes a run's expired rows from the expiry-placed partitions
// (docs/storage.md), drops of whole partitions where every row is deletable, a walk of the boundary partitions in
// block ranges, and batched deletes by dataset for the rest. It lives with the statements it drives (sweep.go),
// which only Postgres implements; package jobs sees it through the narrow port jobs.Sweeper, which Sweeper
// implements.

// SweepConfig tunes the removal of expired rows. NewSweeper gives zero fields their defaults and refuses negative
// ones. The defaults are what the benchmark of docs/benchmarks.md chose; its figures live there.
type SweepConfig struct {
	// BatchSize is how many rows one DELETE removes; each batch is its own short transaction, so a run never holds
	// locks that stall ingestion or reads for long. Default 10,000: a batch short enough that a request waiting
	// behind it does not notice, long enough that per-statement costs stay small.
	BatchSize int
	// BatchTimeout bounds one batch or one partition drop. Default 30 s.
	BatchTimeout time.Duration
	// LockTimeout bounds how long a partition drop waits for its lock. A drop waits behind every open statement on
	// the parent, and every later statement queues behind the waiting drop, so it gives up quickly and retries.
	// Default 100 ms.
	LockTimeout time.Duration
	// DropAttempts is how many times a drop is tried before its rows are left to the next run. Default 20.
	DropAttempts int
	// DropBatch is how many partitions are dropped together. A batch pays one lock round and one commit for all of
	// them, where most of a lone drop's time goes; it holds the store's parent table, which reads and ingestion
	// wait for, only while it detaches them. Their files are freed later, by ReleaseDetached, so that the run does
	// not wait for the file system. Default 32, more than a run usually drops, so that a run takes one lock round.
	DropBatch int
	// ListTimeout bounds the release's listing of one detached table whose rows are still to be listed in a
	// deletion manifest (pending_listings), with the table's drop, in one transaction: a run's drop records which
	// rows are to be listed, and the release lists them (manifest.go). A table not listed in time stays, with its
	// pending listing, for the next release, and is logged; it is never dropped unlisted. Default 10 minutes: about
	// 6M rows at the 40–90 µs a row a listing took on a small machine (docs/benchmarks.md).
	ListTimeout time.Duration
	// Workers is how many connections a sweep works on at once: in a run's part one drops and then walks while the
	// others walk, block range by block range, so that none idles while there are ranges left; in a dataset's part,
	// one partition each, so that their counter updates never wait for each other. Default 2: on a small machine
	// the walk gains from a second connection while ingestion beside it keeps most of its rate, and a third only
	// competes for the same cores (docs/benchmarks.md has the measurements).
	Workers int
	// BusyShare is the percentage of its time each worker works while ingestion is busy, on this replica or any
	// other: after each batch that removes rows it rests in proportion to the batch's time (pacing.go). An idle
	// run never rests. 100 turns pacing off. Default 25: on a small machine a run then leaves ingestion at least
	// four fifths of its idle rate (docs/storage.md, "Pacing a run beside ingestion").
	BusyShare int
}

// withDefaults gives the zero fields their defaults and refuses negative ones, once, when the sweeper is built.
func (c SweepConfig) withDefaults() (SweepConfig, error) {
	if c.BatchSize < 0 || c.BatchTimeout < 0 || c.LockTimeout < 0 || c.DropAttempts < 0 || c.DropBatch < 0 || c.ListTimeout < 0 ||
		c.Workers < 0 || c.BusyShare < 0 {
		return c, fmt.Errorf("sweep configuration %+v: no field may be negative", c)
	}
	if c.BusyShare > 100 {
		return c, fmt.Errorf("sweep configuration %+v: BusyShare is a percentage, at most 100", c)
	}
	c.BatchSize = cmp.Or(c.BatchSize, 10_000)
	c.BatchTimeout = cmp.Or(c.BatchTimeout, 30*time.Second)
	c.LockTimeout = cmp.Or(c.LockTimeout, 100*time.Millisecond)
	c.DropAttempts = cmp.Or(c.DropAttempts, 20)
	c.DropBatch = cmp.Or(c.DropBatch, 32)
	c.ListTimeout = cmp.Or(c.ListTimeout, 10*time.Minute)
	c.Workers = cmp.Or(c.Workers, 2)
	c.BusyShare = cmp.Or(c.BusyShare, 25)
	return c, nil
}

// Sweep is one evaluation of one store: the rows that are expired at At and were ingested at least Grace before At
// are deletable. Datasets, when set, limits the sweep to some datasets (a manual run).
type Sweep struct {
	RunID  string
	Store  catalog.Store
	At     time.Time
	Grace  retention.Period
	DryRun bool
	// Datasets limits a whole-partition drop to partitions holding only these datasets; nil means any.
	Datasets map[string]bool
	// Accounted names partitions whose rows a dry run already counted as dropped, so the row-level pass skips them.
	Accounted map[string]bool
	// Walked names the partitions the run's boundary walk has swept (sweepPlaced), which the per-dataset pass
	// skips: their deletable rows of every dataset in scope are gone.
	Walked map[string]bool
}

// sweepOf is the sweep of a run's plan; skip names the partitions its dataset parts pass over (catalog.RunPart).
func sweepOf(plan *catalog.Plan, skip []string) Sweep {
	s := Sweep{RunID: plan.RunID, Store: plan.Store, At: plan.At, Grace: plan.Grace, DryRun: plan.DryRun,
		Datasets: plan.Scope}
	names := make(map[string]bool, len(skip))
	for _, name := range skip {
		names[name] = true
	}
	if plan.DryRun {
		s.Accounted = names
	} else {
		s.Walked = names
	}
	return s
}

// placedPartition is a partition placed at or before a sweep's time that still holds rows, with how many, in all
// and of the datasets in the sweep's scope, from the counters.
type placedPartition struct {
	Name      string
	Rows      int64
	ScopeRows int64
}

// Sweeper removes expired rows: whole partitions where every row is deletable, then batched deletes for the rest.
// It is safe to stop at any point: each drop and each batch commits with its counts, and a later sweep finishes.
// It implements jobs.Sweeper.
type Sweeper struct {
	db     *DB
	cfg    SweepConfig
	pace   *pacer
	logger *slog.Logger
}

// NewSweeper returns a Sweeper on db with cfg's defaults applied; an error for a negative field. A nil logger
// discards.
func NewSweeper(db *DB, cfg SweepConfig, logger *slog.Logger) (*Sweeper, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{db: db, cfg: cfg, pace: newPacer(db, cfg.BusyShare, logger),
		logger: logger}, nil
}

// rows is the row store whose statements the sweep drives.
func (w *Sweeper) rows() *rowStore { return w.db.rows }

// RunPart does the run's own part (jobs.Sweeper): it removes the deletable rows of every partition placed at or
// before the run's time (sweepPlaced), or in a dry run counts what the drops would remove. On an error it returns
// what it did so far.
func (w *Sweeper) RunPart(ctx context.Context, plan *catalog.Plan) (catalog.RunPart, error) {
	s := sweepOf(plan, nil)
	if plan.DryRun {
		dropped, err := w.dropPartitions(ctx, s)
		return catalog.RunPart{Dropped: rowsOf(dropped.Datasets), PartitionsDropped: len(dropped.Dropped),
			Skip: slices.Sorted(maps.Keys(s.Accounted))}, err
	}
	placed, err := w.sweepPlaced(ctx, s)
	var walked int64
	for _, r := range placed.Swept {
		walked += r.Rows
	}
	return catalog.RunPart{Dropped: rowsOf(placed.Dropped.Datasets), PartitionsDropped: len(placed.Dropped.Dropped),
		RowsWalked: walked, PartitionsWalked: len(placed.Walked), Skip: slices.Sorted(maps.Keys(placed.Walked))}, err
}

func rowsOf(m map[string]sweepResult) map[string]int64 {
	rows := make(map[string]int64, len(m))
	for ds, r := range m {
		rows[ds] = r.Rows
	}
	return rows
}

// DatasetsLeft returns those of the plan's pending datasets that still have deletable rows once the run's part
// has swept the partitions skip names (jobs.Sweeper): rows in partitions placed at or before the run's time that
// the walk left, or in later partitions whose TTL was shortened since or that hold imports an earlier setting
// expired, or of a deleted dataset.
func (w *Sweeper) DatasetsLeft(ctx context.Context, plan *catalog.Plan, skip []string) ([]string, error) {
	return w.rows().datasetsWithLaterWork(ctx, sweepOf(plan, skip), plan.Pending)
}

// DatasetPart deletes (in a dry run, counts) the dataset's deletable rows that the run's part left, passing over
// the partitions skip names, and returns how many (jobs.Sweeper).
func (w *Sweeper) DatasetPart(ctx context.Context, plan *catalog.Plan, datasetID string, skip []string) (int64, error) {
	res, err := w.sweepDataset(ctx, sweepOf(plan, skip), datasetID)
	return res.Rows, err
}

// sweepResult is what a sweep of one dataset, or one drop phase, removed or would remove.
type sweepResult struct {
	Rows       int64
	Partitions int
}

// dropPartitions drops every partition whose rows are all deletable, DropBatch partitions a transaction, and returns
// what each dataset lost. In a dry run nothing is dropped; the partitions that would be are added to s.Accounted.
func (w *Sweeper) dropPartitions(ctx context.Context, s Sweep) (dropResult, error) {
	parts, err := w.rows().droppablePartitions(ctx, s)
	if err != nil {
		return dropResult{}, fmt.Errorf("list droppable partitions of %s: %w", s.Store, err)
	}
	return w.drop(ctx, s, parts)
}

func (w *Sweeper) drop(ctx context.Context, s Sweep, parts []string) (dropResult, error) {
	res := dropResult{Datasets: map[string]sweepResult{}, Dropped: map[string]bool{}}
	for len(parts) > 0 {
		batch := parts[:min(w.cfg.DropBatch, len(parts))]
		parts = parts[len(batch):]
		if !s.DryRun {
			if err := w.rows().forgetIDFilters(ctx, batch); err != nil {
				return res, err
			}
		}
		dropped, err := w.dropWithRetry(ctx, s, batch)
		if err != nil {
			return res, err
		}
		for _, p := range batch {
			rows, ok := dropped[p]
			if !ok {
				continue
			}
			res.add(p, rows)
			if s.DryRun && s.Accounted != nil {
				s.Accounted[p] = true
			}
			w.logger.InfoContext(ctx, "retention: dropped partition", slog.String("run_id", s.RunID),
				slog.String("partition", p), slog.Int("datasets", len(rows)), slog.Bool("dry_run", s.DryRun))
		}
	}
	return res, nil
}

// dropResult is what a drop phase removed: per dataset, and which partitions.
type dropResult struct {
	Datasets map[string]sweepResult
	Dropped  map[string]bool
}

func (r *dropResult) add(partition string, rows map[string]int64) {
	r.Dropped[partition] = true
	for ds, n := range rows {
		d := r.Datasets[ds]
		d.Rows += n
		d.Partitions++
		r.Datasets[ds] = d
	}
}

func (w *Sweeper) dropWithRetry(ctx context.Context, s Sweep, batch []string) (map[string]map[string]int64, error) {
	var lastErr error
	for attempt := range w.cfg.DropAttempts {
		timeout := w.cfg.BatchTimeout
		if f := w.rows().hooks.dropTimeout; f != nil {
			timeout = f()
		}
		bctx, cancel := context.WithTimeout(ctx, timeout)
		dropped, err := w.rows().dropPartitions(bctx, s, batch, w.cfg.LockTimeout)
		timedOut := errors.Is(bctx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return dropped, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lastErr = err
		if timedOut {
			// Its own work, not a lock (LockTimeout bounds those), took the whole BatchTimeout, and would take it
			// again: the walk removes the rows in batches of its own instead.
			break
		}
		w.logger.DebugContext(ctx, "retention: partition drop waits for its locks", slog.String("first", batch[0]),
			slog.Int("partitions", len(batch)), slog.Int("attempt", attempt+1), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	// Left for the next run, or for the row-level pass of this one; never an early delete.
	w.logger.WarnContext(ctx, "retention: partitions not dropped", slog.String("first", batch[0]),
		slog.Int("partitions", len(batch)), slog.Any("error", lastErr))
	return nil, nil
}

// ReleaseDetached drops the tables of the partitions that drops detached from the store at or before detachedBy,
// which frees their files, and returns how many it dropped. A run leaves this to a job of its own, after the run's
// part: the rows left the store when their partitions were detached, as a DELETE's rows do at its commit, before
// VACUUM frees their space. Dropping a detached table waits for nobody's statements but its own. While ingestion is
// busy, the tables go one a transaction, with the run's rest after each (pacing.go): freeing a partition's files
// competes with ingestion for the disk. A table whose rows a deletion manifest still has to list (a drop's pending
// listing) is listed first, in the transaction that drops it, within ListTimeout (listAndRelease). It implements
// jobs.Sweeper.
func (w *Sweeper) ReleaseDetached(ctx context.Context, detachedBy time.Time) (int, error) {
	start := time.Now()
	n := 0
	for {
		limit := 0
		if w.pace.share < 100 {
			busy, err := w.pace.busy(ctx, w.pace.now())
			if err != nil {
				return n, err
			}
			if busy {
				limit = 1
			}
		}
		started := w.pace.start()
		bctx, cancel := context.WithTimeout(ctx, w.cfg.BatchTimeout)
		dropped, err := w.rows().dropDetached(bctx, detachedBy, w.cfg.LockTimeout, limit)
		cancel()
		if err != nil {
			return n, err
		}
		n += dropped
		if limit == 0 || dropped < limit {
			break
		}
		if err := w.pace.rest(ctx, started); err != nil {
			return n, err
		}
	}
	listed, err := w.listAndRelease(ctx, detachedBy)
	n += listed
	if err != nil {
		return n, err
	}
	if n > 0 {
		w.logger.InfoContext(ctx, "retention: detached partitions dropped", slog.Int("tables", n),
			slog.Duration("duration", time.Since(start)))
	}
	return n, nil
}

// listAndRelease lists and drops, one a transaction, the detached tables whose rows are still to be listed in a
// deletion manifest (rowStore.releaseListed), each within ListTimeout, and returns how many it dropped. A table
// not listed in time is logged and left, with its pending listing, for the next release: each is tried once a
// release, so a table too large for the bound never holds a release in a loop, and none is dropped unlisted. While
// ingestion is busy, it rests after each, as the drops do.
func (w *Sweeper) listAndRelease(ctx context.Context, detachedBy time.Time) (int, error) {
	names, err := w.rows().pendingDetached(ctx, detachedBy)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		started := w.pace.start()
		lctx, cancel := context.WithTimeout(ctx, w.cfg.ListTimeout)
		dropped, err := w.rows().releaseListed(lctx, name, w.cfg.LockTimeout)
		cancel()
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if err != nil {
			w.logger.WarnContext(ctx, "retention: detached partition not listed; left for the next release", slog.String("table", name),
				slog.Duration("list_timeout", w.cfg.ListTimeout), slog.Any("error", err))
			continue
		}
		if dropped {
			n++
		}
		if err := w.restIfBusy(ctx, started); err != nil {
			return n, err
		}
	}
	return n, nil
}

// restIfBusy rests in proportion to the work begun at started while ingestion is busy (pacing.go).
func (w *Sweeper) restIfBusy(ctx context.Context, started time.Time) error {
	if w.pace.share >= 100 {
		return nil
	}
	busy, err := w.pace.busy(ctx, w.pace.now())
	if err != nil || !busy {
		return err
	}
	return w.pace.rest(ctx, started)
}

// sweepPlaced removes the deletable rows of every partition placed at or before the sweep's time, as the expiry
// layout intends: it drops the partitions whose rows are all deletable (detaching them: ReleaseDetached frees their
// files later) and walks the others (the current month, and groups a drop has to leave) in block ranges, deleting
// across datasets. One worker drops and then joins the walk; the others walk from the start, so that no worker idles
// while ranges remain. The drops and the walk never touch one partition. A partition listed for a drop that did not
// happen is walked afterwards.
//
// A partition is walked only where the datasets in scope hold at least a quarter of its rows: a walk reads the
// whole partition, and a run scoped to a few datasets (a manual run, or one org's) deletes their rows faster by
// index in the per-dataset pass. Not for dry runs.
func (w *Sweeper) sweepPlaced(ctx context.Context, s Sweep) (placedResult, error) {
	res := placedResult{Swept: map[string]sweepResult{}, Walked: map[string]bool{}}
	droppable, err := w.rows().droppablePartitions(ctx, s)
	if err != nil {
		return res, fmt.Errorf("list droppable partitions of %s: %w", s.Store, err)
	}
	placed, err := w.rows().boundaryPartitions(ctx, s)
	if err != nil {
		return res, fmt.Errorf("list boundary partitions of %s: %w", s.Store, err)
	}
	toDrop := map[string]bool{}
	for _, name := range droppable {
		toDrop[name] = true
	}
	var walk, maybe []string
	for _, p := range placed {
		switch {
		case 4*p.ScopeRows < p.Rows:
		case toDrop[p.Name]:
			maybe = append(maybe, p.Name)
		default:
			walk = append(walk, p.Name)
		}
	}
	q := newWalkQueue()
	if err := w.planWalk(ctx, q, walk); err != nil {
		return res, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.cfg.Workers) // one worker: the drops, then the walk
	goRecover(g, func() (err error) {
		if res.Dropped, err = w.drop(gctx, s, droppable); err != nil {
			return err
		}
		return w.walk(gctx, s, q)
	})
	for range w.cfg.Workers - 1 {
		goRecover(g, func() error { return w.walk(gctx, s, q) })
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	var left []string
	for _, name := range maybe {
		if !res.Dropped.Dropped[name] {
			left = append(left, name)
		}
	}
	if err := w.planWalk(ctx, q, left); err != nil {
		return res, err
	}
	if err := w.walk(ctx, s, q); err != nil {
		return res, err
	}
	walk = append(walk, left...)
	for _, name := range walk {
		res.Walked[name] = true
	}
	res.Swept = q.swept
	return res, nil
}

// placedResult is what sweepPlaced removed: by the drops, by the walk, and which partitions the walk swept.
type placedResult struct {
	Dropped dropResult
	Swept   map[string]sweepResult
	Walked  map[string]bool
}

// goRecover runs fn in the group and turns a panic into the group's error, so that a bug in one worker fails the
// job that started it, which River records and retries, instead of ending the process as a panic in a goroutine
// of its own would.
func goRecover(g *errgroup.Group, fn func() error) {
	g.Go(func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic in a sweep worker: %v\n%s", r, debug.Stack())
			}
		}()
		return fn()
	})
}

// blockRange is one statement's share of a partition walk: blocks [from, to).
type blockRange struct {
	part     string
	from, to int64
}

// walkQueue hands the block ranges of a walk to its workers and collects what they removed.
type walkQueue struct {
	mu     sync.Mutex
	ranges []blockRange
	next   int
	left   map[string]int   // ranges of each partition not yet done
	rows   map[string]int64 // rows removed from each partition so far
	blocks map[string]int64
	swept  map[string]sweepResult
}

// planWalk adds the partitions to the queue, cut into block ranges of about four BatchSize rows rather than walked
// in LIMIT batches, because a LIMIT batch scans again, from the partition's start, everything the batches before it
// left; a range is read once. Rows stored after the plan was made lie beyond its last range and wait for the next
// run. In the boundary partition about half the rows are expired, so a range deletes about two batches' worth, and
// the per-statement cost (planning, counters, commit) is paid four times less often.
func (w *Sweeper) planWalk(ctx context.Context, q *walkQueue, parts []string) error {
	for _, part := range parts {
		blocks, perBlock, err := w.rows().partitionSize(ctx, part)
		if err != nil {
			return fmt.Errorf("size of %s: %w", part, err)
		}
		step := max(int64(4*float64(w.cfg.BatchSize)/max(perBlock, 1)), 1)
		for from := int64(0); from < blocks; from += step {
			q.ranges = append(q.ranges, blockRange{part: part, from: from, to: from + step})
			q.left[part]++
		}
		q.blocks[part] = blocks
	}
	return nil
}

func newWalkQueue() *walkQueue {
	return &walkQueue{left: map[string]int{}, rows: map[string]int64{}, blocks: map[string]int64{},
		swept: map[string]sweepResult{}}
}

func (q *walkQueue) take() (blockRange, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next == len(q.ranges) {
		return blockRange{}, false
	}
	q.next++
	return q.ranges[q.next-1], true
}

// done records what a range removed and, when it was the partition's last, returns the partition's blocks and rows
// for the log.
func (q *walkQueue) done(r blockRange, rows map[string]int64) (blocks, total int64, last bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ds, n := range rows {
		d := q.swept[ds]
		d.Rows += n
		q.swept[ds] = d
		q.rows[r.part] += n
	}
	q.left[r.part]--
	return q.blocks[r.part], q.rows[r.part], q.left[r.part] == 0
}

// walk deletes the deletable rows of the queue's ranges until none is left. Several workers may walk one partition
// at once; the store keeps their counter updates from deadlocking.
func (w *Sweeper) walk(ctx context.Context, s Sweep, q *walkQueue) error {
	for {
		r, ok := q.take()
		if !ok {
			return nil
		}
		started := w.pace.start()
		bctx, cancel := context.WithTimeout(ctx, w.cfg.BatchTimeout)
		rows, err := w.rows().deleteBlocks(bctx, s, r.part, r.from, r.to)
		cancel()
		if err != nil {
			return fmt.Errorf("delete expired rows in %s: %w", r.part, err)
		}
		if blocks, total, last := q.done(r, rows); last {
			w.logger.InfoContext(ctx, "retention: boundary partition swept", slog.String("run_id", s.RunID),
				slog.String("partition", r.part), slog.Int64("blocks", blocks), slog.Int64("rows", total))
		}
		if err := w.pace.after(ctx, started); err != nil {
			return err
		}
	}
}

// sweepDataset deletes (or, in a dry run, counts) the dataset's deletable rows that no drop removed, in Workers
// partitions at once, never two workers on one partition, so that their counter updates never wait for each other.
func (w *Sweeper) sweepDataset(ctx context.Context, s Sweep, datasetID string) (sweepResult, error) {
	parts, err := w.rows().datasetPartitions(ctx, s, datasetID)
	if err != nil {
		return sweepResult{}, fmt.Errorf("list partitions of %s: %w", datasetID, err)
	}
	var rows atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.cfg.Workers)
	for _, part := range parts {
		if s.Accounted[part] {
			continue
		}
		goRecover(g, func() error {
			n, err := w.sweepPartition(gctx, s, datasetID, part)
			rows.Add(n)
			return err
		})
	}
	err = g.Wait()
	return sweepResult{Rows: rows.Load()}, err
}

// sweepPartition deletes the dataset's deletable rows in one partition, by index, in batches that each start where
// the one before stopped (batchDataset). In a dry run it counts them.
func (w *Sweeper) sweepPartition(ctx context.Context, s Sweep, datasetID, part string) (int64, error) {
	if s.DryRun {
		bctx, cancel := context.WithTimeout(ctx, w.cfg.BatchTimeout)
		defer cancel()
		n, err := w.rows().countDeletable(bctx, s, datasetID, part)
		if err != nil {
			return 0, fmt.Errorf("count expired rows of %s in %s: %w", datasetID, part, err)
		}
		return n, nil
	}
	return w.batchDataset(ctx, s, datasetID, part)
}

// batchDataset deletes the dataset's deletable rows of the partition in batches of BatchSize read by index, each
// from the key where the one before stopped, until one comes back short.
func (w *Sweeper) batchDataset(ctx context.Context, s Sweep, datasetID, part string) (int64, error) {
	var total int64
	var key *batchKey
	for {
		started := w.pace.start()
		bctx, cancel := context.WithTimeout(ctx, w.cfg.BatchTimeout)
		n, next, err := w.rows().deleteBatch(bctx, s, datasetID, part, w.cfg.BatchSize, key)
		cancel()
		if err != nil {
			return total, fmt.Errorf("delete expired rows of %s in %s: %w", datasetID, part, err)
		}
		total += n
		w.logger.DebugContext(ctx, "retention: batch", slog.String("dataset_id", datasetID), slog.String("partition", part), slog.Int64("rows", n))
		if next == nil {
			return total, nil
		}
		key = next
		if err := w.pace.after(ctx, started); err != nil {
			return total, err
		}
	}
}
