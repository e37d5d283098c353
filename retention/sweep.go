package retention

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// SweepConfig tunes the removal of expired rows. Zero fields get the defaults.
type SweepConfig struct {
	// BatchSize is how many rows one DELETE removes; each batch is its own short transaction, so a run never holds
	// locks that stall ingestion or reads for long. Default 10,000 (about 100 ms a batch).
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
	// them, where most of a lone drop's time went; it holds the store's parent table, which reads and ingestion
	// wait for, only while it detaches them. Their files are freed later, by ReleaseDetached (0.81 to 0.96 s for
	// the benchmark's 18 partitions of 150,000 rows). Default 32.
	DropBatch int
	// Workers is how many connections a sweep works on at once: in SweepPlaced one drops and then walks while the
	// others walk, block range by block range, so that none idles while there are ranges left; in a dataset's pass,
	// one partition each, so that their counter updates never wait for each other. On the 2-core benchmark machine
	// two workers made the run 1.5x faster (1.1 s against 1.7 s) and left ingestion beside it 50 to 68% of its idle
	// rate, against 73% with one (docs/benchmarks.md). Default 2.
	Workers int
}

func (c SweepConfig) withDefaults() SweepConfig {
	c.BatchSize = cmp.Or(c.BatchSize, 10_000)
	c.BatchTimeout = cmp.Or(c.BatchTimeout, 30*time.Second)
	c.LockTimeout = cmp.Or(c.LockTimeout, 100*time.Millisecond)
	c.DropAttempts = cmp.Or(c.DropAttempts, 20)
	c.DropBatch = cmp.Or(c.DropBatch, 32)
	c.Workers = cmp.Or(c.Workers, 2)
	return c
}

// Sweep is one evaluation of one store: the rows that are expired at At and were ingested at least Grace before At
// are deletable. Scope, when set, limits the sweep to some datasets (a manual run).
type Sweep struct {
	RunID  string
	Store  string
	At     time.Time
	Grace  Period
	DryRun bool
	// Datasets limits a whole-partition drop to partitions holding only these datasets; nil means any.
	Datasets map[string]bool
	// Accounted names partitions whose rows a dry run already counted as dropped, so the row-level pass skips them.
	Accounted map[string]bool
	// Walked names the partitions the run's boundary walk has swept (SweepPlaced), which the per-dataset pass
	// skips: their deletable rows of every dataset in scope are gone.
	Walked map[string]bool
}

// PlacedPartition is a partition placed at or before a sweep's time that still holds rows, with how many, in all
// and of the datasets in the sweep's scope, from the counters.
type PlacedPartition struct {
	Name      string
	Rows      int64
	ScopeRows int64
}

// Partition is a candidate for a whole drop: every row in it was placed with an expiry before its upper bound.
type Partition struct {
	Name string
}

