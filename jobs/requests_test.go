package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// TestRequestsHaveTheirOwnPool is the jobs' side of finding 1's bulkheads: the API's calls of the jobs service
// (start a run, read runs) used the jobs' pool, so requests could take the connections runs work with, and runs
// theirs. With Config.Requests they use the requests' pool: with every connection of the jobs' pool taken, a run is
// still started and read.
func TestRequestsHaveTheirOwnPool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.dataset(t, "ds", "P3M")
	jobsDB, err := postgres.OpenPool(context.Background(), b.url, nil, postgres.PoolOptions{Name: "jobs", MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(jobsDB.Close)
	requests := b.openDB(t)
	svc, err := jobs.New(jobsDB.Pool, postgres.NewRunStore(jobsDB), &retention.Sweeper{Store: postgres.NewSweepStore(jobsDB)}, nil,
		jobs.Config{Requests: &jobs.Requests{Pool: requests.Pool, Store: postgres.NewRunStore(requests)}})
	require.NoError(t, err)

	held, err := jobsDB.Pool.Acquire(context.Background())
	require.NoError(t, err)
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run, err := svc.StartRun(ctx, b.caller, jobs.RunRequest{DatasetIDs: []string{id}})
	require.NoError(t, err, "a run is started through the requests' pool")
	got, err := svc.FindRun(ctx, b.caller, run.ID)
	require.NoError(t, err)
	require.Equal(t, run.ID, got.ID)
	runs, err := svc.FindRuns(ctx, b.caller, jobs.RunFilter{Limit: 5})
	require.NoError(t, err)
	require.Len(t, runs, 1)
}
