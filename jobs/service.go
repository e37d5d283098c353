package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// Config configures the orchestration of retention runs. Zero fields get the defaults.
type Config struct {
	// Schedules of the stores; a store without one is only swept by manual runs.
	Schedules Schedules
	// LakeGrace is how long after ingestion a lake row must wait before it is deleted (RETENTION_INGESTION_GRACE,
	// default P30D). The profile store has none: its expiry is prompt.
	LakeGrace retention.Period
	// HistoryKeep is how long finished runs are kept (RETENTION_HISTORY_KEEP). Default P1Y.
	HistoryKeep retention.Period
	Logger      *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.HistoryKeep.IsZero() {
		c.HistoryKeep = retention.Period{Years: 1}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// RunRepository keeps runs, their parts and the ledger of what they removed (package postgres implements it).
type RunRepository interface {
	Now() time.Time
	LastSlot(ctx context.Context, store catalog.Store, now time.Time) (time.Time, error)
	CreateScheduledRun(ctx context.Context, store catalog.Store, slot time.Time, grace retention.Period) (string, bool, error)
	CreateManualRun(ctx context.Context, c *catalog.Caller, req catalog.RunRequest, grace retention.Period) (string, error)
	PrepareRun(ctx context.Context, runID string) (*catalog.Plan, error)
	MarkDatasetStarted(ctx context.Context, runID, datasetID string) error
	FinishDataset(ctx context.Context, runID, datasetID string, out catalog.Outcome) (*catalog.Finished, error)
	FinishDatasets(ctx context.Context, runID string, datasetIDs []string) (*catalog.Finished, error)
	FinishEmptyRun(ctx context.Context, runID string) error
	FailRun(ctx context.Context, runID string, cause error) error
	PruneHistory(ctx context.Context, cutoff time.Time) (int64, error)
	FindRun(ctx context.Context, c *catalog.Caller, id string) (*catalog.Run, error)
	FindRuns(ctx context.Context, c *catalog.Caller, f catalog.RunFilter) ([]*catalog.Run, error)
}

// Sweeper removes a run's expired rows: the port through which orchestration drives the sweep, built once with its
// configuration (postgres.NewSweeper implements it). Every removal commits with its counts, so any call may be
// stopped and repeated: what is done stays done.
type Sweeper interface {
	// RunPart does the run's own part: it removes the deletable rows of the partitions placed at or before the run's
	// time (a dry run counts what whole drops would remove), and returns what it did, even on an error.
	RunPart(ctx context.Context, plan *catalog.Plan) (catalog.RunPart, error)
	// DatasetsLeft returns those of the plan's pending datasets that still have rows to remove after the run's
	// part, which swept the partitions skip names: each gets a part of its own.
	DatasetsLeft(ctx context.Context, plan *catalog.Plan, skip []string) ([]string, error)
	// DatasetPart removes (a dry run: counts) the dataset's deletable rows the run's part left, passing over the
	// partitions skip names, and returns how many.
	DatasetPart(ctx context.Context, plan *catalog.Plan, datasetID string, skip []string) (int64, error)
	// ReleaseDetached frees the files of the partitions the runs detached at or before detachedBy, and returns how
	// many tables it dropped.
	ReleaseDetached(ctx context.Context, detachedBy time.Time) (int, error)
}

// Queue puts the jobs of a run on the job queue, each at most once while queued or running, which spreads them
// over the replicas (package riverjobs implements it).
type Queue interface {
	// EnqueueRun queues the job of the run's own part (Service.RunPart).
	EnqueueRun(ctx context.Context, runID string) error
	// EnqueueDatasets queues one job per dataset of the run (Service.DatasetPart), each passing over the
	// partitions skip names.
	EnqueueDatasets(ctx context.Context, runID string, datasetIDs, skip []string) error
	// EnqueueRelease queues the job that frees the files of detached partitions (Service.Release).
	EnqueueRelease(ctx context.Context, runID string) error
}

// Requests are what the API's calls of a Service use instead of the jobs' own repository and queue, so that
// requests never take a connection of the pool the jobs work with.
type Requests struct {
	Runs  RunRepository
	Queue Queue
}

// Attempt is which attempt of a job this is, out of how many its queue makes.
type Attempt struct {
	Number, Max int
}

func (a Attempt) last() bool { return a.Number >= a.Max }

// ErrResume is returned by a job that ran out of time, or was stopped, with every batch so far committed: the
// queue runs it again at once, and it carries on from there instead of counting a failed attempt.
var ErrResume = errors.New("retention: out of time, resume at once")

// Service orchestrates retention runs: it turns due cron slots into runs, does each run's own part, fans the rest
// out as a part per dataset, and releases what the runs detached; the job queue (Queue) calls it and spreads its
// jobs over the replicas. It also serves the API's calls of runs (catalog.RunService).
type Service struct {
	runs    RunRepository
	sweeper Sweeper
	queue   Queue
	cfg     Config
	metrics *Metrics

	// apiRuns and apiQueue serve the API's calls: the jobs' own, or those of Requests.
	apiRuns  RunRepository
	apiQueue Queue
}

var _ catalog.RunService = (*Service)(nil)

// New returns a Service that keeps runs in runs, sweeps with sweeper and queues its jobs on queue. requests, when
// set, serves the API's calls; metrics may be nil.
func New(runs RunRepository, sweeper Sweeper, queue Queue, requests *Requests, metrics *Metrics, cfg Config) *Service {
	s := &Service{runs: runs, sweeper: sweeper, queue: queue, cfg: cfg.withDefaults(), metrics: metrics,
		apiRuns: runs, apiQueue: queue}
	if requests != nil {
		s.apiRuns, s.apiQueue = requests.Runs, requests.Queue
	}
	return s
}

// Now returns the time on the runs' clock, which the scheduler and the runs share.
func (s *Service) Now() time.Time { return s.runs.Now() }

// Tick creates the run of each store's latest due slot, if any, and queues it. Every replica may call it for the
// same slot: the slot's unique key lets one run exist.
func (s *Service) Tick(ctx context.Context, now time.Time) error {
	for store, sched := range s.cfg.Schedules {
		last, err := s.runs.LastSlot(ctx, store, now)
		if err != nil {
			return err
		}
		slot, ok := sched.DueSlot(last, now)
		if !ok {
			continue
		}
		id, created, err := s.runs.CreateScheduledRun(ctx, store, slot, s.grace(store))
		if err != nil {
			return err
		}
		if id == "" {
			s.cfg.Logger.InfoContext(ctx, "retention: slot waits for the previous run", slog.String("store", string(store)), slog.Time("slot", slot))
			continue
		}
		if err := s.queue.EnqueueRun(ctx, id); err != nil {
			return err
		}
		if created {
			s.cfg.Logger.InfoContext(ctx, "retention: scheduled run created", slog.String("run_id", id),
				slog.String("store", string(store)), slog.Time("slot", slot))
		}
	}
	if n, err := s.runs.PruneHistory(ctx, s.cfg.HistoryKeep.SubtractFrom(now)); err != nil {
		return err
	} else if n > 0 {
		s.cfg.Logger.InfoContext(ctx, "retention: pruned run history", slog.Int64("runs", n))
	}
	return nil
}

func (s *Service) grace(store catalog.Store) retention.Period {
	if store == catalog.LakeHouse {
		return s.cfg.LakeGrace
	}
	return retention.Period{}
}

// StartRun implements catalog.RunService.
func (s *Service) StartRun(ctx context.Context, c *catalog.Caller, req catalog.RunRequest) (*catalog.Run, error) {
	if req.Store == "" {
		req.Store = catalog.LakeHouse
	}
	id, err := s.apiRuns.CreateManualRun(ctx, c, req, s.grace(req.Store))
	if err != nil {
		return nil, err
	}
	if err := s.apiQueue.EnqueueRun(ctx, id); err != nil {
		return nil, err
	}
	return s.apiRuns.FindRun(ctx, c, id)
}

// FindRun implements catalog.RunService.
func (s *Service) FindRun(ctx context.Context, c *catalog.Caller, id string) (*catalog.Run, error) {
	return s.apiRuns.FindRun(ctx, c, id)
}

// FindRuns implements catalog.RunService.
func (s *Service) FindRuns(ctx context.Context, c *catalog.Caller, f catalog.RunFilter) ([]*catalog.Run, error) {
	return s.apiRuns.FindRuns(ctx, c, f)
}

// retryable reports whether a dataset's part should be tried again rather than recorded as failed.
func retryable(a Attempt, err error) bool {
	return !a.last() && !errors.Is(err, context.Canceled)
}