// SweepStore is the storage a sweep works on. Every method that removes rows records, in the same transaction, how
// many rows of which dataset it removed, so that counts stay exact across interruptions.
type SweepStore interface {
	// DroppablePartitions lists the partitions all of whose rows are deletable under the sweep, with the rows of
	// each dataset in them.
	DroppablePartitions(ctx context.Context, s Sweep) ([]Partition, error)
	// DropPartitions removes from the store, in one transaction, those of the partitions all of whose rows are
	// still deletable when re-checked under their locks, recording the rows of each dataset in each; their tables
	// are detached, and wait for DropDetached. It returns those rows by partition name; a partition that no longer
	// qualifies is absent. It waits at most lockTimeout for the locks; a lock timeout is an error the caller
	// retries. In a dry run it removes nothing and returns what it would have.
	DropPartitions(ctx context.Context, s Sweep, parts []Partition, lockTimeout time.Duration) (rows map[string]map[string]int64, err error)
	// DropDetached drops the tables DropPartitions detached at or before detachedBy, and returns how many: this
	// frees their files. Their rows left the store, counted, when they were detached.
	DropDetached(ctx context.Context, detachedBy time.Time, lockTimeout time.Duration) (int, error)
	// DatasetPartitions lists the partitions that may hold deletable rows of the dataset.
	DatasetPartitions(ctx context.Context, s Sweep, datasetID string) ([]string, error)
	// DeleteBatch deletes at most limit deletable rows of the dataset from the partition and returns how many.
	DeleteBatch(ctx context.Context, s Sweep, datasetID, partition string, limit int) (int64, error)
	// CountDeletable counts the dataset's deletable rows in the partition, for dry runs and previews.
	CountDeletable(ctx context.Context, s Sweep, datasetID, partition string) (int64, error)
	// BoundaryPartitions lists the partitions placed at or before the sweep's time that still hold rows of the
	// datasets in scope: where the rows no drop took (the current month, and groups a drop had to leave) are.
	BoundaryPartitions(ctx context.Context, s Sweep) ([]PlacedPartition, error)
	// PartitionSize returns how many blocks the partition has now and about how many rows a block holds, so that a
	// boundary sweep can cut it into block ranges of about BatchSize rows.
	PartitionSize(ctx context.Context, partition string) (blocks int64, rowsPerBlock float64, err error)
	// DeleteBlocks deletes the deletable rows of any dataset in scope stored in blocks [from, to) of the partition,
	// and returns how many of each dataset.
	DeleteBlocks(ctx context.Context, s Sweep, partition string, from, to int64) (map[string]int64, error)
	// DatasetsWithLaterWork returns those of the datasets that may still have deletable rows after SweepPlaced:
	// rows in partitions placed at or before the sweep's time that the walk left (s.Walked), or in partitions
	// placed after it whose TTL was shortened since, or of a deleted dataset.
	DatasetsWithLaterWork(ctx context.Context, s Sweep, datasetIDs []string) ([]string, error)
}

// Sweeper removes expired rows: whole partitions where every row is deletable, then batched deletes for the rest.
// It is safe to stop at any point: each drop and each batch commits with its counts, and a later sweep finishes.
type Sweeper struct {
	Store  SweepStore
	Config SweepConfig
	Logger *slog.Logger
}

// SweepResult is what a sweep of one dataset, or one drop phase, removed or would remove.
type SweepResult struct {
	Rows       int64
	Partitions int
}

// DropPartitions drops every partition whose rows are all deletable, DropBatch partitions a transaction, and returns
// what each dataset lost. In a dry run nothing is dropped; the partitions that would be are added to s.Accounted.
func (w *Sweeper) DropPartitions(ctx context.Context, s Sweep) (DropResult, error) {
	parts, err := w.Store.DroppablePartitions(ctx, s)
	if err != nil {
		return DropResult{}, fmt.Errorf("list droppable partitions of %s: %w", s.Store, err)
	}
	return w.drop(ctx, s, parts)
}

func (w *Sweeper) drop(ctx context.Context, s Sweep, parts []Partition) (DropResult, error) {
	cfg := w.Config.withDefaults()
	res := DropResult{Datasets: map[string]SweepResult{}, Dropped: map[string]bool{}}
	for len(parts) > 0 {
		batch := parts[:min(cfg.DropBatch, len(parts))]
		parts = parts[len(batch):]
		dropped, err := w.dropWithRetry(ctx, s, batch, cfg)
		if err != nil {
			return res, err
		}
		for _, p := range batch {
			rows, ok := dropped[p.Name]
			if !ok {
				continue
			}
			res.add(p.Name, rows)
			if s.DryRun && s.Accounted != nil {
				s.Accounted[p.Name] = true
			}
			w.logger().InfoContext(ctx, "retention: dropped partition", slog.String("run_id", s.RunID),
				slog.String("partition", p.Name), slog.Int("datasets", len(rows)), slog.Bool("dry_run", s.DryRun))
		}
	}
	return res, nil
}

// DropResult is what a drop phase removed: per dataset, and which partitions.
type DropResult struct {
	Datasets map[string]SweepResult
	Dropped  map[string]bool
}

