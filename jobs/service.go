package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// Config configures the retention jobs. Zero fields get the defaults.
type Config struct {
	// Schedules of the stores; a store without one is only swept by manual runs.
	Schedules Schedules
	// LakeGrace is how long after ingestion a lake row must wait before it is deleted (RETENTION_INGESTION_GRACE,
	// default P30D). The profile store has none: its expiry is prompt.
	LakeGrace retention.Period
	// HistoryKeep is how long finished runs are kept (RETENTION_HISTORY_KEEP). Default P1Y.
	HistoryKeep retention.Period
	// Work turns on processing on this replica; an API-only replica only queues runs for the others.
	Work bool
	// Workers is how many jobs this replica runs at once. Default 2.
	Workers int
	// JobTimeout bounds one job. A dataset job that hits it resumes in a new job, keeping every batch it did.
	// Default 20 s.
	JobTimeout time.Duration
	// RescueAfter is how long a job may look stuck (its replica killed) before another replica takes it over.
	// River's rescuer looks every 30 s, so with the default 30 s a killed replica's work resumes within a minute;
	// it must exceed JobTimeout, so a live job is never taken for a stuck one. Default 30 s.
	RescueAfter time.Duration
	// TickInterval is how often the scheduler looks for a due slot. Default 1 minute.
	TickInterval time.Duration
	// ReleaseInterval is how often a replica drops detached partitions that no run's release job dropped (a crash
	// in between) and that were detached at least 10 minutes before; it does so when it starts too. Default 1 hour.
	ReleaseInterval time.Duration
	Sweep           retention.SweepConfig
	Logger          *slog.Logger
	// Requests, when set, serves the API's calls (StartRun, FindRun, FindRuns) with a pool and a store of their
	// own, so that requests never take a connection of the pool the jobs work with. Unset, they share it.
	Requests *Requests
}

// Requests are what the API's calls of a Service use instead of the jobs' pool and store: a pool on the same
// database and a Store on that pool.
type Requests struct {
	Pool  *pgxpool.Pool
	Store Store
}

func (c Config) withDefaults() Config {
	if c.HistoryKeep.IsZero() {
		c.HistoryKeep = retention.Period{Years: 1}
	}
	c.Workers = cmp.Or(c.Workers, 2)
	c.JobTimeout = cmp.Or(c.JobTimeout, 20*time.Second)
	c.RescueAfter = cmp.Or(c.RescueAfter, 30*time.Second)
	c.TickInterval = cmp.Or(c.TickInterval, time.Minute)
	c.ReleaseInterval = cmp.Or(c.ReleaseInterval, time.Hour)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Store is the storage of runs (package postgres implements it).
type Store interface {
	Now() time.Time
	LastSlot(ctx context.Context, store catalog.Store, now time.Time) (time.Time, error)
	CreateScheduledRun(ctx context.Context, store catalog.Store, slot time.Time, grace retention.Period) (string, bool, error)
	CreateManualRun(ctx context.Context, c *catalog.Caller, req RunRequest, grace retention.Period) (string, error)
	PrepareRun(ctx context.Context, runID string) (*Plan, error)
	MarkDatasetStarted(ctx context.Context, runID, datasetID string) error
	FinishDataset(ctx context.Context, runID, datasetID string, out Outcome) (*Finished, error)
	FinishDatasets(ctx context.Context, runID string, datasetIDs []string) (*Finished, error)
	FinishEmptyRun(ctx context.Context, runID string) error
	FailRun(ctx context.Context, runID string, cause error) error
	PruneHistory(ctx context.Context, cutoff time.Time) (int64, error)
	FindRun(ctx context.Context, c *catalog.Caller, id string) (*Run, error)
	FindRuns(ctx context.Context, c *catalog.Caller, f RunFilter) ([]*Run, error)
}

// Plan is a prepared run: its evaluation and the datasets still to do.
type Plan struct {
	Sweep   retention.Sweep
	DryRun  bool
	Pending []string
}

// Outcome is how a dataset's part of a run ended.
type Outcome struct {
	Counted int64 // a dry run's count of the rows it would delete
	Err     error // nil on success
}

// RunEnd is how a run ended: returned by the call that finished its last dataset.
type RunEnd struct {
	Status   string
	Duration time.Duration
}

// Finished is what a call that finishes parts of a run did: the parts it finished (none when they had been
// finished already), and how the run ended when one of them was its last part (nil otherwise).
type Finished struct {
	Parts []PartEnd
	Run   *RunEnd
}

// PartEnd is how one dataset's part of a run ended, as its Expire event records it.
type PartEnd struct {
	DatasetID         string
	Status            string // StatusSucceeded or StatusFailed
	Error             string
	Rows              int64 // rows removed, from the ledger; in a dry run, the rows it would remove
	PartitionsDropped int
	Duration          time.Duration // since the part started
}

// Service schedules and executes retention runs through River, and serves their history.
type Service struct {
	store   Store
	sweeper *retention.Sweeper
	client  *river.Client[pgx.Tx]
	cfg     Config
	metrics *Metrics

	// apiStore and apiClient serve the API's calls: the jobs' own, or those of Config.Requests.
	apiStore  Store
	apiClient *river.Client[pgx.Tx]
}

var _ RunService = (*Service)(nil)

// Migrate applies River's own schema migrations (its job table and leader election), which River versions itself.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// New returns a Service. Call Start to begin processing when cfg.Work is set.
func New(pool *pgxpool.Pool, store Store, sweeper *retention.Sweeper, metrics *Metrics, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	s := &Service{store: store, sweeper: sweeper, cfg: cfg, metrics: metrics}
	workers := river.NewWorkers()
	river.AddWorker(workers, &tickWorker{s: s})
	river.AddWorker(workers, &runWorker{s: s})
	river.AddWorker(workers, &datasetWorker{s: s})
	river.AddWorker(workers, &releaseWorker{s: s})
	rc := &river.Config{
		Workers: workers, Logger: cfg.Logger, JobTimeout: cfg.JobTimeout, RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts: 10,
		// A job waits for the next fetch after its insert's notification, at most this long. River's 100 ms default
		// was a tenth of a benchmark run's time; fetches this often happen only while jobs are being inserted.
		FetchCooldown: 20 * time.Millisecond,
	}
	if cfg.Work {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}}
		rc.PeriodicJobs = []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.TickInterval),
				func() (river.JobArgs, *river.InsertOpts) { return tickArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.ReleaseInterval),
				func() (river.JobArgs, *river.InsertOpts) { return releaseArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	s.client, s.apiClient, s.apiStore = client, client, store
	if r := cfg.Requests; r != nil {
		// A client without queues or workers only inserts: a manual run is queued through the requests' pool.
		if s.apiClient, err = river.NewClient(riverpgxv5.New(r.Pool), &river.Config{Logger: cfg.Logger}); err != nil {
			return nil, fmt.Errorf("river client for requests: %w", err)
		}
		s.apiStore = r.Store
	}
	return s, nil
}

