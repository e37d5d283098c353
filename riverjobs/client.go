// Package riverjobs is the River adapter of package jobs: the job kinds, the workers that hand each job to the
// orchestration (jobs.Service), the periodic jobs (the scheduler's tick, the release of detached partitions, the
// audit log's purge), the queue a Service enqueues on (jobs.Queue), and River's own schema migrations. It is named
// after what it wraps, as package postgres is; no other package imports River.
package riverjobs

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
	"github.com/riverqueue/river/rivertype"

	"github.com/acme/retention/jobs"
)

// Config configures the job queue of a replica. Zero fields get the defaults.
type Config struct {
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
	// in between) and that were detached at least jobs.ReleaseLeftoverAge before; it does so when it starts too.
	// Default 1 hour.
	ReleaseInterval time.Duration
	// AuditPurgeInterval is the time between audit purges (Work.AuditPurge). Default a day.
	AuditPurgeInterval time.Duration
	// ExpirationInterval is how often due expirations are looked for (Work.Expirations). Default 1 minute.
	ExpirationInterval time.Duration
	// WorkOrderInterval is how often open work orders are looked for (Work.WorkOrders): a new order starts within
	// it, and one waiting for a held dataset completes within it of the release. Default 10 s.
	WorkOrderInterval time.Duration
	// Requests, when set, is the pool the API's calls queue runs through (Client.ForRequests), so that requests
	// never take a connection of the jobs' pool.
	Requests *pgxpool.Pool
	Logger   *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, 2)
	c.JobTimeout = cmp.Or(c.JobTimeout, 20*time.Second)
	c.RescueAfter = cmp.Or(c.RescueAfter, 30*time.Second)
	c.TickInterval = cmp.Or(c.TickInterval, time.Minute)
	c.ReleaseInterval = cmp.Or(c.ReleaseInterval, time.Hour)
	c.AuditPurgeInterval = cmp.Or(c.AuditPurgeInterval, 24*time.Hour)
	c.ExpirationInterval = cmp.Or(c.ExpirationInterval, time.Minute)
	c.WorkOrderInterval = cmp.Or(c.WorkOrderInterval, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

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

// Work is what a replica's workers hand their jobs to, the one way the Client receives it (at Start): the runs'
// orchestration, and, where set, dataset expirations and the audit log's own retention. Each is also a periodic job
// that River's leader inserts, so that one replica does each pass: the scheduler's tick and the release of detached
// partitions for Runs, an expiration tick every Config.ExpirationInterval for Expirations, a purge every
// Config.AuditPurgeInterval for AuditPurge (and each when the leader starts).
type Work struct {
	// Runs is the orchestration of retention runs; required. It takes the Client as its queue, hence Start.
	Runs *jobs.Service
	// Expirations, when set, carries out dataset expirations: a periodic job queues the due ones, one job each.
	Expirations *jobs.Expirations
	// AuditPurge, when set, is the audit log's own retention (audit.Retention.Purge).
	AuditPurge func(ctx context.Context) error
	// WorkOrders, when set, carries out record-delete work orders: a periodic job every Config.WorkOrderInterval
	// queues the open ones, one job each.
	WorkOrders *jobs.WorkOrders
}

// Client is a replica's job queue: River on the jobs' pool, and an insert-only River client on the requests' pool
// when Config.Requests is set. Its Queue methods (those of the embedded queue, on the jobs' client) implement
// jobs.Queue.
type Client struct {
	queue
	requests queue
	cfg      Config
	// work is what its workers hand jobs to, set by Start before River starts fetching.
	work Work
}

var (
	_ jobs.Queue           = (*Client)(nil)
	_ jobs.ExpirationQueue = (*Client)(nil)
	_ jobs.WorkOrderQueue  = (*Client)(nil)
)

// New returns a Client on pool. Call Start to begin processing when cfg.Work is set.
func New(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg}
	workers := river.NewWorkers()
	river.AddWorker(workers, &tickWorker{c: c})
	river.AddWorker(workers, &runWorker{c: c})
	river.AddWorker(workers, &datasetWorker{c: c})
	river.AddWorker(workers, &releaseWorker{c: c})
	river.AddWorker(workers, &auditPurgeWorker{c: c})
	river.AddWorker(workers, &expirationTickWorker{c: c})
	river.AddWorker(workers, &expirationWorker{c: c})
	river.AddWorker(workers, &workOrderTickWorker{c: c})
	river.AddWorker(workers, &workOrderWorker{c: c})
	rc := &river.Config{
		Workers: workers, Logger: quietRiver(cfg.Logger), JobTimeout: cfg.JobTimeout, RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts: 10,
		// A job waits for the next fetch after its insert's notification, at most this long. A run is a chain of
		// jobs, so River's longer default added to every run's time; fetches this often happen only while jobs are
		// being inserted.
		FetchCooldown: 20 * time.Millisecond,
		// A job that resumes (jobs.ErrResume, River's snooze of no delay) is available at once, but nothing notifies
		// the producers: it waited for the next poll, up to River's default second. A run's parts and a work order
		// resume after half the job timeout (10 s by default), so a minute-long order waited so about five times. An
		// idle replica polls five times a second: an index probe of River's job table each.
		FetchPollInterval: 200 * time.Millisecond,
	}
	if cfg.Work {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	c.queue, c.requests = queue{client}, queue{client}
	if cfg.Requests != nil {
		// A client without queues or workers only inserts: a manual run is queued through the requests' pool.
		rq, err := river.NewClient(riverpgxv5.New(cfg.Requests), &river.Config{Logger: quietRiver(cfg.Logger)})
		if err != nil {
			return nil, fmt.Errorf("river client for requests: %w", err)
		}
		c.requests = queue{rq}
	}
	return c, nil
}

// periodicJobs are the jobs River's leader inserts on a schedule for work, so that one replica does each pass.
func periodicJobs(cfg Config, work Work) []*river.PeriodicJob {
	every := func(d time.Duration, args river.JobArgs) *river.PeriodicJob {
		return river.NewPeriodicJob(river.PeriodicInterval(d),
			func() (river.JobArgs, *river.InsertOpts) { return args, nil }, &river.PeriodicJobOpts{RunOnStart: true})
	}
	jobs := []*river.PeriodicJob{every(cfg.TickInterval, tickArgs{}), every(cfg.ReleaseInterval, releaseArgs{})}
	if work.AuditPurge != nil {
		jobs = append(jobs, every(cfg.AuditPurgeInterval, auditPurgeArgs{}))
	}
	if work.Expirations != nil {
		jobs = append(jobs, every(cfg.ExpirationInterval, expirationTickArgs{}))
	}
	if work.WorkOrders != nil {
		jobs = append(jobs, every(cfg.WorkOrderInterval, workOrderTickArgs{}))
	}
	return jobs
}

// Start hands the Client its work and, with Config.Work, begins processing jobs and inserting the periodic ones.
func (c *Client) Start(ctx context.Context, work Work) error {
	if work.Runs == nil {
		return errors.New("riverjobs: Start needs Work.Runs")
	}
	c.work = work
	if !c.cfg.Work {
		return nil
	}
	c.client.PeriodicJobs().AddMany(periodicJobs(c.cfg, work))
	if err := c.client.Start(ctx); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	return nil
}

// Stop lets running jobs finish their current batch and stops fetching new ones, until ctx ends.
func (c *Client) Stop(ctx context.Context) error {
	if !c.cfg.Work {
		return nil
	}
	return c.client.Stop(ctx)
}

// River exposes the River client, for tests that subscribe to job events.
func (c *Client) River() *river.Client[pgx.Tx] { return c.client }

// ForRequests is the queue the API's calls use: on the requests' pool when Config.Requests is set.
func (c *Client) ForRequests() jobs.Queue { return c.requests }

// WorkOrdersForRequests is the queue the API's work-order calls use, on the requests' pool as ForRequests.
func (c *Client) WorkOrdersForRequests() jobs.WorkOrderQueue { return c.requests }

// queue inserts jobs through one River client.
type queue struct{ client *river.Client[pgx.Tx] }

// uniqueByArgs keeps one queued or running job per run (or per run and dataset), whoever inserts it.
var uniqueByArgs = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

// EnqueueRun implements jobs.Queue.
func (q queue) EnqueueRun(ctx context.Context, runID string) error {
	if _, err := q.client.Insert(ctx, runArgs{RunID: runID}, uniqueByArgs); err != nil {
		return fmt.Errorf("queue run %s: %w", runID, err)
	}
	return nil
}

// EnqueueDatasets implements jobs.Queue.
func (q queue) EnqueueDatasets(ctx context.Context, runID string, datasetIDs, skip []string) error {
	params := make([]river.InsertManyParams, 0, len(datasetIDs))
	for _, ds := range datasetIDs {
		params = append(params, river.InsertManyParams{Args: datasetArgs{RunID: runID, DatasetID: ds, Walked: skip},
			InsertOpts: uniqueByArgs})
	}
	if _, err := q.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("queue datasets of run %s: %w", runID, err)
	}
	return nil
}

