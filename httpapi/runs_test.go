package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

func TestRetentionRunsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(event("2020-01-01T00:00:00Z", `"_id":"old"`)))

	resp := b.do(t, request{method: http.MethodPost, path: "/retention/runs", body: map[string]any{"datasetIds": []string{id}, "dryRun": true}})
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	run := resp.json(t)
	runID := run["id"].(string)
	require.Equal(t, "/retention/runs/"+runID, resp.header.Get("Location"))
	require.Equal(t, "pending", run["status"])
	require.Equal(t, "manual", run["trigger"])
	require.Equal(t, true, run["dryRun"])
	require.NotContains(t, run, "scheduledFor")
	_, err := time.Parse("2006-01-02T15:04:05.000Z07:00", run["createdAt"].(string))
	require.NoError(t, err, "times are RFC 3339 with milliseconds")

	conflict := b.do(t, request{method: http.MethodPost, path: "/retention/runs", body: map[string]any{}})
	require.Equal(t, http.StatusConflict, conflict.status)
	require.Contains(t, conflict.problem(t).Detail, runID)

	got := b.do(t, request{method: http.MethodGet, path: "/retention/runs/" + runID})
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, runID, got.json(t)["id"])
	list := b.do(t, request{method: http.MethodGet, path: "/retention/runs"}).json(t)
	runs := list["_embedded"].(map[string]any)["runs"].([]any)
	require.Len(t, runs, 1)

	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	require.Equal(t, http.StatusNotFound, other.do(t, request{method: http.MethodGet, path: "/retention/runs/" + runID}).status)
	require.Empty(t, other.do(t, request{method: http.MethodGet, path: "/retention/runs"}).json(t)["_embedded"].(map[string]any)["runs"])
	require.Equal(t, http.StatusNotFound, other.do(t, request{method: http.MethodPost, path: "/retention/runs",
		body: map[string]any{"datasetIds": []string{id}}}).status, "another org's dataset is not found")

	readOnly := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsRead}, time.Hour)}
	require.Equal(t, http.StatusForbidden, b.do(t, request{method: http.MethodPost, path: "/retention/runs", body: map[string]any{}, headers: readOnly}).status)
	for _, body := range []map[string]any{{"dryRun": "yes"}, {"datasetIds": []string{"nope"}}, {"store": "x"}, {"when": "now"}} {
		resp := b.do(t, request{method: http.MethodPost, path: "/retention/runs", body: body})
		require.Equal(t, http.StatusBadRequest, resp.status, "%v", body)
	}
	require.Equal(t, http.StatusBadRequest, b.do(t, request{method: http.MethodGet, path: "/retention/runs/not-a-uuid"}).status)
	require.Equal(t, http.StatusBadRequest, b.do(t, request{method: http.MethodGet, path: "/retention/runs?limit=0"}).status)
}

func TestNextRunShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	doc, _ := b.getDataset(t, id)
	re := rowExpiration(t, doc, "adobe_lakeHouse")
	require.NotContains(t, re, "lastCompleted", "no run has finished the dataset yet")
	require.EqualValues(t, testNextRun.UnixMilli(), re["nextRun"], "epoch ms of the next scheduled run")
}
