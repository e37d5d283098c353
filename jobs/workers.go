package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/acme/retention/retention"
)

// tickArgs is the periodic job that turns due cron slots into runs.
type tickArgs struct{}

// Kind implements river.JobArgs.
func (tickArgs) Kind() string { return "retention_tick" }

type tickWorker struct {
	river.WorkerDefaults[tickArgs]
	s *Service
}

func (w *tickWorker) Work(ctx context.Context, _ *river.Job[tickArgs]) error {
	return w.s.Tick(ctx, w.s.store.Now())
}

// runArgs is the job that plans a run, drops whole partitions and fans the rest out by dataset.
type runArgs struct {
	RunID string `json:"run_id"`
}

// Kind implements river.JobArgs.
func (runArgs) Kind() string { return "retention_run" }

type runWorker struct {
	river.WorkerDefaults[runArgs]
	s *Service
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	s := w.s
	plan, err := s.store.PrepareRun(ctx, job.Args.RunID)
	if err != nil {
		return w.failOnLastAttempt(ctx, job, err)
	}
	if len(plan.Pending) == 0 {
		if err := s.store.FinishEmptyRun(ctx, job.Args.RunID); err != nil {
			return err
		}
		s.metrics.runEnded(plan.Sweep.Store, &RunEnd{Status: StatusSucceeded})
		return nil
	}
	if plan.DryRun {
		dropped, err := s.sweeper.DropPartitions(ctx, plan.Sweep)
		if err != nil {
			return w.failOnLastAttempt(ctx, job, err)
		}
		return s.countDryRun(ctx, plan, dropped.Datasets)
	}
	start := time.Now()
	placed, err := s.sweeper.SweepPlaced(ctx, plan.Sweep)
	dropped, walked := totalRows(placed.Dropped.Datasets), totalRows(placed.Swept)
	s.metrics.removed(plan.Sweep.Store, dropped, len(placed.Dropped.Dropped))
	s.metrics.removed(plan.Sweep.Store, walked, 0)
	s.cfg.Logger.InfoContext(ctx, "retention: placed partitions swept", slog.String("run_id", plan.Sweep.RunID),
		slog.Int("partitions_dropped", len(placed.Dropped.Dropped)), slog.Int64("rows_dropped", dropped),
		slog.Int("partitions_walked", len(placed.Walked)), slog.Int64("rows_walked", walked),
		slog.Duration("duration", time.Since(start)), slog.Any("error", err))
	if err != nil {
		if ctx.Err() != nil {
			return river.JobSnooze(0) // out of time: every batch so far is committed; carry on at once
		}
		return w.failOnLastAttempt(ctx, job, err)
	}
	plan.Sweep.Walked = placed.Walked
	start = time.Now()
	if err := s.fanOut(ctx, plan); err != nil {
		return err
	}
	s.cfg.Logger.InfoContext(ctx, "retention: run job done", slog.String("run_id", plan.Sweep.RunID),
		slog.Duration("fan_out", time.Since(start)))
	s.queueRelease(ctx, plan.Sweep.RunID)
	return nil
}

// queueRelease queues the job that drops the partitions the run detached, and any an earlier run left. It comes
// after the run job's part, so that the file system's work does not slow the walk; a failure to queue it only
// delays the release until the periodic one. A run that detached nothing queues it too: it costs one query, and
// whoever watches the run can wait for it alike.
func (s *Service) queueRelease(ctx context.Context, runID string) {
	if _, err := s.client.Insert(ctx, releaseArgs{RunID: runID}, nil); err != nil {
		s.cfg.Logger.WarnContext(ctx, "retention: release of detached partitions not queued", slog.Any("error", err))
	}
}

// releaseArgs is the job that drops the tables of detached partitions (retention.Sweeper.ReleaseDetached): queued
// by every run job once its part is done, and periodically for any that a crash left.
type releaseArgs struct {
	// RunID names the run that queued the job, which drops every detached table; the periodic job has none, and
	// drops only tables detached at least releaseLeftoverAge ago, so that it never frees files beside a run that is
	// still walking (its own job will).
	RunID string `json:"run_id,omitempty"`
}

// releaseLeftoverAge is how long ago a table must have been detached for the periodic release to drop it.
const releaseLeftoverAge = 10 * time.Minute

// Kind implements river.JobArgs.
func (releaseArgs) Kind() string { return "retention_release" }

type releaseWorker struct {
	river.WorkerDefaults[releaseArgs]
	s *Service
}

func (w *releaseWorker) Work(ctx context.Context, job *river.Job[releaseArgs]) error {
	by := w.s.store.Now()
	if job.Args.RunID == "" {
		by = by.Add(-releaseLeftoverAge)
	}
	_, err := w.s.sweeper.ReleaseDetached(ctx, by)
	return err
}

