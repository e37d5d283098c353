package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
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

// listedRuns is GET /retention/runs as the bundle's org sees it, keyed by run id.
func (b *testBundle) listedRuns(t *testing.T) map[string]map[string]any {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/retention/runs"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	runs := map[string]map[string]any{}
	for _, r := range resp.json(t)["_embedded"].(map[string]any)["runs"].([]any) {
		run := r.(map[string]any)
		runs[run["id"].(string)] = run
	}
	return runs
}

// An org asking "did this week's job run?" sees every scheduled run, with its own part, even when the run had
// nothing of the org's to delete; manual runs stay with the org and sandbox that started them.
func TestScheduledRunsVisibleToEveryOrg(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(event("2020-01-01T00:00:00Z", "")))
	manual := b.do(t, request{method: http.MethodPost, path: "/retention/runs", body: map[string]any{"dryRun": true}})
	require.Equal(t, http.StatusAccepted, manual.status, "body: %s", manual.body)
	manualID := manual.json(t)["id"].(string)

	// The weekly run of the lake, as the scheduler creates and plans it: it covers every org's datasets with rows.
	ctx := context.Background()
	store := postgres.NewRunRepository(b.db)
	scheduledID, created, err := store.CreateScheduledRun(ctx, catalog.LakeHouse, time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), retention.Period{Days: 30})
	require.NoError(t, err)
	require.True(t, created)
	_, err = store.PrepareRun(ctx, scheduledID)
	require.NoError(t, err)

	mine := b.listedRuns(t)
	require.Len(t, mine, 2)
	require.Equal(t, "schedule", mine[scheduledID]["trigger"])
	require.Equal(t, "2026-11-22T03:00:00.000Z", mine[scheduledID]["scheduledFor"])
	require.Len(t, mine[scheduledID]["datasets"], 1, "the org's part: its dataset with rows")
	require.Equal(t, id, mine[scheduledID]["datasets"].([]any)[0].(map[string]any)["datasetId"])
	require.Contains(t, mine, manualID)

	empty := map[string]any{"datasetsDone": float64(0), "datasetsTotal": float64(0), "rowsDeleted": float64(0)}
	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	for name, reader := range map[string]func(*testing.T, request) *response{
		"AnotherOrg": func(t *testing.T, r request) *response { return other.do(t, r) },
		"AnotherSandbox": func(t *testing.T, r request) *response {
			r.headers = map[string]string{"x-sandbox-name": "dev"}
			return b.do(t, r)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp := reader(t, request{method: http.MethodGet, path: "/retention/runs"})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			runs := resp.json(t)["_embedded"].(map[string]any)["runs"].([]any)
			require.Len(t, runs, 1, "the scheduled run, not the other org's manual one: %s", resp.body)
			run := runs[0].(map[string]any)
			require.Equal(t, scheduledID, run["id"])
			require.Equal(t, empty, run["progress"], "an empty part: 0 datasets, 0 rows")
			require.Equal(t, []any{}, run["datasets"])

			got := reader(t, request{method: http.MethodGet, path: "/retention/runs/" + scheduledID})
			require.Equal(t, http.StatusOK, got.status, "body: %s", got.body)
			require.Equal(t, empty, got.json(t)["progress"])
			require.Equal(t, http.StatusNotFound, reader(t, request{method: http.MethodGet, path: "/retention/runs/" + manualID}).status)
		})
	}
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

// A held dataset has no next run: no run removes its rows before every hold is released. Its GET, its PATCH answer
// and the listing say so alike, and ordering by nextRun puts the datasets the next run may act on first.
func TestNextRunOfAHeldDataset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	idA := b.createDataset(t, datasetOpts{name: "a"})
	idHeld := b.createDataset(t, datasetOpts{name: "b"})
	idC := b.createDataset(t, datasetOpts{name: "c"})
	patch := func(id string) {
		t.Helper()
		resp := b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{
			"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": nil}}}}})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		doc := resp.json(t)[id].(map[string]any)
		require.EqualValues(t, testNextRun.UnixMilli(), rowExpiration(t, doc, "adobe_lakeHouse")["nextRun"],
			"keep forever still has the next run: it deletes what expired under an earlier setting")
	}
	patch(idC)
	hold := b.placeHold(t, idHeld, nil)

	doc, _ := b.getDataset(t, idHeld)
	for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
		require.NotContains(t, rowExpiration(t, doc, store), "nextRun", "held: no run removes its rows")
	}
	resp := b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + idHeld, body: map[string]any{"description": "kept"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc = resp.json(t)[idHeld].(map[string]any)
	require.EqualValues(t, 1, activeHolds(t, doc), "the PATCH answer shows the holds as GET does")
	require.NotContains(t, rowExpiration(t, doc, "adobe_lakeHouse"), "nextRun")

	list := func(orderBy string) []string {
		t.Helper()
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=" + orderBy})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		docs := resp.json(t)
		require.EqualValues(t, testNextRun.UnixMilli(), rowExpiration(t, docs[idA].(map[string]any), "adobe_lakeHouse")["nextRun"])
		return keysInOrder(t, resp.body)
	}
	resp = b.do(t, request{method: http.MethodGet, path: "/dataSets"})
	require.NotContains(t, rowExpiration(t, resp.json(t)[idHeld].(map[string]any), "adobe_lakeHouse"), "nextRun")
	field := "extensions.adobe_lakeHouse.rowExpiration.nextRun"
	require.Equal(t, []string{idA, idC, idHeld}, list(field+",name"), "the next run's datasets, then the held one")
	require.Equal(t, []string{idHeld, idA, idC}, list("desc:"+field+",name"))

	resp = b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + idHeld + "/holds/" + hold["id"].(string)})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc, _ = b.getDataset(t, idHeld)
	require.EqualValues(t, testNextRun.UnixMilli(), rowExpiration(t, doc, "adobe_lakeHouse")["nextRun"], "released")
	require.Equal(t, []string{idA, idHeld, idC}, list(field+",name"))
}

func TestRetentionScheduleAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)

	resp := b.do(t, request{method: http.MethodGet, path: "/retention/schedule"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.JSONEq(t, `{"schedules":[
		{"store":"adobe_lakeHouse","cron":"0 3 * * 0","timeZone":"UTC","nextRun":"2026-11-29T03:00:00.000Z"},
		{"store":"adobe_unifiedProfile","cron":"0 4 * * *","timeZone":"UTC","nextRun":"2026-11-29T03:00:00.000Z"}]}`, string(resp.body))

	t.Run("UnderAdobesPrefixToo", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/data/foundation/catalog/retention/schedule"}).status)
	})

	t.Run("NeedsDatasetsRead", func(t *testing.T) {
		t.Parallel()
		auditOnly := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeAuditRead}, time.Hour)}
		require.Equal(t, http.StatusForbidden, b.do(t, request{method: http.MethodGet, path: "/retention/schedule", headers: auditOnly}).status)
	})
}
