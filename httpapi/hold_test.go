package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// placeHold places a hold on the dataset through the API and returns the hold's document.
func (b *testBundle) placeHold(t testing.TB, id string, body map[string]any) map[string]any {
	t.Helper()
	if body == nil {
		body = map[string]any{"reason": "litigation", "reference": "case 2026-114"}
	}
	resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/holds", body: body})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	return resp.json(t)
}

// holdEvents returns the details of the bundle's org's audit events of one action about the dataset, oldest first.
func (b *testBundle) holdEvents(t testing.TB, id, action string) []map[string]any {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT details FROM audit_events
		WHERE org_id = $1 AND asset_id = $2 AND action = $3 ORDER BY seq`, b.org, id, action)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		var d map[string]any
		require.NoError(t, json.Unmarshal(raw, &d))
		out = append(out, d)
	}
	require.NoError(t, rows.Err())
	return out
}

func activeHolds(t testing.TB, doc map[string]any) float64 {
	t.Helper()
	holds, ok := doc["holds"].(map[string]any)
	require.True(t, ok, "no holds in %v", doc)
	return holds["active"].(float64)
}

func TestHoldLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	doc, _ := b.getDataset(t, id)
	require.Zero(t, activeHolds(t, doc))

	resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/holds",
		body: map[string]any{"reason": "litigation", "reference": "case 2026-114"}})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	first := resp.json(t)
	holdID := first["id"].(string)
	require.Regexp(t, `^[0-9a-f]{24}$`, holdID)
	require.Equal(t, "/dataSets/"+id+"/holds/"+holdID, resp.header.Get("Location"))
	require.Equal(t, "litigation", first["reason"])
	require.Equal(t, "case 2026-114", first["reference"])
	require.Equal(t, "tester@example.com", first["placedBy"])
	require.Equal(t, true, first["active"])
	placedAt, err := time.Parse(time.RFC3339Nano, first["placedAt"].(string))
	require.NoError(t, err)
	require.True(t, placedAt.After(b.now))

	second := b.placeHold(t, id, map[string]any{"reason": "internal investigation"})
	require.Nil(t, second["reference"])
	doc, _ = b.getDataset(t, id)
	require.Equal(t, float64(2), activeHolds(t, doc))

	list := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/holds"})
	require.Equal(t, http.StatusOK, list.status, "body: %s", list.body)
	body := list.json(t)
	require.Equal(t, float64(2), body["active"])
	holds := body["holds"].([]any)
	require.Len(t, holds, 2)
	require.Equal(t, holdID, holds[0].(map[string]any)["id"])

	released := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/" + holdID})
	require.Equal(t, http.StatusOK, released.status, "body: %s", released.body)
	require.Equal(t, false, released.json(t)["active"])
	require.Equal(t, "tester@example.com", released.json(t)["releasedBy"])
	doc, _ = b.getDataset(t, id)
	require.Equal(t, float64(1), activeHolds(t, doc))
	got := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/holds/" + holdID})
	require.Equal(t, http.StatusOK, got.status, "body: %s", got.body)
	require.NotEmpty(t, got.json(t)["releasedAt"])
	again := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/" + holdID})
	require.Equal(t, http.StatusNotFound, again.status, "body: %s", again.body)

	placed := b.holdEvents(t, id, "Hold")
	require.Len(t, placed, 2)
	require.Equal(t, map[string]any{"holdId": holdID, "reason": "litigation", "reference": "case 2026-114",
		"placedBy": "tester@example.com", "placedAt": first["placedAt"], "activeHolds": float64(1)}, placed[0])
	releases := b.holdEvents(t, id, "Release")
	require.Len(t, releases, 1)
	require.Equal(t, holdID, releases[0]["holdId"])
	require.Equal(t, "case 2026-114", releases[0]["reference"])
	require.Equal(t, float64(1), releases[0]["activeHolds"])
}

func TestHoldsUnderAdobePrefix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	resp := b.do(t, request{method: http.MethodPost, path: "/data/foundation/catalog/datasets/" + id + "/holds",
		body: map[string]any{"reason": "audit"}})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	require.True(t, strings.HasPrefix(resp.header.Get("Location"), "/data/foundation/catalog/dataSets/"+id+"/holds/"))
	list := b.do(t, request{method: http.MethodGet, path: "/data/foundation/catalog/dataSets/" + id + "/holds"})
	require.Equal(t, float64(1), list.json(t)["active"])
}

func TestHoldScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	holdID := b.placeHold(t, id, nil)["id"].(string)
	manager := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org,
		[]string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeRetentionRun, catalog.ScopeAuditRead}, time.Hour)}
	for _, req := range []request{
		{method: http.MethodPost, path: "/dataSets/" + id + "/holds", body: map[string]any{"reason": "x"}, headers: manager},
		{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/" + holdID, headers: manager},
	} {
		resp := b.do(t, req)
		require.Equal(t, http.StatusForbidden, resp.status, "%s %s: %s", req.method, req.path, resp.body)
		p := resp.problem(t)
		require.Equal(t, "missing-scope", p.Type)
		require.Contains(t, p.Detail, "retention.hold")
	}
	list := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/holds", headers: manager})
	require.Equal(t, http.StatusOK, list.status, "body: %s", list.body)
	require.Equal(t, float64(1), list.json(t)["active"], "a refused release must leave the hold active")
}

func TestHoldTenancy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	holdID := b.placeHold(t, id, nil)["id"].(string)
	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	for _, req := range []request{
		{method: http.MethodPost, path: "/dataSets/" + id + "/holds", body: map[string]any{"reason": "x"}},
		{method: http.MethodGet, path: "/dataSets/" + id + "/holds"},
		{method: http.MethodGet, path: "/dataSets/" + id + "/holds/" + holdID},
		{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/" + holdID},
	} {
		require.Equal(t, http.StatusNotFound, other.do(t, req).status, "%s %s", req.method, req.path)
	}
	other2 := b.createDataset(t, datasetOpts{})
	resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + other2 + "/holds/" + holdID})
	require.Equal(t, http.StatusNotFound, resp.status, "a hold is released through its own dataset only")
	doc, _ := b.getDataset(t, id)
	require.Equal(t, float64(1), activeHolds(t, doc))
}

func TestHoldInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	for _, tc := range []struct {
		name, body, typ, field string
	}{
		{"MissingReason", `{"reference":"case 1"}`, "missing-field", "reason"},
		{"EmptyReason", `{"reason":""}`, "invalid-field", "reason"},
		{"ReasonNotText", `{"reason":12}`, "invalid-type", "reason"},
		{"OverlongReason", `{"reason":"` + strings.Repeat("é", catalog.MaxHoldReasonLength+1) + `"}`, "invalid-field", "reason"},
		{"OverlongReference", `{"reason":"x","reference":"` + strings.Repeat("r", catalog.MaxHoldReferenceLength+1) + `"}`, "invalid-field", "reference"},
		{"NulInReference", `{"reason":"x","reference":"a\u0000b"}`, "", ""},
		{"UnknownField", `{"reason":"x","until":"2027-01-01"}`, "unknown-field", "until"},
		{"NotAnObject", `["reason"]`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/holds", body: tc.body})
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			p := resp.problem(t)
			if tc.typ != "" {
				require.Equal(t, tc.typ, p.Type)
				require.Equal(t, tc.field, p.Field)
			}
		})
	}
	resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/not-a-hold"})
	require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
	require.Equal(t, "holdId", resp.problem(t).Field)
	doc, _ := b.getDataset(t, id)
	require.Zero(t, activeHolds(t, doc), "no refused request may place a hold")
	require.Empty(t, b.holdEvents(t, id, "Hold"))
}

func TestDeleteHeldDataset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"evidence"`)))
	holdID := b.placeHold(t, id, nil)["id"].(string)

	resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id})
	require.Equal(t, http.StatusConflict, resp.status, "body: %s", resp.body)
	p := resp.problem(t)
	require.Equal(t, "dataset-held", p.Type)
	require.Contains(t, p.Detail, holdID)
	require.Contains(t, p.Detail, "case 2026-114")

	row := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/evidence"})
	require.Equal(t, http.StatusConflict, row.status, "body: %s", row.body)
	require.Equal(t, "dataset-held", row.problem(t).Type)
	require.Equal(t, []string{"evidence"}, rowIDs(b.readRows(t, id, "")))

	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/" + holdID}).status)
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id}).status)
}

func TestHeldDatasetKeepsTTLChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.placeHold(t, id, nil)
	resp := b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{
		"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P3M"}}}}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc, _ := b.getDataset(t, id)
	require.Equal(t, "P3M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
}

func TestListHeldDatasets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held := b.createDataset(t, datasetOpts{name: "held"})
	free := b.createDataset(t, datasetOpts{name: "free"})
	b.placeHold(t, held, nil)
	list := func(query string) []string {
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?" + query})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		var ids []string
		for id := range resp.json(t) {
			ids = append(ids, id)
		}
		return ids
	}
	require.Equal(t, []string{held}, list("property=holds.active>0"))
	require.Equal(t, []string{free}, list("property=holds.active==0"))
	require.ElementsMatch(t, []string{held, free}, list(""))

	for _, q := range []string{"property=name==held", "property=holds.active>0&property=holds.active==0"} {
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?" + q})
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", q, resp.body)
		require.Equal(t, "property", resp.problem(t).Field)
	}
}

func TestReadExpiredRowsOfHeldDataset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	got := b.ingest(t, id, ndjson(event("2026-11-20T00:00:00Z", `"_id":"live"`), event("2024-01-01T00:00:00Z", `"_id":"old"`)))
	require.Equal(t, float64(1), got["expiredOnArrival"], "%v", got)
	b.placeHold(t, id, nil)
	require.Equal(t, []string{"live"}, rowIDs(b.readRows(t, id, "")), "reads keep hiding expired rows")
	rows := b.readRows(t, id, "includeExpired=true")
	require.Equal(t, []string{"old", "live"}, rowIDs(rows))
	require.Equal(t, true, rows[0]["_expired"])
	require.Nil(t, rows[1]["_expired"])
	require.Equal(t, []string{"live"}, rowIDs(b.readRows(t, id, "includeExpired=false")))

	reader := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org,
		[]string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage}, time.Hour)}
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows?includeExpired=true", headers: reader})
	require.Equal(t, http.StatusForbidden, resp.status, "body: %s", resp.body)
	require.Contains(t, resp.problem(t).Detail, "retention.hold")
	bad := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows?includeExpired=yes"})
	require.Equal(t, http.StatusBadRequest, bad.status, "body: %s", bad.body)
	require.Equal(t, "includeExpired", bad.problem(t).Field)
}