// fanOut finishes at once the datasets that have nothing left after the drops and the boundary walk, and queues one
// job for each of the others (rows in partitions the walk left, or whose TTL was shortened after they were placed),
// which River spreads over the replicas.
func (s *Service) fanOut(ctx context.Context, plan *Plan) error {
	later, err := s.sweeper.Store.DatasetsWithLaterWork(ctx, plan.Sweep, plan.Pending)
	if err != nil {
		return err
	}
	hasWork := map[string]bool{}
	params := make([]river.InsertManyParams, 0, len(later))
	for _, ds := range later {
		hasWork[ds] = true
		params = append(params, river.InsertManyParams{Args: datasetArgs{RunID: plan.Sweep.RunID, DatasetID: ds,
			Walked: slices.Sorted(maps.Keys(plan.Sweep.Walked))}, InsertOpts: uniqueByArgs})
	}
	var done []string
	for _, ds := range plan.Pending {
		if !hasWork[ds] {
			done = append(done, ds)
		}
	}
	if len(done) > 0 {
		fin, err := s.store.FinishDatasets(ctx, plan.Sweep.RunID, done)
		if err != nil {
			return err
		}
		now := s.store.Now()
		for range fin.Parts {
			s.metrics.datasetDone(plan.Sweep.Store, true, now)
		}
		s.logPartsDone(ctx, plan, fin.Parts)
		s.metrics.runEnded(plan.Sweep.Store, fin.Run)
	}
	if len(params) == 0 {
		return nil
	}
	if _, err := s.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("queue datasets of run %s: %w", plan.Sweep.RunID, err)
	}
	return nil
}

func totalRows(m map[string]retention.SweepResult) int64 {
	var n int64
	for _, r := range m {
		n += r.Rows
	}
	return n
}

func (w *runWorker) failOnLastAttempt(ctx context.Context, job *river.Job[runArgs], err error) error {
	if job.Attempt >= job.MaxAttempts {
		if ferr := w.s.store.FailRun(ctx, job.Args.RunID, err); ferr != nil {
			return errors.Join(err, ferr)
		}
	}
	return err
}

// countDryRun counts, dataset by dataset, what a run would delete, and records it without deleting anything.
func (s *Service) countDryRun(ctx context.Context, plan *Plan, dropped map[string]retention.SweepResult) error {
	for _, ds := range plan.Pending {
		res, err := s.sweeper.SweepDataset(ctx, plan.Sweep, ds)
		out := Outcome{Counted: res.Rows + dropped[ds].Rows, Err: err}
		fin, err := s.store.FinishDataset(ctx, plan.Sweep.RunID, ds, out)
		if err != nil {
			return err
		}
		s.logPartsDone(ctx, plan, fin.Parts)
		s.metrics.runEnded(plan.Sweep.Store, fin.Run)
	}
	return nil
}

// logPartsDone logs one line at info for each dataset part that ended, however it ended (in a dataset's own job,
// with the others that had nothing left after the run job's drops and walk, or counted by a dry run): its rows as
// the ledger has them, the partitions dropped, how long since it started, and its error.
func (s *Service) logPartsDone(ctx context.Context, plan *Plan, parts []PartEnd) {
	for _, p := range parts {
		attrs := []slog.Attr{slog.String("run_id", plan.Sweep.RunID), slog.String("dataset_id", p.DatasetID),
			slog.String("store", plan.Sweep.Store), slog.String("status", p.Status)}
		if plan.DryRun {
			attrs = append(attrs, slog.Bool("dry_run", true), slog.Int64("rows_would_delete", p.Rows))
		} else {
			attrs = append(attrs, slog.Int64("rows_deleted", p.Rows), slog.Int("partitions_dropped", p.PartitionsDropped))
		}
		attrs = append(attrs, slog.Duration("duration", p.Duration))
		if p.Error != "" {
			attrs = append(attrs, slog.String("error", p.Error))
		}
		s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "retention: dataset done", attrs...)
	}
}

// datasetArgs is the job that deletes one dataset's remaining expired rows of a run.
type datasetArgs struct {
	RunID     string `json:"run_id" river:"unique"`
	DatasetID string `json:"dataset_id" river:"unique"`
	// Walked names the partitions the run job's boundary walk swept; the dataset's pass skips them. A job queued
	// without it (by an older version) passes over them again, which deletes nothing twice. Not part of the job's
	// identity: a retried run job that walked differently still queues one job per dataset.
	Walked []string `json:"walked,omitempty"`
}

// Kind implements river.JobArgs.
func (datasetArgs) Kind() string { return "retention_dataset" }

type datasetWorker struct {
	river.WorkerDefaults[datasetArgs]
	s *Service
}

func (w *datasetWorker) Work(ctx context.Context, job *river.Job[datasetArgs]) error {
	s, a := w.s, job.Args
	plan, err := s.store.PrepareRun(ctx, a.RunID)
	if err != nil {
		return err
	}
	if err := s.store.MarkDatasetStarted(ctx, a.RunID, a.DatasetID); err != nil {
		return err
	}
	sw := plan.Sweep
	sw.Walked = map[string]bool{} // dataset jobs are queued only once the run job's walk is done
	for _, name := range a.Walked {
		sw.Walked[name] = true
	}
	res, err := s.sweeper.SweepDataset(ctx, sw, a.DatasetID)
	s.metrics.removed(plan.Sweep.Store, res.Rows, 0)
	if err != nil {
		if ctx.Err() != nil {
			// Out of time or shutting down: every batch done so far is committed; pick up from here at once.
			return river.JobSnooze(0)
		}
		if retryable(job, err) {
			return err
		}
	}
	fin, ferr := s.store.FinishDataset(context.WithoutCancel(ctx), a.RunID, a.DatasetID, Outcome{Err: err})
	if ferr != nil {
		return ferr
	}
	s.metrics.runEnded(plan.Sweep.Store, fin.Run)
	s.logPartsDone(ctx, plan, fin.Parts)
	s.metrics.datasetDone(plan.Sweep.Store, err == nil, s.store.Now())
	return nil
}
