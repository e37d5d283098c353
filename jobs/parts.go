package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acme/retention/catalog"
)

// RunPart does the job of a run's own part: it prepares the run, has the sweeper remove what whole drops and the
// walk of the placed partitions can (a dry run counts every dataset here), finishes at once the datasets with
// nothing left, queues a part for each of the others, and queues the release of what the run detached. On the
// last attempt a failure fails the run. ErrResume: out of time, with every batch so far committed.
func (s *Service) RunPart(ctx context.Context, runID string, attempt Attempt) error {
	plan, err := s.runs.PrepareRun(ctx, runID)
	if err != nil {
		return s.failOnLastAttempt(ctx, runID, attempt, err)
	}
	if len(plan.Pending) == 0 {
		if err := s.runs.FinishEmptyRun(ctx, runID); err != nil {
			return err
		}
		s.metrics.runEnded(plan.Store, &catalog.RunEnd{Status: catalog.StatusSucceeded})
		return nil
	}
	if plan.DryRun {
		part, err := s.sweeper.RunPart(ctx, plan)
		if err != nil {
			return s.failOnLastAttempt(ctx, runID, attempt, err)
		}
		return s.countDryRun(ctx, plan, part)
	}
	start := time.Now()
	part, err := s.sweeper.RunPart(ctx, plan)
	dropped := totalRows(part.Dropped)
	s.metrics.removed(plan.Store, dropped, part.PartitionsDropped)
	s.metrics.removed(plan.Store, part.RowsWalked, 0)
	s.cfg.Logger.InfoContext(ctx, "retention: placed partitions swept", slog.String("run_id", plan.RunID),
		slog.Int("partitions_dropped", part.PartitionsDropped), slog.Int64("rows_dropped", dropped),
		slog.Int("partitions_walked", part.PartitionsWalked), slog.Int64("rows_walked", part.RowsWalked),
		slog.Duration("duration", time.Since(start)), slog.Any("error", err))
	if err != nil {
		if ctx.Err() != nil {
			return ErrResume
		}
		return s.failOnLastAttempt(ctx, runID, attempt, err)
	}
	start = time.Now()
	if err := s.fanOut(ctx, plan, part.Skip); err != nil {
		return err
	}
	s.cfg.Logger.InfoContext(ctx, "retention: run job done", slog.String("run_id", plan.RunID),
		slog.Duration("fan_out", time.Since(start)))
	s.queueRelease(ctx, plan.RunID)
	return nil
}

// queueRelease queues the job that drops the partitions the run detached, and any an earlier run left. It comes
// after the run job's part, so that the file system's work does not slow the walk; a failure to queue it only
// delays the release until the periodic one. A run that detached nothing queues it too: it costs one query, and
// whoever watches the run can wait for it alike.
func (s *Service) queueRelease(ctx context.Context, runID string) {
	if err := s.queue.EnqueueRelease(ctx, runID); err != nil {
		s.cfg.Logger.WarnContext(ctx, "retention: release of detached partitions not queued", slog.Any("error", err))
	}
}

// ReleaseLeftoverAge is how long ago a table must have been detached for the periodic release (no run) to drop
// it, so that it never frees files beside a run that is still walking (that run's own release will).
const ReleaseLeftoverAge = 10 * time.Minute

// Release drops the tables of detached partitions: every one when a run queued it (runID set), once its part is
// done, and those detached at least ReleaseLeftoverAge ago when the periodic job calls it (runID empty), for any
// that a crash left.
func (s *Service) Release(ctx context.Context, runID string) error {
	by := s.runs.Now()
	if runID == "" {
		by = by.Add(-ReleaseLeftoverAge)
	}
	_, err := s.sweeper.ReleaseDetached(ctx, by)
	return err
}