// uniqueWhileOpen keeps one queued or running job per expiration, but not past its completion: an expiration whose
// dataset was held is queued again by a later tick, and its job decides again.
var uniqueWhileOpen = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateScheduled,
}}}

// EnqueueExpirations implements jobs.ExpirationQueue.
func (q queue) EnqueueExpirations(ctx context.Context, ids []string) error {
	params := make([]river.InsertManyParams, 0, len(ids))
	for _, id := range ids {
		params = append(params, river.InsertManyParams{Args: expirationArgs{ExpirationID: id}, InsertOpts: uniqueWhileOpen})
	}
	if _, err := q.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("queue %d dataset expirations: %w", len(ids), err)
	}
	return nil
}

// EnqueueWorkOrders implements jobs.WorkOrderQueue.
func (q queue) EnqueueWorkOrders(ctx context.Context, ids []string) error {
	params := make([]river.InsertManyParams, 0, len(ids))
	for _, id := range ids {
		params = append(params, river.InsertManyParams{Args: workOrderArgs{WorkOrderID: id}, InsertOpts: uniqueWhileOpen})
	}
	if _, err := q.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("queue %d work orders: %w", len(ids), err)
	}
	return nil
}

// EnqueueRelease implements jobs.Queue.
func (q queue) EnqueueRelease(ctx context.Context, runID string) error {
	_, err := q.client.Insert(ctx, releaseArgs{RunID: runID}, nil)
	return err
}

