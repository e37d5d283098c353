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
	// wait for, only while it detaches them, not while their files are released (about 30 ms a partition of
	// 150,000 rows). Default 32.
	DropBatch int
	// Workers is how many partitions a sweep works on at once: the drops beside the boundary walk, and the
	// partitions of one dataset's pass. Each worker holds a connection. Two workers never touch one partition, so
	// their counter updates never wait for each other. On the 2-core benchmark machine two workers made the run
	// 1.5x faster (1.1 s against 1.7 s) and left ingestion beside it 50 to 68% of its idle rate, against 73% with
	// one (docs/benchmarks.md). Default 2.
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
	// DropPartitions removes, in one transaction, those of the partitions all of whose rows are still deletable
	// when re-checked under their locks, recording the rows of each dataset in each, and then drops their tables.
	// It returns those rows by partition name; a partition that no longer qualifies is absent. It waits at most
	// lockTimeout for the locks; a lock timeout is an error the caller retries. In a dry run it removes nothing and
	// returns what it would have.
	DropPartitions(ctx context.Context, s Sweep, parts []Partition, lockTimeout time.Duration) (rows map[string]map[string]int64, err error)
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

// SweepPlaced removes the deletable rows of every partition placed at or before the sweep's time, as the expiry
// layout intends: it drops the partitions whose rows are all deletable and, at the same time, walks the others (the
// current month, and groups a drop has to leave) deleting across datasets. The two never touch one partition, and a
// drop's time is mostly the file system releasing files, so the walk uses the CPU the drops leave idle. A partition
// listed for a drop that did not happen is walked afterwards.
//
// A partition is walked only where the datasets in scope hold at least a quarter of its rows: a walk reads the
// whole partition, and a run scoped to a few datasets (a manual run, or one org's) deletes their rows faster by
// index in the per-dataset pass. Not for dry runs.
func (w *Sweeper) SweepPlaced(ctx context.Context, s Sweep) (PlacedResult, error) {
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
	swept := &sweptRows{out: res.Swept}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.Config.withDefaults().Workers) // one worker: the drops, then the walk
	goRecover(g, func() (err error) {
		res.Dropped, err = w.drop(gctx, s, droppable)
		return err
	})
	goRecover(g, func() error { return w.walk(gctx, s, walk, swept) })
	if err := g.Wait(); err != nil {
		return res, err
	}
	for _, name := range maybe {
		if !res.Dropped.Dropped[name] {
			walk = append(walk, name)
			if err := w.walk(ctx, s, []string{name}, swept); err != nil {
				return res, err
			}
		}
	}
	for _, name := range walk {
		res.Walked[name] = true
	}
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

// sweptRows collects what concurrent walks removed, per dataset.
type sweptRows struct {
	mu  sync.Mutex
	out map[string]SweepResult
}

func (r *sweptRows) add(rows map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ds, n := range rows {
		d := r.out[ds]
		d.Rows += n
		r.out[ds] = d
	}
}

// walk sweeps the partitions one after another, in block ranges.
func (w *Sweeper) walk(ctx context.Context, s Sweep, parts []string, out *sweptRows) error {
	cfg := w.Config.withDefaults()
	for _, part := range parts {
		if err := w.sweepBlocks(ctx, s, part, cfg, out); err != nil {
			return err
		}
	}
	return nil
}

// sweepBlocks walks one partition in block ranges of about four BatchSize rows rather than in LIMIT batches,
// because a LIMIT batch scans again, from the partition's start, everything the batches before it left; a range is
// read once. Rows stored after the walk began lie beyond its last range and wait for the next run.
func (w *Sweeper) sweepBlocks(ctx context.Context, s Sweep, part string, cfg SweepConfig, out *sweptRows) error {
	blocks, perBlock, err := w.Store.PartitionSize(ctx, part)
	if err != nil {
		return fmt.Errorf("size of %s: %w", part, err)
	}
	// A range holds about four batches' worth of rows: in the boundary partition about half are expired, and the
	// per-batch cost (planning, counters, commit) is paid four times less often.
	step := max(int64(4*float64(cfg.BatchSize)/max(perBlock, 1)), 1)
	var total int64
	for from := int64(0); from < blocks; from += step {
		bctx, cancel := context.WithTimeout(ctx, cfg.BatchTimeout)
		n, err := w.Store.DeleteBlocks(bctx, s, part, from, from+step)
		cancel()
		if err != nil {
			return fmt.Errorf("delete expired rows in %s: %w", part, err)
		}
		out.add(n)
		for _, rows := range n {
			total += rows
		}
	}
	w.logger().InfoContext(ctx, "retention: boundary partition swept", slog.String("run_id", s.RunID),
		slog.String("partition", part), slog.Int64("blocks", blocks), slog.Int64("rows", total))
	return nil
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
