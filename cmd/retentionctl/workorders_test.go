package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/config"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
)

func TestWorkOrdersCommands(t *testing.T) {
	t.Parallel()
	const secret = "workorders-test-secret-of-32-bytes!!"
	ctx := context.Background()
	db := testdb.NewDB(t)
	auth, err := httpapi.NewAuthenticator(ctx, secret, "", time.Now)
	require.NoError(t, err)
	datasets := postgres.NewDatasetService(db)
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(httpapi.Config{Datasets: datasets, Expirations: postgres.NewExpirationService(db, 0),
		WorkOrders: postgres.NewWorkOrderService(db, postgres.WorkOrderLimits{}), Auth: auth, Ready: db.Ready, Registry: prometheus.NewRegistry()})))
	t.Cleanup(srv.Close)
	c := &catalog.Caller{User: "u", ClientID: "c", Org: "WOORG@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: "loyalty", Classification: catalog.Classification{DataBehavior: catalog.Record, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	rows := postgres.NewRowService(db, 100)
	_, err = rows.IngestRows(ctx, c, ds.ID, func(yield func(catalog.RowInput) bool) {
		for _, r := range []catalog.RowInput{{ID: "a", Payload: []byte(`{}`), Identities: []string{"email:alice@example.com"}},
			{ID: "b", Payload: []byte(`{}`), Identities: []string{"email:bob@example.com"}}} {
			if !yield(r) {
				return
			}
		}
	}, catalog.IngestOptions{})
	require.NoError(t, err)
	env := map[string]string{"RETENTION_URL": srv.URL, "AUTH_HS256_SECRET": secret}

	preview := mustCtl(t, env, "workorders", "preview", "-org", c.Org, "-dataset", "ALL", "-identity", "email:Alice@Example.com")
	require.Contains(t, preview, "loyalty ("+ds.ID+")  1     1     0", "the dataset's one row of Alice, in the lake")
	require.Contains(t, preview, "1 row in 1 of the 1 dataset the order covers")

	out := mustCtl(t, env, "workorders", "create", "-org", c.Org, "-dataset", ds.ID, "-name", "erase alice", "-identity", "email:Alice@Example.com")
	require.Contains(t, out, "received")
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	require.True(t, catalog.IsWorkOrderID(id), "%q", out)
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(db, config.DefaultIdentityHashKey), nil).Execute(ctx, id))

	show := mustCtl(t, env, "workorders", "show", "-org", c.Org, id)
	require.Contains(t, show, "completed")
	require.Contains(t, show, "loyalty ("+ds.ID+")  completed  1", "the part names its dataset and its one row")
	require.Contains(t, mustCtl(t, env, "workorders", "list", "-org", c.Org, "-status", "completed"), id)
	require.NotContains(t, mustCtl(t, env, "workorders", "list", "-org", c.Org, "-status", "failed"), id)

	file := filepath.Join(t.TempDir(), "ids.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"namespaceCode":"email","value":"bob@example.com"},{"namespaceCode":"ECID","value":"1"}]`), 0o600))
	require.Contains(t, mustCtl(t, env, "workorders", "create", "-org", c.Org, "-dataset", "ALL", "-name", "from a file", "-file", file, "-json"), `"identityCount":2`)
	_, err = ctl(t, env, "workorders", "create", "-org", c.Org, "-dataset", ds.ID, "-name", "none")
	require.ErrorContains(t, err, "400")
	_, err = ctl(t, env, "workorders", "show", "-org", "OTHER@AdobeOrg", id)
	require.ErrorContains(t, err, "404", "another org does not see the order")

	hash := strings.TrimSpace(mustCtl(t, env, "workorders", "hash", "EMAIL", "alice@EXAMPLE.com"))
	var details string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT details::text FROM audit_events WHERE action = 'Delete' AND details->>'workorderId' = $1`, id).Scan(&details))
	require.Contains(t, details, hash, "the reviewer's hash is the one the Delete event names")
}