func (r *DropResult) add(partition string, rows map[string]int64) {
	r.Dropped[partition] = true
	for ds, n := range rows {
		d := r.Datasets[ds]
		d.Rows += n
		d.Partitions++
		r.Datasets[ds] = d
	}
}

func (w *Sweeper) dropWithRetry(ctx context.Context, s Sweep, batch []Partition, cfg SweepConfig) (map[string]map[string]int64, error) {
	var lastErr error
	for attempt := range cfg.DropAttempts {
		bctx, cancel := context.WithTimeout(ctx, cfg.BatchTimeout)
		dropped, err := w.Store.DropPartitions(bctx, s, batch, cfg.LockTimeout)
		cancel()
		if err == nil {
			return dropped, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lastErr = err
		w.logger().DebugContext(ctx, "retention: partition drop waits for its locks", slog.String("first", batch[0].Name),
			slog.Int("partitions", len(batch)), slog.Int("attempt", attempt+1), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	// Left for the next run, or for the row-level pass of this one; never an early delete.
	w.logger().WarnContext(ctx, "retention: partitions not dropped", slog.String("first", batch[0].Name),
		slog.Int("partitions", len(batch)), slog.Any("error", lastErr))
	return nil, nil
}

// ReleaseDetached drops the tables of the partitions that drops detached from the store at or before detachedBy,
// which frees their files, and returns how many it dropped. A run leaves this to a job of its own, after the run's
// part: the rows left the store when their partitions were detached, as a DELETE's rows do at its commit, before
// VACUUM frees their space. Dropping a detached table waits for nobody's statements but its own.
func (w *Sweeper) ReleaseDetached(ctx context.Context, detachedBy time.Time) (int, error) {
	cfg := w.Config.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.BatchTimeout)
	defer cancel()
	start := time.Now()
	n, err := w.Store.DropDetached(ctx, detachedBy, cfg.LockTimeout)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		w.logger().InfoContext(ctx, "retention: detached partitions dropped", slog.Int("tables", n),
			slog.Duration("duration", time.Since(start)))
	}
	return n, nil
}

// SweepPlaced removes the deletable rows of every partition placed at or before the sweep's time, as the expiry
// layout intends: it drops the partitions whose rows are all deletable (detaching them: ReleaseDetached frees their
// files later) and walks the others (the current month, and groups a drop has to leave) in block ranges, deleting
// across datasets. One worker drops and then joins the walk; the others walk from the start, so that no worker idles
// while ranges remain. The drops and the walk never touch one partition. A partition listed for a drop that did not
// happen is walked afterwards.
//
// A partition is walked only where the datasets in scope hold at least a quarter of its rows: a walk reads the
// whole partition, and a run scoped to a few datasets (a manual run, or one org's) deletes their rows faster by
// index in the per-dataset pass. Not for dry runs.
func (w *Sweeper) SweepPlaced(ctx context.Context, s Sweep) (PlacedResult, error) {
	cfg := w.Config.withDefaults()
	res := PlacedResult{Swept: map[string]SweepResult{}, Walked: map[string]bool{}}
	droppable, err := w.Store.DroppablePartitions(ctx, s)
	if err != nil {
		return res, fmt.Errorf("list droppable partitions of %s: %w", s.Store, err)
	}
	placed, err := w.Store.BoundaryPartitions(ctx, s)
	if err != nil {
		return res, fmt.Errorf("list boundary partitions of %s: %w", s.Store, err)
	}
	toDrop := map[string]bool{}
	for _, p := range droppable {
		toDrop[p.Name] = true
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
	if err := w.planWalk(ctx, q, walk, cfg); err != nil {
		return res, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers) // one worker: the drops, then the walk
	goRecover(g, func() (err error) {
		if res.Dropped, err = w.drop(gctx, s, droppable); err != nil {
			return err
		}
		return w.walk(gctx, s, q)
	})
	for range cfg.Workers - 1 {
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
	if err := w.planWalk(ctx, q, left, cfg); err != nil {
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

// PlacedResult is what SweepPlaced removed: by the drops, by the walk, and which partitions the walk swept.
type PlacedResult struct {
	Dropped DropResult
	Swept   map[string]SweepResult
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
	swept  map[string]SweepResult
}

// planWalk adds the partitions to the queue, cut into block ranges of about four BatchSize rows rather than walked
// in LIMIT batches, because a LIMIT batch scans again, from the partition's start, everything the batches before it
// left; a range is read once. Rows stored after the plan was made lie beyond its last range and wait for the next
// run. In the boundary partition about half the rows are expired, so a range deletes about two batches' worth, and
// the per-statement cost (planning, counters, commit) is paid four times less often.
func (w *Sweeper) planWalk(ctx context.Context, q *walkQueue, parts []string, cfg SweepConfig) error {
	for _, part := range parts {
		blocks, perBlock, err := w.Store.PartitionSize(ctx, part)
		if err != nil {
			return fmt.Errorf("size of %s: %w", part, err)
		}
		step := max(int64(4*float64(cfg.BatchSize)/max(perBlock, 1)), 1)
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
		swept: map[string]SweepResult{}}
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
	cfg := w.Config.withDefaults()
	for {
		r, ok := q.take()
		if !ok {
			return nil
		}
		bctx, cancel := context.WithTimeout(ctx, cfg.BatchTimeout)
		rows, err := w.Store.DeleteBlocks(bctx, s, r.part, r.from, r.to)
		cancel()
		if err != nil {
			return fmt.Errorf("delete expired rows in %s: %w", r.part, err)
		}
		if blocks, total, last := q.done(r, rows); last {
			w.logger().InfoContext(ctx, "retention: boundary partition swept", slog.String("run_id", s.RunID),
				slog.String("partition", r.part), slog.Int64("blocks", blocks), slog.Int64("rows", total))
		}
	}
}

// SweepDataset deletes (or, in a dry run, counts) the dataset's deletable rows that no drop removed, in Workers
// partitions at once, each batch by batch until a batch comes back short.
func (w *Sweeper) SweepDataset(ctx context.Context, s Sweep, datasetID string) (SweepResult, error) {
	cfg := w.Config.withDefaults()
	parts, err := w.Store.DatasetPartitions(ctx, s, datasetID)
	if err != nil {
		return SweepResult{}, fmt.Errorf("list partitions of %s: %w", datasetID, err)
	}
	var rows atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	for _, part := range parts {
		if s.Accounted[part] {
			continue
		}
		goRecover(g, func() error {
			n, err := w.sweepPartition(gctx, s, datasetID, part, cfg)
			rows.Add(n)
			return err
		})
	}
	err = g.Wait()
	return SweepResult{Rows: rows.Load()}, err
}

func (w *Sweeper) sweepPartition(ctx context.Context, s Sweep, datasetID, part string, cfg SweepConfig) (int64, error) {
	if s.DryRun {
		bctx, cancel := context.WithTimeout(ctx, cfg.BatchTimeout)
		defer cancel()
		n, err := w.Store.CountDeletable(bctx, s, datasetID, part)
		if err != nil {
			return 0, fmt.Errorf("count expired rows of %s in %s: %w", datasetID, part, err)
		}
		return n, nil
	}
	var total int64
	for {
		bctx, cancel := context.WithTimeout(ctx, cfg.BatchTimeout)
		n, err := w.Store.DeleteBatch(bctx, s, datasetID, part, cfg.BatchSize)
		cancel()
		if err != nil {
			return total, fmt.Errorf("delete expired rows of %s in %s: %w", datasetID, part, err)
		}
		total += n
		w.logger().DebugContext(ctx, "retention: batch", slog.String("dataset_id", datasetID), slog.String("partition", part), slog.Int64("rows", n))
		if n < int64(cfg.BatchSize) {
			return total, nil
		}
	}
}

func (w *Sweeper) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
}
