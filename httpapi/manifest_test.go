package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// patchManifest sends a v2 PATCH of the lake's deletionManifest.
func (b *testBundle) patchManifest(t *testing.T, id string, v any) *response {
	t.Helper()
	return b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{"extensions": map[string]any{
		"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"deletionManifest": v}}}}})
}

// The switch is off by default, set by a PATCH beside ttlValue, shown by GET, audited in the Update event with its
// before and after as the TTL is, and anything but a boolean is a 400 naming the field.
func TestDeletionManifestSetting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	doc, _ := b.getDataset(t, id)
	require.Equal(t, false, rowExpiration(t, doc, "adobe_lakeHouse")["deletionManifest"])

	resp := b.patchManifest(t, id, true)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc, _ = b.getDataset(t, id)
	require.Equal(t, true, rowExpiration(t, doc, "adobe_lakeHouse")["deletionManifest"])
	require.Equal(t, false, rowExpiration(t, doc, "adobe_unifiedProfile")["deletionManifest"], "the switch is per store")
	require.Equal(t, "P12M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"], "the TTL stays as it was")

	var details map[string]any
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT details FROM audit_events
		WHERE org_id = $1 AND asset_id = $2 AND action = 'Update'`, b.org, id).Scan(&details))
	lake := details["rowExpiration"].(map[string]any)["adobe_lakeHouse"].(map[string]any)
	require.Equal(t, false, lake["before"].(map[string]any)["deletionManifest"])
	require.Equal(t, true, lake["after"].(map[string]any)["deletionManifest"])

	for _, v := range []any{"true", 1, nil, map[string]any{}} {
		resp := b.patchManifest(t, id, v)
		require.Equal(t, http.StatusBadRequest, resp.status, "%v: %s", v, resp.body)
		p := resp.problem(t)
		require.Equal(t, "extensions.adobe_lakeHouse.rowExpiration.deletionManifest", p.Field)
		require.Contains(t, p.Detail, "must be true or false")
	}
	require.Equal(t, 2, b.auditCount(t, id), "the Create and the one Update: a refused PATCH writes nothing")
}

// manifestLines reads an NDJSON manifest: its entries and its summary line, which must come last.
func manifestLines(t *testing.T, resp *response) ([]map[string]any, map[string]any) {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, "application/x-ndjson", resp.header.Get("Content-Type"))
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(resp.body))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "line %q", sc.Text())
		lines = append(lines, line)
	}
	require.NotEmpty(t, lines)
	last := lines[len(lines)-1]
	require.Contains(t, last, "summary", "the summary line comes last")
	return lines[:len(lines)-1], last["summary"].(map[string]any)
}

// A run's manifest and a delete's, through the API: the rows each removed, with the counts of their audit events,
// for audit.read callers of the dataset's org and sandbox only.
func TestDeletionManifestRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.createDataset(t, datasetOpts{})
	require.Equal(t, http.StatusOK, b.patchManifest(t, id, true).status)
	b.ingest(t, id, ndjson(event("2020-01-01T00:00:00Z", `"_id":"old"`), event("2026-11-23T09:00:00Z", `"_id":"new"`),
		event("2026-11-23T09:30:00Z", `"_id":"gone"`)))

	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/gone"}).status)
	var eventID string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT id::text FROM audit_events WHERE asset_id = $1 AND action = 'Delete'`, id).Scan(&eventID))
	entries, summary := manifestLines(t, b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rowDeletes/" + eventID + "/deleted"}))
	require.Equal(t, []map[string]any{{"_id": "gone", "store": "adobe_lakeHouse", "timestamp": "2026-11-23T09:30:00Z", "reason": "row-delete"}}, entries)
	require.Equal(t, map[string]any{"rowsDeleted": float64(1), "listed": float64(1), "unlisted": float64(0)}, summary)

	// A run, as the run and dataset jobs do it.
	runs := postgres.NewRunRepository(b.db)
	runID, _, err := runs.CreateScheduledRun(ctx, catalog.LakeHouse, time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), retention.Period{})
	require.NoError(t, err)
	plan, err := runs.PrepareRun(ctx, runID)
	require.NoError(t, err)
	sweeper, err := postgres.NewSweeper(b.db, postgres.SweepConfig{}, nil)
	require.NoError(t, err)
	part, err := sweeper.RunPart(ctx, plan)
	require.NoError(t, err)
	left, err := sweeper.DatasetsLeft(ctx, plan, part.Skip)
	require.NoError(t, err)
	for _, ds := range left {
		_, err := sweeper.DatasetPart(ctx, plan, ds, part.Skip)
		require.NoError(t, err)
	}
	_, err = runs.FinishDatasets(ctx, runID, plan.Pending)
	require.NoError(t, err)

	// The run dropped the partition of "old" and left its listing to the release, which has not run: the answer
	// lists it all the same, and counts what the Expire event counts.
	pending := func() (listings, entries int) {
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pending_listings WHERE removal_id = $1),
			(SELECT coalesce(sum(entries), 0) FROM deletion_manifests WHERE removal_kind = 'run' AND removal_id = $1)`,
			runID).Scan(&listings, &entries))
		return listings, entries
	}
	listings, listed := pending()
	require.Equal(t, 1, listings, "the drop's listing waits for the release")
	require.Zero(t, listed)
	path := "/retention/runs/" + runID + "/datasets/" + id + "/deleted"
	entries, summary = manifestLines(t, b.do(t, request{method: http.MethodGet, path: path}))
	require.Equal(t, []map[string]any{{"_id": "old", "store": "adobe_lakeHouse", "timestamp": "2020-01-01T00:00:00Z",
		"expiresAt": "2021-01-01T00:00:00Z"}}, entries)
	var expired float64
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (details->>'rowsDeleted')::float8 FROM audit_events
		WHERE asset_id = $1 AND action = 'Expire'`, id).Scan(&expired))
	require.Equal(t, map[string]any{"rowsDeleted": expired, "listed": float64(1), "unlisted": float64(0)}, summary)
	listings, listed = pending()
	require.Zero(t, listings, "the reader wrote the listing out")
	require.Equal(t, 1, listed)
	entries, summary = manifestLines(t, b.do(t, request{method: http.MethodGet, path: path}))
	require.Len(t, entries, 1, "a second read lists the row once")
	require.Equal(t, expired, summary["rowsDeleted"])

	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	require.Equal(t, http.StatusNotFound, other.do(t, request{method: http.MethodGet, path: path}).status)
	require.Equal(t, http.StatusNotFound, other.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rowDeletes/" + eventID + "/deleted"}).status)
	readOnly := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsRead}, time.Hour)}
	require.Equal(t, http.StatusForbidden, b.do(t, request{method: http.MethodGet, path: path, headers: readOnly}).status)
	// A dry run removed nothing, so it has no manifest.
	caller := &catalog.Caller{User: "t", ClientID: "t", Org: b.org, Sandbox: "prod", RequestID: "r"}
	dryID, err := runs.CreateManualRun(ctx, caller, catalog.RunRequest{Store: catalog.LakeHouse, DatasetIDs: []string{id}, DryRun: true}, retention.Period{})
	require.NoError(t, err)
	_, err = runs.PrepareRun(ctx, dryID)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodGet, path: "/retention/runs/" + dryID + "/datasets/" + id + "/deleted"}).status)
	bad := b.do(t, request{method: http.MethodGet, path: "/retention/runs/not-a-uuid/datasets/" + id + "/deleted"})
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Equal(t, "runId", bad.problem(t).Field)
}
