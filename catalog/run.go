package catalog

import (
	"context"
	"time"

	"github.com/acme/retention/retention"
)

// Run statuses.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusPartial   = "partial" // some datasets failed, others succeeded
	// StatusHeld ends a dataset's part of a run that removed nothing of it because it is under a legal hold.
	StatusHeld = "held"
)

// Triggers of a run.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// Run is one retention run over one store. Runs are part of the Catalog API's domain (POST /retention/runs); package
// jobs orchestrates them, and they are defined here, free of any adapter, so that the adapters that keep them
// (postgres) and serve them (httpapi) depend on the domain, never on the orchestration.
type Run struct {
	ID           string
	Store        Store
	Trigger      string
	ScheduledFor *time.Time // the cron slot of a scheduled run
	Org, Sandbox string     // a manual run's scope; empty for a scheduled run
	DatasetIDs   []string   // a manual run limited to some datasets
	DryRun       bool
	Status       string
	EvaluatedAt  time.Time // the one time at which the run judges expiry
	Grace        retention.Period
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	Error        string
	// Datasets are the per-dataset parts the reader may see, and the totals below count only them.
	Datasets      []RunDataset
	DatasetsTotal int
	DatasetsDone  int
	RowsDeleted   int64
}

// RunDataset is one dataset's part of a run.
type RunDataset struct {
	DatasetID         string
	Status            string
	TTLValue          *string
	RowsDeleted       int64 // rows removed; in a dry run, rows that would be
	PartitionsDropped int
	Error             string
	StartedAt         *time.Time
	FinishedAt        *time.Time
}

// RunRequest asks for a manual run in the caller's org and sandbox.
type RunRequest struct {
	Store      Store
	DatasetIDs []string
	DryRun     bool
}

// RunFilter pages through runs, newest first.
type RunFilter struct {
	Offset, Limit int
}

// RunService reads and starts runs. A caller sees only its own org's and sandbox's part of a run.
type RunService interface {
	// StartRun creates a manual run and queues it. Returns ECONFLICT naming the run in progress when one already
	// covers any of the same datasets, and ENOTFOUND for a dataset id the caller cannot see.
	StartRun(ctx context.Context, c *Caller, req RunRequest) (*Run, error)
	// FindRun returns the run with the caller's part of it; ENOTFOUND when it does not exist or is a manual run of
	// another org or sandbox. Every scheduled run is found, its part possibly empty.
	FindRun(ctx context.Context, c *Caller, id string) (*Run, error)
	// FindRuns returns, newest first, every scheduled run and the manual runs of the caller's org and sandbox, each
	// with the caller's part only (possibly none: 0 datasets, 0 rows).
	FindRuns(ctx context.Context, c *Caller, f RunFilter) ([]*Run, error)
}

// Preview is what a run would delete from one store of a dataset now, and how the store's rows spread by age.
type Preview struct {
	At           time.Time
	TTL          *retention.Period // the TTL the preview assumed
	RowsToDelete int64
	RowCount     int64       // rows stored, expired ones awaiting their run included
	Distribution []AgeBucket // rows by event month, newest first
	Estimated    bool        // the distribution is scaled up from a sample
}

// AgeBucket counts the rows whose event time falls in one calendar month.
type AgeBucket struct {
	Month time.Time
	Rows  int64
}

// PreviewService answers "what would a run delete with this TTL", without deleting anything.
type PreviewService interface {
	// Preview counts the rows a run at now would delete from the store of the dataset if its TTL became ttl from
	// now (useCurrent: the TTL it has), exactly as a dry run at that moment counts them, and spreads the store's
	// rows by age. Returns ENOTFOUND for a dataset the caller cannot see, EINVALID for a record dataset.
	Preview(ctx context.Context, c *Caller, datasetID string, store Store, ttl *retention.Period, useCurrent bool) (*Preview, error)
}

// Plan is a prepared run: the one evaluation all its parts judge expiry by, and the datasets still to do.
type Plan struct {
	RunID  string
	Store  Store
	At     time.Time        // the run's evaluation time
	Grace  retention.Period // rows ingested less than this before At are kept
	DryRun bool
	// Scope limits the run to these datasets (a manual run's, in its org and sandbox); nil means every dataset.
	Scope   map[string]bool
	Pending []string
}

// RunPart is what the run's own part did (the drops and the walk of the partitions placed by its time), for its
// metrics and log, and what its dataset parts start from.
type RunPart struct {
	// Dropped is the rows of each dataset that went with whole partitions (in a dry run: would go).
	Dropped           map[string]int64
	PartitionsDropped int
	RowsWalked        int64 // rows the walk of the boundary partitions removed
	PartitionsWalked  int
	// Skip names the partitions the dataset parts pass over: those the walk swept (every deletable row of the
	// run's datasets in them is gone), or in a dry run those whose rows Dropped already counts.
	Skip []string
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
