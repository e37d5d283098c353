package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
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
	svc, _ := testdb.Jobs(t, jobsDB, testdb.JobsOptions{Requests: requests})

	held, err := jobsDB.Pool.Acquire(context.Background())
	require.NoError(t, err)
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run, err := svc.StartRun(ctx, b.caller, catalog.RunRequest{DatasetIDs: []string{id}})
	require.NoError(t, err, "a run is started through the requests' pool")
	got, err := svc.FindRun(ctx, b.caller, run.ID)
	require.NoError(t, err)
	require.Equal(t, run.ID, got.ID)
	runs, err := svc.FindRuns(ctx, b.caller, catalog.RunFilter{Limit: 5})
	require.NoError(t, err)
	require.Len(t, runs, 1)
}