// Start begins processing jobs (only with cfg.Work).
func (s *Service) Start(ctx context.Context) error {
	if !s.cfg.Work {
		return nil
	}
	if err := s.client.Start(ctx); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	return nil
}

// Stop lets running jobs finish their current batch and stops fetching new ones, until ctx ends.
func (s *Service) Stop(ctx context.Context) error {
	if !s.cfg.Work {
		return nil
	}
	return s.client.Stop(ctx)
}

// Client exposes the River client, for tests that subscribe to job events.
func (s *Service) Client() *river.Client[pgx.Tx] { return s.client }

// Tick creates the run of each store's latest due slot, if any, and queues it. Every replica may call it for the
// same slot: the slot's unique key lets one run exist.
func (s *Service) Tick(ctx context.Context, now time.Time) error {
	for store, sched := range s.cfg.Schedules {
		last, err := s.store.LastSlot(ctx, store, now)
		if err != nil {
			return err
		}
		slot, ok := sched.DueSlot(last, now)
		if !ok {
			continue
		}
		id, created, err := s.store.CreateScheduledRun(ctx, store, slot, s.grace(store))
		if err != nil {
			return err
		}
		if id == "" {
			s.cfg.Logger.InfoContext(ctx, "retention: slot waits for the previous run", slog.String("store", string(store)), slog.Time("slot", slot))
			continue
		}
		if err := s.enqueueRun(ctx, s.client, id); err != nil {
			return err
		}
		if created {
			s.cfg.Logger.InfoContext(ctx, "retention: scheduled run created", slog.String("run_id", id),
				slog.String("store", string(store)), slog.Time("slot", slot))
		}
	}
	if n, err := s.store.PruneHistory(ctx, s.cfg.HistoryKeep.SubtractFrom(now)); err != nil {
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

// uniqueByArgs keeps one queued or running job per run (or per run and dataset), whoever inserts it.
var uniqueByArgs = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

func (s *Service) enqueueRun(ctx context.Context, client *river.Client[pgx.Tx], runID string) error {
	if _, err := client.Insert(ctx, runArgs{RunID: runID}, uniqueByArgs); err != nil {
		return fmt.Errorf("queue run %s: %w", runID, err)
	}
	return nil
}

// StartRun implements RunService.
func (s *Service) StartRun(ctx context.Context, c *catalog.Caller, req RunRequest) (*Run, error) {
	if req.Store == "" {
		req.Store = catalog.LakeHouse
	}
	id, err := s.apiStore.CreateManualRun(ctx, c, req, s.grace(req.Store))
	if err != nil {
		return nil, err
	}
	if err := s.enqueueRun(ctx, s.apiClient, id); err != nil {
		return nil, err
	}
	return s.apiStore.FindRun(ctx, c, id)
}

// FindRun implements RunService.
func (s *Service) FindRun(ctx context.Context, c *catalog.Caller, id string) (*Run, error) {
	return s.apiStore.FindRun(ctx, c, id)
}

// FindRuns implements RunService.
func (s *Service) FindRuns(ctx context.Context, c *catalog.Caller, f RunFilter) ([]*Run, error) {
	return s.apiStore.FindRuns(ctx, c, f)
}

// retryable reports whether a dataset job should be tried again rather than recorded as failed.
func retryable(job *river.Job[datasetArgs], err error) bool {
	return job.Attempt < job.MaxAttempts && !errors.Is(err, context.Canceled)
}
