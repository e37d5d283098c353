package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
)

func TestRunsCommands(t *testing.T) {
	t.Parallel()
	const secret = "runs-test-secret-of-at-least-32-bytes"
	ctx := context.Background()
	db := testdb.NewDB(t)
	svc, _ := testdb.Jobs(t, db, testdb.JobsOptions{Work: true})
	auth, err := httpapi.NewAuthenticator(ctx, secret, "", time.Now)
	require.NoError(t, err)
	datasets, rows := postgres.NewDatasetService(db), postgres.NewRowService(db, 0)
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(httpapi.Config{Datasets: datasets, Rows: rows, Runs: svc, Auth: auth,
		Ready: db.Ready, Registry: prometheus.NewRegistry()})))
	t.Cleanup(srv.Close)

	c := &catalog.Caller{User: "u", ClientID: "c", Org: "RUNSORG@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: "old", Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	old := time.Now().AddDate(-3, 0, 0)
	_, err = rows.IngestRows(ctx, c, ds.ID, func(yield func(catalog.RowInput) bool) {
		yield(catalog.RowInput{ID: "ancient", Timestamp: old, IngestedAt: &old, Payload: []byte(`{}`)})
	}, catalog.IngestOptions{})
	require.NoError(t, err)

	env := map[string]string{"RETENTION_URL": srv.URL, "AUTH_HS256_SECRET": secret}
	// A dry run says what would be deleted, and its progress bar ends at every dataset done.
	out, progress, err := ctlBoth(t, env, "runs", "start", "-org", c.Org, "-dataset", ds.ID, "-dry-run", "-wait")
	require.NoError(t, err)
	require.Contains(t, out, "succeeded")
	require.Contains(t, out, "1/1 datasets, 1 rows would be deleted\n")
	require.Contains(t, out, "ROWS TO DELETE")
	require.NotContains(t, out, "rows deleted")
	last := finalBar(progress)
	require.Contains(t, last, "1 rows would be deleted", "progress: %q", progress)
	require.Contains(t, last, "100%", "the bar ends full: %q", progress)
	require.Contains(t, last, "(1/1)")

	out, progress, err = ctlBoth(t, env, "runs", "start", "-org", c.Org, "-dataset", ds.ID, "-wait")
	require.NoError(t, err)
	require.Contains(t, out, "succeeded")
	require.Contains(t, out, "1/1 datasets, 1 rows deleted\n")
	require.Contains(t, out, "ROWS DELETED")
	last = finalBar(progress)
	require.Contains(t, last, "1 rows deleted", "progress: %q", progress)
	require.Contains(t, last, "100%", "progress: %q", progress)
	runID := strings.TrimSuffix(strings.Fields(out)[1], ":")

	require.Contains(t, mustCtl(t, env, "runs", "list", "-org", c.Org), runID)
	require.Contains(t, mustCtl(t, env, "runs", "show", "-org", c.Org, "-json", runID), `"rowsDeleted":1`)
	// The short id the progress bar prints is enough when one run's id starts with it.
	require.Contains(t, mustCtl(t, env, "runs", "show", "-org", c.Org, runID[:8]), "run "+runID+": succeeded")
	_, err = ctl(t, env, "runs", "show", "-org", c.Org, "0000000g")
	require.ErrorContains(t, err, "RUN_ID must be a run's id or the start of one (hex digits and dashes)")
	_, err = ctl(t, env, "runs", "show", "-org", "OTHER@AdobeOrg", runID[:8])
	require.ErrorContains(t, err, "no run of the latest 1000 of this sandbox has an id starting with "+runID[:8])
	_, err = ctl(t, env, "runs", "show", "-org", "OTHER@AdobeOrg", runID)
	require.ErrorContains(t, err, "404", "another org does not see the run")
}

// finalBar is the last line the progress bar wrote.
func finalBar(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
