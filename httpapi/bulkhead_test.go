package httpapi_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// setupOutage is a server whose database is a port nobody listens on: every connection is refused.
func setupOutage(t *testing.T) *testBundle {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	db, err := postgres.Open(context.Background(), "postgres://postgres@"+dead+"/gone?connect_timeout=5", nil)
	require.NoError(t, err, "the pool connects lazily")
	t.Cleanup(db.Close)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	runs, err := jobs.New(db.Pool, postgres.NewRunStore(db), &retention.Sweeper{Store: postgres.NewSweepStore(db)}, nil, jobs.Config{})
	require.NoError(t, err)
	api := httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(db), Rows: postgres.NewRowService(db, testChunkRows), Runs: runs, Auth: auth,
		Preview: postgres.NewPreviewService(db, retention.Period{}), Audit: postgres.NewAuditService(db),
		Ready: db.Ready, Registry: prometheus.NewRegistry(),
	})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	b := &testBundle{url: srv.URL, db: db, org: newOrg()}
	b.token = mintToken(t, b.org, allScopes, time.Hour)
	return b
}

// TestDatabaseOutageAnswers503 is part of finding 9: with the database gone, every route answered 500, as for a
// bug. It answers 503 with Retry-After, and /readyz 503 as before.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	b := setupOutage(t)
	const id = "5c8c3c555033b814b69f947f"
	for _, tc := range []struct {
		name string
		req  request
	}{
		{"ListDatasets", request{method: http.MethodGet, path: "/dataSets"}},
		{"CreateDataset", request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "clicks"}}},
		{"GetDataset", request{method: http.MethodGet, path: "/dataSets/" + id}},
		{"PatchDataset", request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{"description": "x"}}},
		{"DeleteDataset", request{method: http.MethodDelete, path: "/dataSets/" + id}},
		{"GetTTL", request{method: http.MethodGet, path: "/ttl/" + id}},
		{"Preview", request{method: http.MethodGet, path: "/ttl/" + id + "/preview"}},
		{"ReadRows", request{method: http.MethodGet, path: "/dataSets/" + id + "/rows"}},
		{"IngestRows", request{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: `[{"timestamp":"2026-11-01T10:00:00Z"}]`}},
		{"DeleteRow", request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/r1"}},
		{"ListRuns", request{method: http.MethodGet, path: "/retention/runs"}},
		{"GetRun", request{method: http.MethodGet, path: "/retention/runs/0195e4a0-0000-7000-8000-000000000000"}},
		{"StartRun", request{method: http.MethodPost, path: "/retention/runs", body: map[string]any{"datasetIds": []string{id}}}},
		{"AuditEvents", request{method: http.MethodGet, path: "/audit/events"}},
		{"AuditExport", request{method: http.MethodGet, path: "/audit/export"}},
		{"AuditVerify", request{method: http.MethodGet, path: "/audit/verify"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(t, tc.req)
			require.Equal(t, http.StatusServiceUnavailable, resp.status, "body: %s", resp.body)
			require.Equal(t, "5", resp.header.Get("Retry-After"))
			p := resp.problem(t)
			require.Equal(t, "database-unavailable", p.Type)
			require.Contains(t, p.Detail, "again later")
			require.NotContains(t, p.Detail, "127.0.0.1", "nothing internal leaks")
		})
	}
	t.Run("Readyz", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/readyz"})
		require.Equal(t, http.StatusServiceUnavailable, resp.status)
	})
}
