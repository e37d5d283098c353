package riverjobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/acme/retention/jobs"
)

// tickArgs is the periodic job that turns due cron slots into runs.
type tickArgs struct{}

// Kind implements river.JobArgs.
func (tickArgs) Kind() string { return "retention_tick" }

type tickWorker struct {
	river.WorkerDefaults[tickArgs]
	c *Client
}

func (w *tickWorker) Work(ctx context.Context, _ *river.Job[tickArgs]) error {
	return w.c.work.Runs.Tick(ctx, w.c.work.Runs.Now())
}

// runArgs is the job of a run's own part: it drops whole partitions, walks the boundary ones and fans the rest out
// by dataset (jobs.Service.RunPart).
type runArgs struct {
	RunID string `json:"run_id"`
}

// Kind implements river.JobArgs.
func (runArgs) Kind() string { return "retention_run" }

type runWorker struct {
	river.WorkerDefaults[runArgs]
	c *Client
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	return resumeOrErr(w.c.work.Runs.RunPart(ctx, job.Args.RunID, attempt(job.Attempt, job.MaxAttempts)))
}

// datasetArgs is the job that deletes one dataset's remaining expired rows of a run (jobs.Service.DatasetPart).
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
	c *Client
}

func (w *datasetWorker) Work(ctx context.Context, job *river.Job[datasetArgs]) error {
	a := job.Args
	return resumeOrErr(w.c.work.Runs.DatasetPart(ctx, a.RunID, a.DatasetID, a.Walked, attempt(job.Attempt, job.MaxAttempts)))
}

// releaseArgs is the job that drops the tables of detached partitions (jobs.Service.Release): queued by every run
// job once its part is done, and periodically for any that a crash left.
type releaseArgs struct {
	// RunID names the run that queued the job, which drops every detached table; the periodic job has none, and
	// drops only tables detached at least jobs.ReleaseLeftoverAge ago.
	RunID string `json:"run_id,omitempty"`
}

// Kind implements river.JobArgs.
func (releaseArgs) Kind() string { return "retention_release" }

type releaseWorker struct {
	river.WorkerDefaults[releaseArgs]
	c *Client
}

func (w *releaseWorker) Work(ctx context.Context, job *river.Job[releaseArgs]) error {
	return w.c.work.Runs.Release(ctx, job.Args.RunID)
}

// Timeout lifts Config.JobTimeout: a release lists the rows of each detached partition with a pending deletion
// manifest listing before it drops it, which can take minutes for a large partition, and bounds its own work (each
// batch of drops by SweepConfig.BatchTimeout, each listing by SweepConfig.ListTimeout, leaving what it could not
// list to the next release). A release a rescue runs twice does each table once: each is taken under a row lock.
func (w *releaseWorker) Timeout(*river.Job[releaseArgs]) time.Duration { return -1 }

// auditPurgeArgs is the periodic job of the audit log's own retention (Config.AuditPurge). A periodic job, not a
// ticker on every replica: River's leader inserts it, so one replica purges per period, and it works with the
// jobs' pool and stops with the jobs.
type auditPurgeArgs struct{}

// Kind implements river.JobArgs.
func (auditPurgeArgs) Kind() string { return "audit_purge" }

type auditPurgeWorker struct {
	river.WorkerDefaults[auditPurgeArgs]
	c *Client
}

func (w *auditPurgeWorker) Work(ctx context.Context, _ *river.Job[auditPurgeArgs]) error {
	if w.c.work.AuditPurge == nil {
		return nil // queued by a replica that purges; this one was configured not to
	}
	return w.c.work.AuditPurge(ctx)
}

// Timeout lifts Config.JobTimeout, as the ticker this job replaced had no bound: a pass purges org by org in
// batches, each committed, and may take longer than a run's job on a large log.
func (w *auditPurgeWorker) Timeout(*river.Job[auditPurgeArgs]) time.Duration { return -1 }

func attempt(n, maxAttempts int) jobs.Attempt { return jobs.Attempt{Number: n, Max: maxAttempts} }

// expirationTickArgs is the periodic job that queues the due dataset expirations (jobs.Expirations.Tick).
type expirationTickArgs struct{}

// Kind implements river.JobArgs.
func (expirationTickArgs) Kind() string { return "dataset_expiration_tick" }

type expirationTickWorker struct {
	river.WorkerDefaults[expirationTickArgs]
	c *Client
}

func (w *expirationTickWorker) Work(ctx context.Context, _ *river.Job[expirationTickArgs]) error {
	if w.c.work.Expirations == nil {
		return nil // queued by a replica that runs expirations; this one was configured not to
	}
	return w.c.work.Expirations.Tick(ctx, w.c.queue)
}

// expirationArgs is the job of one due dataset expiration (jobs.Expirations.Execute), unique by the expiration while
// queued or running.
type expirationArgs struct {
	ExpirationID string `json:"expiration_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (expirationArgs) Kind() string { return "dataset_expiration" }

type expirationWorker struct {
	river.WorkerDefaults[expirationArgs]
	c *Client
}

func (w *expirationWorker) Work(ctx context.Context, job *river.Job[expirationArgs]) error {
	if w.c.work.Expirations == nil {
		return river.JobSnooze(w.c.cfg.ExpirationInterval) // leave it to a replica that runs expirations
	}
	err := w.c.work.Expirations.Execute(ctx, job.Args.ExpirationID)
	if errors.Is(err, jobs.ErrLeftToTick) {
		return river.JobCancel(err) // no backoff: the tick queues it again while it is due
	}
	return err
}

// workOrderTickArgs is the periodic job that queues the open work orders (jobs.WorkOrders.Tick).
type workOrderTickArgs struct{}

// Kind implements river.JobArgs.
func (workOrderTickArgs) Kind() string { return "workorder_tick" }

type workOrderTickWorker struct {
	river.WorkerDefaults[workOrderTickArgs]
	c *Client
}

func (w *workOrderTickWorker) Work(ctx context.Context, _ *river.Job[workOrderTickArgs]) error {
	if w.c.work.WorkOrders == nil {
		return nil // queued by a replica that runs work orders; this one was configured not to
	}
	return w.c.work.WorkOrders.Tick(ctx, w.c.queue)
}

// workOrderArgs is the job of one open work order (jobs.WorkOrders.Execute), unique by the order while queued or
// running, so that replicas and ticks never run two at once.
type workOrderArgs struct {
	WorkOrderID string `json:"workorder_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (workOrderArgs) Kind() string { return "workorder" }

type workOrderWorker struct {
	river.WorkerDefaults[workOrderArgs]
	c *Client
}

func (w *workOrderWorker) Work(ctx context.Context, job *river.Job[workOrderArgs]) error {
	if w.c.work.WorkOrders == nil {
		return river.JobSnooze(w.c.cfg.WorkOrderInterval) // leave it to a replica that runs work orders
	}
	err := w.c.work.WorkOrders.Execute(ctx, job.Args.WorkOrderID)
	if errors.Is(err, jobs.ErrLeftToTick) {
		return river.JobCancel(err) // no backoff: the tick queues it again while it is open
	}
	return resumeOrErr(err)
}