// resumeOrErr turns the orchestration's ErrResume into River's snooze of no delay: the job runs again at once,
// without counting an attempt.
func resumeOrErr(err error) error {
	if errors.Is(err, jobs.ErrResume) {
		return river.JobSnooze(0)
	}
	return err
}

// quietRiver is the logger River gets: the service's, with River's Info lines written at Debug. River logs at Info
// what it does routinely ("Producer job counts" once a minute, each periodic job it inserts), which filled `make
// run`'s terminal; its warnings and errors keep their level.
func quietRiver(l *slog.Logger) *slog.Logger {
	return slog.New(infoAsDebug{l.Handler()})
}

// infoAsDebug is a slog.Handler that lowers Info records to Debug before its inner handler sees them.
type infoAsDebug struct{ inner slog.Handler }

// Enabled implements slog.Handler.
func (h infoAsDebug) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, lowered(level))
}

// Handle implements slog.Handler.
func (h infoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lowered(r.Level)
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h infoAsDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return infoAsDebug{h.inner.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h infoAsDebug) WithGroup(name string) slog.Handler { return infoAsDebug{h.inner.WithGroup(name)} }

func lowered(level slog.Level) slog.Level {
	if level == slog.LevelInfo {
		return slog.LevelDebug
	}
	return level
}
