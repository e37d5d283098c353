package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
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

// TestIngestionCutByTheFenceSaysWhatToSendAgain: a body committed in chunks, whose org's fence rises after its first
// chunk, answers 503 org-moving with what was committed: the rows of that chunk, the lines it covered
// (committedThroughLine), and none of the rejections of lines after them. A client that sends again only the lines
// after committedThroughLine, once the org's writes pass again, stores every line's row once: nothing lost, nothing
// twice, though the events carry no _id.
func TestIngestionCutByTheFenceSaysWhatToSendAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "cut"})
	var lines []string
	for i := range 3*testChunkRows + 7 {
		line := event("2026-11-01T00:00:00Z", fmt.Sprintf(`"n":%d`, i))
		if i == testChunkRows+3 {
			line = `{"n":"no timestamp"}` // rejected, in the chunk the fence refuses
		}
		lines = append(lines, line)
	}
	pw, done := b.streamIngest(t, id)
	for _, line := range lines[:testChunkRows] {
		_, err := fmt.Fprintln(pw, line)
		require.NoError(t, err)
	}
	require.Equal(t, testChunkRows, <-b.chunks, "the first chunk commits before the fence")
	_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO org_write_fences (org_id, move_id, state, since)
		VALUES ($1, gen_random_uuid(), 'fenced', now())`, b.org)
	require.NoError(t, err)
	for _, line := range lines[testChunkRows:] {
		if _, err := fmt.Fprintln(pw, line); err != nil {
			break // the server answered and stopped reading
		}
	}
	_ = pw.Close()
	resp := <-done
	require.Equal(t, http.StatusServiceUnavailable, resp.status, "body: %s", resp.body)
	retryAfter := resp.header.Get("Retry-After")
	answer := resp.json(t)
	require.Equal(t, "org-moving", answer["type"])
	require.EqualValues(t, testChunkRows, answer["accepted"])
	through, _ := answer["committedThroughLine"].(float64)
	require.Equal(t, testChunkRows, b.storedRows(t, id))

	_, err = b.db.Pool.Exec(context.Background(), `DELETE FROM org_write_fences WHERE org_id = $1`, b.org)
	require.NoError(t, err)
	resp = b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows",
		body: []byte(strings.Join(lines[int(through):], "\n") + "\n"), headers: map[string]string{"Content-Type": "application/x-ndjson"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, len(lines)-1, b.storedRows(t, id), "every line's row is stored once, after a resend of what the answer did not commit")
	var distinct int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT payload->'n') FROM lake_rows WHERE dataset_id = $1`, id).Scan(&distinct))
	require.Equal(t, len(lines)-1, distinct)
	require.EqualValues(t, 0, answer["rejected"], "the rejected line came after what was committed: sent again, it is judged again")
	require.EqualValues(t, 1, resp.json(t)["rejected"])
	require.Equal(t, "5", retryAfter, "the cut ingestion's 503 says when to send again, as every 503 does")
}

// TestRequestsOfAMovedOrgNameItsCell: after a move, a request of the org that reaches the old cell (directly, or
// routed there before the switch) answers 503 org-moved naming the cell the org moved to, from the move's record,
// where it answered 404 for the datasets it no longer holds; another org's not-found stays a 404.
func TestRequestsOfAMovedOrgNameItsCell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := &testBundle{url: b.url, org: newOrg()}
	other.token = mintToken(t, other.org, allScopes, 3600e9)
	id := other.createDataset(t, datasetOpts{name: "elsewhere"}) // a dataset the moved org does not hold here
	b.movedAway(t, "cell-b")
	for name, req := range map[string]request{
		"Dataset": {method: http.MethodGet, path: "/dataSets/" + id},
		"List":    {method: http.MethodGet, path: "/dataSets"},
		"Limits":  {method: http.MethodGet, path: "/ttl/" + id},
		"Rows":    {method: http.MethodGet, path: "/dataSets/" + id + "/rows"},
		"Patch": {method: http.MethodPatch, path: "/v2/dataSets/" + id,
			body: map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P3M"}}}}},
		"Create": {method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "late"}},
	} {
		resp := b.do(t, req)
		require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s: %s", name, resp.body)
		p := resp.problem(t)
		require.Equal(t, "org-moved", p.Type, name)
		require.Contains(t, p.Detail, "has moved to cell cell-b", name)
		require.Equal(t, "5", resp.header.Get("Retry-After"), name)
	}
	resp := other.do(t, request{method: http.MethodGet, path: "/dataSets/" + catalog.NewDatasetID()})
	require.Equal(t, http.StatusNotFound, resp.status, "another org's not-found stays a 404: %s", resp.body)
}

// movedAway leaves on the bundle's cell what a finished move of its org to cell leaves there: the move's record and
// the fence in its moved state (the org's data is gone, removed by the move).
func (b *testBundle) movedAway(t *testing.T, cell string) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `WITH m AS (
		INSERT INTO org_moves (id, org_id, role, target_cell, step, started_at, updated_at)
		VALUES (gen_random_uuid(), $1::text, 'source', $2::text, 'done', now(), '2026-11-23T10:00:00Z') RETURNING id)
		INSERT INTO org_write_fences (org_id, move_id, state, since) SELECT $1::text, id, 'moved', now() FROM m`, b.org, cell)
	require.NoError(t, err)
}