// fanOut finishes at once the datasets that have nothing left after the drops and the boundary walk, and queues one
// job for each of the others (rows in partitions the walk left, or whose TTL was shortened after they were placed),
// which the queue spreads over the replicas.
func (s *Service) fanOut(ctx context.Context, plan *catalog.Plan, skip []string) error {
	later, err := s.sweeper.DatasetsLeft(ctx, plan, skip)
	if err != nil {
		return err
	}
	hasWork := map[string]bool{}
	for _, ds := range later {
		hasWork[ds] = true
	}
	var done []string
	for _, ds := range plan.Pending {
		if !hasWork[ds] {
			done = append(done, ds)
		}
	}
	if len(done) > 0 {
		fin, err := s.runs.FinishDatasets(ctx, plan.RunID, done)
		if err != nil {
			return err
		}
		now := s.runs.Now()
		for range fin.Parts {
			s.metrics.datasetDone(plan.Store, true, now)
		}
		s.logPartsDone(ctx, plan, fin.Parts)
		s.metrics.runEnded(plan.Store, fin.Run)
	}
	if len(later) == 0 {
		return nil
	}
	return s.queue.EnqueueDatasets(ctx, plan.RunID, later, skip)
}

func totalRows(m map[string]int64) int64 {
	var n int64
	for _, r := range m {
		n += r
	}
	return n
}

func (s *Service) failOnLastAttempt(ctx context.Context, runID string, attempt Attempt, err error) error {
	if attempt.last() {
		if ferr := s.runs.FailRun(ctx, runID, err); ferr != nil {
			return errors.Join(err, ferr)
		}
	}
	return err
}

// countDryRun counts, dataset by dataset, what a run would delete, and records it without deleting anything.
func (s *Service) countDryRun(ctx context.Context, plan *catalog.Plan, part catalog.RunPart) error {
	for _, ds := range plan.Pending {
		n, err := s.sweeper.DatasetPart(ctx, plan, ds, part.Skip)
		out := catalog.Outcome{Counted: n + part.Dropped[ds], Err: err}
		fin, err := s.runs.FinishDataset(ctx, plan.RunID, ds, out)
		if err != nil {
			return err
		}
		s.logPartsDone(ctx, plan, fin.Parts)
		s.metrics.runEnded(plan.Store, fin.Run)
	}
	return nil
}

// logPartsDone logs one line at info for each dataset part that ended, however it ended (in a dataset's own job,
// with the others that had nothing left after the run job's drops and walk, or counted by a dry run): its rows as
// the ledger has them, the partitions dropped, how long since it started, and its error.
func (s *Service) logPartsDone(ctx context.Context, plan *catalog.Plan, parts []catalog.PartEnd) {
	for _, p := range parts {
		attrs := []slog.Attr{slog.String("run_id", plan.RunID), slog.String("dataset_id", p.DatasetID),
			slog.String("store", string(plan.Store)), slog.String("status", p.Status)}
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

// DatasetPart does the job of one dataset's part of a run: it removes the dataset's deletable rows the run's part
// left, passing over the partitions skip names (the queue's job carries them), and records how the part ended.
// ErrResume: out of time or stopping, with every batch so far committed. A failure is returned for another
// attempt while the queue has attempts left, and recorded as the part's outcome on the last.
func (s *Service) DatasetPart(ctx context.Context, runID, datasetID string, skip []string, attempt Attempt) error {
	plan, err := s.runs.PrepareRun(ctx, runID)
	if err != nil {
		return err
	}
	if err := s.runs.MarkDatasetStarted(ctx, runID, datasetID); err != nil {
		return err
	}
	n, err := s.sweeper.DatasetPart(ctx, plan, datasetID, skip)
	s.metrics.removed(plan.Store, n, 0)
	if err != nil {
		if ctx.Err() != nil {
			return ErrResume
		}
		if retryable(attempt, err) {
			return err
		}
	}
	fin, ferr := s.runs.FinishDataset(context.WithoutCancel(ctx), runID, datasetID, catalog.Outcome{Err: err})
	if ferr != nil {
		return ferr
	}
	s.metrics.runEnded(plan.Store, fin.Run)
	s.logPartsDone(ctx, plan, fin.Parts)
	s.metrics.datasetDone(plan.Store, err == nil, s.runs.Now())
	return nil
}
