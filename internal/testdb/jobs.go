package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/riverjobs"
)

// JobsOptions adjust the retention jobs Jobs builds. Zero fields: the defaults, as cmd/retentiond has them.
type JobsOptions struct {
	// Work turns on River's processing; without it the jobs are only queued (an API-only replica).
	Work bool
	// Sweeper replaces the sweep on db, e.g. to hold or break a run; SweepConfig tunes the one on db.
	Sweeper     jobs.Sweeper
	SweepConfig postgres.SweepConfig
	Metrics     *jobs.Metrics
	Config      jobs.Config
	River       riverjobs.Config
	// Expirations and AuditPurge are the replica's other work (riverjobs.Work), when set.
	Expirations *jobs.Expirations
	AuditPurge  func(ctx context.Context) error
	// WorkOrders carries out record-delete work orders on the replica, when set.
	WorkOrders *jobs.WorkOrders
	// Requests, when set, serves the API's calls (a pool of their own).
	Requests *postgres.DB
}

// Jobs wires the retention jobs of one replica on db as cmd/retentiond does: the orchestration (jobs.Service), the
// sweep and the runs on db, and River, started and stopped at the test's end.
func Jobs(t testing.TB, db *postgres.DB, o JobsOptions) (*jobs.Service, *riverjobs.Client) {
	t.Helper()
	if o.Sweeper == nil {
		sw, err := postgres.NewSweeper(db, o.SweepConfig, o.Config.Logger)
		require.NoError(t, err)
		o.Sweeper = sw
	}
	rc := o.River
	rc.Work = o.Work
	if rc.Logger == nil {
		rc.Logger = o.Config.Logger
	}
	if o.Requests != nil {
		rc.Requests = o.Requests.Pool
	}
	queue, err := riverjobs.New(db.Pool, rc)
	require.NoError(t, err)
	var requests *jobs.Requests
	if o.Requests != nil {
		requests = &jobs.Requests{Runs: postgres.NewRunRepository(o.Requests), Queue: queue.ForRequests()}
	}
	svc := jobs.New(postgres.NewRunRepository(db), o.Sweeper, queue, requests, o.Metrics, o.Config)
	require.NoError(t, queue.Start(context.Background(), riverjobs.Work{Runs: svc, Expirations: o.Expirations, AuditPurge: o.AuditPurge, WorkOrders: o.WorkOrders}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = queue.Stop(ctx)
	})
	return svc, queue
}