// setupCell is setup with every route that reads an org's data, the Audit Query API's included, on a cell that asks
// whether an org has left it (Config.OrgMovedAway), as retentiond's is.
func setupCell(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	runs, _ := testdb.Jobs(t, b.db, testdb.JobsOptions{})
	auditService := postgres.NewAuditService(b.db)
	auditService.CountBudget = time.Minute // as in setupAudit: a count, never the planner's estimate
	b.api = httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(b.db), Holds: postgres.NewDatasetService(b.db), Rows: postgres.NewRowService(b.db, testChunkRows),
		Runs: runs, Audit: auditService, Expirations: postgres.NewExpirationService(b.db, testExpirationQuota),
		Manifests: postgres.NewManifestService(b.db), WorkOrders: postgres.NewWorkOrderService(b.db, testWorkOrderLimits),
		Auth: auth, Ready: b.db.Ready, Registry: prometheus.NewRegistry(), TranslateError: postgres.TranslateError,
		OrgMovedAway: b.db.OrgMovedAway, LongRequestsPerOrg: 1000, // as in setup
	})
	srv := httptest.NewServer(apitest.Handler(t, b.api))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// TestEveryReadOfAMovedOrgNamesItsCell: after a move, every read of the org's data on the old cell answers 503
// org-moved naming the new cell, where it answered as for an org with nothing: an empty page (audit events, runs,
// expirations, work orders), an empty export, an empty chain that verifies, a quota with nothing consumed, a work
// order's preview over no dataset, or a 404 (a run, a manifest, an expiration, a work order). Another org, which did
// not move and has nothing on the cell either, gets exactly the answers it got before the move, 404s included: it
// cannot tell that the org moved.
func TestEveryReadOfAMovedOrgNamesItsCell(t *testing.T) {
	t.Parallel()
	b := setupCell(t)
	other := &testBundle{url: b.url, org: newOrg()}
	other.token = mintToken(t, other.org, allScopes, 3600e9)
	const hygiene = "/data/core/hygiene"
	dataset, run, workOrder := catalog.NewDatasetID(), uuid.NewString(), "DI-"+uuid.NewString()
	get := func(path string) request { return request{method: http.MethodGet, path: path} }
	routes := []struct {
		name   string
		req    request
		before int // what both orgs got before the move
	}{
		{"AuditEvents", get("/audit/events"), http.StatusOK},
		{"AuditEventsFiltered", get("/data/foundation/audit/events?property=action%3D%3DUpdate"), http.StatusOK},
		{"AuditExport", get("/audit/export"), http.StatusOK},
		{"AuditExportJSON", get("/audit/export?format=json"), http.StatusOK},
		{"AuditVerify", get("/audit/verify"), http.StatusOK},
		{"Runs", get("/retention/runs"), http.StatusOK},
		{"Run", get("/retention/runs/" + run), http.StatusNotFound},
		{"RunManifest", get("/retention/runs/" + run + "/datasets/" + dataset + "/deleted"), http.StatusNotFound},
		{"RowDeleteManifest", get("/dataSets/" + dataset + "/rowDeletes/" + uuid.NewString() + "/deleted"), http.StatusNotFound},
		{"Expirations", get(hygiene + "/ttl"), http.StatusOK},
		{"Expiration", get(hygiene + "/ttl/SD-" + uuid.NewString()), http.StatusNotFound},
		{"ExpirationOfADataset", get(hygiene + "/ttl/" + dataset), http.StatusNotFound},
		{"Quota", get(hygiene + "/quota"), http.StatusOK},
		{"WorkOrders", get(hygiene + "/workorder"), http.StatusOK},
		{"WorkOrdersAtTheRoot", get("/workorder?limit=5"), http.StatusOK},
		{"WorkOrder", get(hygiene + "/workorder/" + workOrder), http.StatusNotFound},
		{"WorkOrderManifest", get(hygiene + "/workorder/" + workOrder + "/datasets/" + dataset + "/deleted"), http.StatusNotFound},
		{"WorkOrderPreview", request{method: http.MethodPost, path: hygiene + "/workorder/preview", body: workOrderBody("ALL", "alice@example.com")}, http.StatusOK},
	}
	before := map[string]string{}
	for _, rt := range routes {
		resp := b.do(t, rt.req)
		require.Equal(t, rt.before, resp.status, "%s before the move: %s", rt.name, resp.body)
		resp = other.do(t, rt.req)
		require.Equal(t, rt.before, resp.status, "%s of another org: %s", rt.name, resp.body)
		before[rt.name] = answerOf(t, resp)
	}
	b.movedAway(t, "cell-b")
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			resp := b.do(t, rt.req)
			require.Equal(t, http.StatusServiceUnavailable, resp.status, "the moved org's %s %s: %s", rt.req.method, rt.req.path, resp.body)
			p := resp.problem(t)
			require.Equal(t, "org-moved", p.Type)
			require.Contains(t, p.Detail, "has moved to cell cell-b")
			require.Equal(t, "5", resp.header.Get("Retry-After"))
			require.Equal(t, before[rt.name], answerOf(t, other.do(t, rt.req)), "another org's answer is the one it got before the move")
		})
	}
}

// answerOf is a response's status and body without what differs between two sends of one request: a problem's
// request id, a preview's countedAt.
func answerOf(t *testing.T, resp *response) string {
	t.Helper()
	body := resp.body
	if bytes.HasPrefix(body, []byte("{")) {
		var doc map[string]any
		require.NoError(t, json.Unmarshal(body, &doc), "body: %s", body)
		delete(doc, "requestId")
		delete(doc, "countedAt")
		var err error
		body, err = json.Marshal(doc)
		require.NoError(t, err)
	}
	return fmt.Sprintf("%d %s", resp.status, body)
}
