package jobs_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
)

// TestMetricsNameNoTenant is part of finding 9: /metrics, served without authentication, listed every dataset a
// run had finished, by id, in retention_dataset_last_success_timestamp_seconds{dataset_id}. No label of the jobs'
// metrics may name a tenant's dataset or org.
func TestMetricsNameNoTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.dataset(t, "a", "P6M")
	reg := prometheus.NewRegistry()
	db := b.openDB(t)
	svc, queue := testdb.Jobs(t, db, testdb.JobsOptions{Work: true, Metrics: jobs.NewMetrics(reg, nil)})
	run, err := svc.StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	require.Equal(t, catalog.StatusSucceeded, waitForRun(t, b, []*replica{{Service: svc, queue: queue}}, run.ID).Status)

	families, err := reg.Gather()
	require.NoError(t, err)
	seen := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			seen++
			for _, l := range m.GetLabel() {
				require.NotContains(t, []string{id, b.caller.Org, b.caller.Sandbox}, l.GetValue(), "%s{%s}", f.GetName(), l.GetName())
				require.NotEqual(t, "dataset_id", l.GetName(), f.GetName())
			}
		}
	}
	require.Positive(t, seen, "the run was counted")
}
