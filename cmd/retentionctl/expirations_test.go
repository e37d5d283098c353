package main

import (
	"context"
	"net/http/httptest"
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

func TestExpirationsCommands(t *testing.T) {
	t.Parallel()
	const secret = "expirations-test-secret-of-32-bytes!"
	ctx := context.Background()
	db := testdb.NewDB(t)
	auth, err := httpapi.NewAuthenticator(ctx, secret, "", time.Now)
	require.NoError(t, err)
	datasets := postgres.NewDatasetService(db)
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(httpapi.Config{Datasets: datasets, Expirations: postgres.NewExpirationService(db, 0),
		Auth: auth, Ready: db.Ready, Registry: prometheus.NewRegistry()})))
	t.Cleanup(srv.Close)
	c := &catalog.Caller{User: "u", ClientID: "c", Org: "EXPORG@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: "pilot", Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	env := map[string]string{"RETENTION_URL": srv.URL, "AUTH_HS256_SECRET": secret}
	expiry := time.Now().UTC().AddDate(0, 0, 3).Format("2006-01-02")

	out := mustCtl(t, env, "expirations", "create", "-org", c.Org, "-dataset", ds.ID, "-expiry", expiry, "-name", "retire the pilot")
	require.Contains(t, out, "pending")
	require.Contains(t, out, expiry+"T00:00:00.000Z")
	e, err := postgres.NewExpirationService(db, 0).FindExpiration(ctx, c, ds.ID, false)
	require.NoError(t, err)
	require.Equal(t, "dev@acme.example", e.CreatedBy, "created through the API as the token `retentionctl token` mints: one identity")

	require.Contains(t, mustCtl(t, env, "expirations", "list", "-org", c.Org, "-status", "pending"), e.ID)
	require.NotContains(t, mustCtl(t, env, "expirations", "list", "-org", c.Org, "-status", "cancelled"), e.ID)
	_, err = ctl(t, env, "expirations", "create", "-org", c.Org, "-dataset", ds.ID, "-expiry", expiry, "-name", "again")
	require.ErrorContains(t, err, e.ID, "the refusal names the open expiration")
	_, err = ctl(t, env, "expirations", "create", "-org", c.Org, "-dataset", ds.ID, "-expiry", "tomorrow", "-name", "x")
	require.ErrorContains(t, err, "400")

	require.Contains(t, mustCtl(t, env, "expirations", "cancel", "-org", c.Org, e.ID), "cancelled")
	require.Contains(t, mustCtl(t, env, "expirations", "list", "-org", c.Org, "-json"), `"status":"cancelled"`)
	_, err = ctl(t, env, "expirations", "cancel", "-org", "OTHER@AdobeOrg", e.ID)
	require.ErrorContains(t, err, "404", "another org does not see the expiration")

	// With the README's $TOKEN exported, the CLI acts as that token, as curl does.
	env["TOKEN"] = mustCtl(t, map[string]string{"AUTH_HS256_SECRET": secret}, "token", "-org", c.Org, "-sub", "alice@acme.example")
	mustCtl(t, env, "expirations", "create", "-org", c.Org, "-dataset", ds.ID, "-expiry", expiry, "-name", "retire it again")
	e, err = postgres.NewExpirationService(db, 0).FindExpiration(ctx, c, ds.ID, false)
	require.NoError(t, err)
	require.Equal(t, "alice@acme.example", e.CreatedBy)
}
