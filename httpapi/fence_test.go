package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWritesOfAMovingOrgAnswer503 raises the write fence of an org, as `retentionctl org move` does while it
// copies the org to another cell: every kind of write answers 503 org-moving with Retry-After, nothing of it is
// stored, reads go on, and another org writes as before.
func TestWritesOfAMovingOrgAnswer503(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "moving"})
	_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO org_write_fences (org_id, move_id, state, since)
		VALUES ($1, gen_random_uuid(), 'fenced', now())`, b.org)
	require.NoError(t, err)
	ndjson := map[string]string{"Content-Type": "application/x-ndjson"}
	for name, req := range map[string]request{
		"Create": {method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "late"}},
		"Patch": {method: http.MethodPatch, path: "/v2/dataSets/" + id,
			body: map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P3M"}}}}},
		"Ingest": {method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: []byte(`{"timestamp":"2026-11-01T00:00:00Z"}` + "\n"), headers: ndjson},
		"Delete": {method: http.MethodDelete, path: "/dataSets/" + id},
		"Run":    {method: http.MethodPost, path: "/retention/runs", body: map[string]any{"datasetIds": []string{id}}},
	} {
		resp := b.do(t, req)
		require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s: %s", name, resp.body)
		require.Equal(t, "org-moving", resp.problem(t).Type, name)
		require.Equal(t, "5", resp.header.Get("Retry-After"), name)
	}
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
	require.Equal(t, http.StatusOK, resp.status, "reads go on: %s", resp.body)
	require.Contains(t, string(resp.body), `"version":"1.0.0"`, "the refused PATCH changed nothing")
	resp = b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows"})
	require.Equal(t, http.StatusOK, resp.status)
	require.Contains(t, string(resp.body), `"rows":[]`, "the refused ingestion stored nothing")

	other := &testBundle{url: b.url, org: newOrg()}
	other.token = mintToken(t, other.org, allScopes, 3600e9)
	resp = other.do(t, request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "unaffected"}})
	require.Equal(t, http.StatusCreated, resp.status, "another org writes as before: %s", resp.body)
}
