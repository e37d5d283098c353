package main

import (
	"context"
	"net/http"
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
	"github.com/acme/retention/retention"
)

func TestRowsExplainCommand(t *testing.T) {
	t.Parallel()
	const secret = "rows-explain-test-secret-of-32-bytes"
	ctx := context.Background()
	db := testdb.NewDB(t)
	auth, err := httpapi.NewAuthenticator(ctx, secret, "", time.Now)
	require.NoError(t, err)
	datasets := postgres.NewDatasetService(db)
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(httpapi.Config{Datasets: datasets, Holds: datasets,
		Rows: postgres.NewRowService(db, 0), Explain: postgres.NewPreviewService(db, retention.Period{Days: 30}),
		Auth: auth, Ready: db.Ready, Registry: prometheus.NewRegistry()})))
	t.Cleanup(srv.Close)
	c := &catalog.Caller{User: "u", ClientID: "c", Org: "ROWSORG@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: "events", Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	env := map[string]string{"RETENTION_URL": srv.URL, "AUTH_HS256_SECRET": secret}
	token := mustCtl(t, env, "token", "-org", c.Org)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/dataSets/"+ds.ID+"/rows",
		strings.NewReader(`{"timestamp":"2020-01-01T00:00:00Z","_id":"old/1"}`+"\n"+`{"timestamp":"2020-01-01T00:00:00Z","_id":"ttl","_ttl":"P90D"}`+"\n"))
	require.NoError(t, err)
	for k, v := range map[string]string{"Authorization": "Bearer " + strings.TrimSpace(token), "x-api-key": "k", "x-gw-ims-org-id": c.Org, "Content-Type": "application/x-ndjson"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	out := mustCtl(t, env, "rows", "explain", "-org", c.Org, ds.ID, "old/1")
	require.Contains(t, out, "row:          old/1 of dataset "+ds.ID+" in adobe_lakeHouse")
	require.Contains(t, out, "clock:        eventTime 2020-01-01T00:00:00.000Z")
	require.Contains(t, out, "governed by:  setting: the store's TTL in force, P")
	require.Contains(t, out, "(expired: yes)")
	require.Contains(t, out, "(grace P30D)")
	require.Contains(t, out, "held by:      no hold")
	require.Contains(t, out, "next run:     none that deletes it", "no schedule is known to this server")
	require.NotContains(t, out, "own expiry:", "a row without one")
	require.Contains(t, mustCtl(t, env, "rows", "explain", "-org", c.Org, "-json", ds.ID, "old/1"), `"expired":true`)
	out = mustCtl(t, env, "rows", "explain", "-org", c.Org, ds.ID, "ttl")
	require.Contains(t, out, "governed by:  rowTtl: the row's own _ttl, 7776000 seconds after its clock")
	require.Contains(t, out, "own expiry:   2020-03-31T00:00:00.000Z (_ttl, 7776000 seconds after the clock)\n")

	_, err = ctl(t, env, "rows", "explain", "-org", c.Org, ds.ID, "missing")
	require.ErrorContains(t, err, "404")
	_, err = ctl(t, env, "rows", "explain", "-org", "OTHER@AdobeOrg", ds.ID, "old/1")
	require.ErrorContains(t, err, "404", "another org does not see the row")
	_, err = ctl(t, env, "rows", "explain", "-org", c.Org, "-store", "nowhere", ds.ID, "old/1")
	require.ErrorContains(t, err, "store")
	_, err = ctl(t, env, "rows", "explain", "-org", c.Org, ds.ID)
	require.ErrorContains(t, err, "needs a dataset id and a row's _id")
}
