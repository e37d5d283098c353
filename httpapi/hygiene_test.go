package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/postgres"
)

// hygieneSpec is Adobe's Data Hygiene OpenAPI document (testdata/adobe), served under /data/core/hygiene, loaded
// once for every test.
var hygieneSpec = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromFile("testdata/adobe/data-hygiene.openapi.yaml")
	if err != nil {
		return nil, err
	}
	// Adobe's servers name its gateway's host; the routes are matched on the service's own path prefix instead.
	doc.Servers = openapi3.Servers{{URL: "/data/core/hygiene"}}
	return gorillamux.NewRouter(doc)
})

// hygiene sends a request to the Data Hygiene API and, when it succeeds, validates the answer against Adobe's
// spec: status, content type and body schema. Errors are the service's problem+json documents, which Adobe's spec
// does not describe; the tests check those themselves.
func (b *testBundle) hygiene(t testing.TB, req request) *response {
	t.Helper()
	req.path = "/data/core/hygiene" + req.path
	resp := b.do(t, req)
	if resp.status >= 300 {
		return resp
	}
	router, err := hygieneSpec()
	require.NoError(t, err)
	httpReq, err := http.NewRequestWithContext(context.Background(), req.method, "http://localhost"+req.path, nil)
	require.NoError(t, err)
	route, params, err := router.FindRoute(httpReq)
	require.NoError(t, err, "%s %s is not a route of Adobe's spec", req.method, req.path)
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: httpReq, PathParams: params, Route: route},
		Status:                 resp.status, Header: resp.header, Body: io.NopCloser(bytes.NewReader(resp.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), input), "%s %s answered %d: %s", req.method, req.path, resp.status, resp.body)
	return resp
}

// expirationOpts configures createExpiration; zero fields get defaults.
type expirationOpts struct {
	datasetID   string
	expiry      string
	displayName string
}

// createExpiration schedules a dataset's deletion through the API (a new dataset's, when none is named) and returns
// the answer's document.
func (b *testBundle) createExpiration(t testing.TB, o expirationOpts) map[string]any {
	t.Helper()
	if o.datasetID == "" {
		o.datasetID = b.createDataset(t, datasetOpts{})
	}
	if o.expiry == "" {
		o.expiry = "2030-12-31"
	}
	if o.displayName == "" {
		o.displayName = "retire " + o.datasetID
	}
	resp := b.hygiene(t, request{method: http.MethodPost, path: "/ttl",
		body: map[string]any{"datasetId": o.datasetID, "expiry": o.expiry, "displayName": o.displayName}})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	return resp.json(t)
}

// requireRefusal checks a refusal: its status, problem type and the field it names.
func requireRefusal(t *testing.T, resp *response, status int, typ, field string) httpapi.Problem {
	t.Helper()
	p := requireProblem(t, resp, status, field)
	require.Equal(t, typ, p.Type, "detail: %s", p.Detail)
	return p
}

func TestExpirationLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "campaign-2026"})
	created := b.createExpiration(t, expirationOpts{datasetID: id, expiry: "2030-12-31", displayName: "Retire the campaign"})
	ttlID, _ := created["ttlId"].(string)
	require.True(t, catalog.IsExpirationID(ttlID), "ttlId %q", ttlID)
	require.Equal(t, map[string]any{"datasetId": id, "datasetName": "campaign-2026", "sandboxName": "prod",
		"displayName": "Retire the campaign", "imsOrg": b.org, "status": "pending", "expiry": "2030-12-31T00:00:00.000Z"},
		pick(created, "datasetId", "datasetName", "sandboxName", "displayName", "imsOrg", "status", "expiry"))
	require.Equal(t, "tester@example.com", created["updatedBy"])

	t.Run("FoundByItsIDOrItsDataset", func(t *testing.T) {
		for _, ref := range []string{ttlID, id} {
			resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ref})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			require.Equal(t, ttlID, resp.json(t)["ttlId"])
		}
	})
	t.Run("DatasetShowsTheTagAndKeepsWorking", func(t *testing.T) {
		doc, _ := b.getDataset(t, id)
		want := strconv.FormatInt(time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli(), 10)
		require.Equal(t, []any{want}, doc["tags"].(map[string]any)["adobe/hygiene/ttl"])
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows",
			body: `{"timestamp":"2026-11-23T09:00:00Z","page":"/a"}`, headers: map[string]string{"Content-Type": "application/x-ndjson"}})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	})

	resp := b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + ttlID,
		body: map[string]any{"expiry": "2031-06-15T12:30:00", "description": "a pilot's data"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, "2031-06-15T12:30:00.000Z", resp.json(t)["expiry"])
	require.Equal(t, "a pilot's data", resp.json(t)["description"])

	resp = b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + ttlID})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, "cancelled", resp.json(t)["status"])
	doc, _ := b.getDataset(t, id)
	require.NotContains(t, doc["tags"], "adobe/hygiene/ttl", "a cancelled expiration leaves no tag")

	t.Run("CancelledCannotBeCancelledAgain", func(t *testing.T) {
		p := requireRefusal(t, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + ttlID}), http.StatusBadRequest, "expiration-not-pending", "status")
		require.Contains(t, p.Detail, "cancelled")
	})
	t.Run("CancelledReopensOnlyWithANewExpiry", func(t *testing.T) {
		requireRefusal(t, b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + ttlID, body: map[string]any{"displayName": "x"}}),
			http.StatusBadRequest, "expiration-not-pending", "expiry")
	})
	resp = b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + ttlID, body: map[string]any{"expiry": "2032-01-01"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, "pending", resp.json(t)["status"])

	resp = b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ttlID + "?include=history"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	var steps []string
	for _, h := range resp.json(t)["history"].([]any) {
		steps = append(steps, h.(map[string]any)["status"].(string))
	}
	require.Equal(t, []string{"created", "updated", "cancelled", "reopened"}, steps)
	require.Equal(t, 4, b.auditCount(t, ttlID), "create, update, cancel and reopen are each an audit event")
	var before, after string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT details->'expiry'->>'before', details->'expiry'->>'after'
		FROM audit_events WHERE asset_id = $1 AND action = 'Update' ORDER BY seq LIMIT 1`, ttlID).Scan(&before, &after))
	require.Equal(t, []string{"2030-12-31T00:00:00Z", "2031-06-15T12:30:00Z"}, []string{before, after})
}

func pick(doc map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = doc[k]
	}
	return out
}

func TestExpirationRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(t *testing.T, body any) *response {
		return b.hygiene(t, request{method: http.MethodPost, path: "/ttl", body: body})
	}
	ds := b.createDataset(t, datasetOpts{})
	valid := func(change map[string]any) map[string]any {
		body := map[string]any{"datasetId": ds, "expiry": "2030-12-31", "displayName": "d"}
		for k, v := range change {
			if v == nil {
				delete(body, k)
				continue
			}
			body[k] = v
		}
		return body
	}
	for _, tc := range []struct {
		name, typ, field string
		body             any
	}{
		{"ExpiryMissing", "missing-field", "expiry", valid(map[string]any{"expiry": nil})},
		{"DisplayNameMissing", "missing-field", "displayName", valid(map[string]any{"displayName": nil})},
		{"DatasetIDMissing", "missing-field", "datasetId", valid(map[string]any{"datasetId": nil})},
		{"DatasetIDMalformed", "invalid-dataset-id", "datasetId", valid(map[string]any{"datasetId": "../x"})},
		{"ExpiryNotADate", "invalid-expiry", "expiry", valid(map[string]any{"expiry": "next tuesday"})},
		{"ExpiryWithAnOffset", "invalid-expiry", "expiry", valid(map[string]any{"expiry": "2030-12-31T00:00:00+02:00"})},
		{"ExpiryANumber", "invalid-type", "expiry", valid(map[string]any{"expiry": 1924905600000})},
		{"ExpiryHugeYear", "invalid-expiry", "expiry", valid(map[string]any{"expiry": "99999-01-01"})},
		{"ExpiryWithin24Hours", "expiry-too-soon", "expiry", valid(map[string]any{"expiry": "2026-11-24T09:59:00"})},
		{"ExpiryInThePast", "expiry-too-soon", "expiry", valid(map[string]any{"expiry": "2020-01-01"})},
		{"DisplayNameTooLong", "invalid-field", "displayName", valid(map[string]any{"displayName": strings.Repeat("x", catalog.MaxNameLength+1)})},
		{"DisplayNameBlank", "invalid-field", "displayName", valid(map[string]any{"displayName": "  "})},
		{"DescriptionTooLong", "invalid-field", "description", valid(map[string]any{"description": strings.Repeat("x", catalog.MaxDescriptionLength+1)})},
		{"UnknownField", "unknown-field", "status", valid(map[string]any{"status": "completed"})},
		{"NULInDisplayName", "nul-character", "displayName", `{"datasetId":"` + ds + `","expiry":"2030-12-31","displayName":"a\u0000b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRefusal(t, post(t, tc.body), http.StatusBadRequest, tc.typ, tc.field)
		})
	}
	t.Run("NothingWasWritten", func(t *testing.T) {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM dataset_expirations WHERE org_id = $1`, b.org).Scan(&n))
		require.Zero(t, n)
	})
	t.Run("ExactlyADayAheadIsAccepted", func(t *testing.T) {
		b.setNow(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
		resp := post(t, map[string]any{"datasetId": b.createDataset(t, datasetOpts{}), "expiry": "2026-11-24T10:00:00.500", "displayName": "d"})
		require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	})
	t.Run("SecondOpenExpirationNamesTheFirst", func(t *testing.T) {
		first := b.createExpiration(t, expirationOpts{})
		p := requireRefusal(t, post(t, map[string]any{"datasetId": first["datasetId"], "expiry": "2031-01-01", "displayName": "again"}),
			http.StatusBadRequest, "expiration-exists", "datasetId")
		require.Contains(t, p.Detail, first["ttlId"].(string))
	})
	t.Run("SystemDatasetCannotBeScheduled", func(t *testing.T) {
		system := b.createDataset(t, datasetOpts{managedBy: "SYSTEM"})
		requireRefusal(t, post(t, valid(map[string]any{"datasetId": system})), http.StatusForbidden, "system-dataset", "datasetId")
	})
	t.Run("MissingDatasetIsNotFound", func(t *testing.T) {
		resp := post(t, valid(map[string]any{"datasetId": "0123456789abcdef01234567"}))
		require.Equal(t, http.StatusNotFound, resp.status, "body: %s", resp.body)
	})
	t.Run("UpdateNeedsAField", func(t *testing.T) {
		e := b.createExpiration(t, expirationOpts{})
		requireRefusal(t, b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + e["ttlId"].(string), body: map[string]any{}}),
			http.StatusBadRequest, "empty-update", "")
	})
	t.Run("MalformedIDIsRefused", func(t *testing.T) {
		requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: "/ttl/SD-nope"}), http.StatusBadRequest, "invalid-expiration-id", "ID")
	})
	t.Run("UnknownIncludeIsRefused", func(t *testing.T) {
		e := b.createExpiration(t, expirationOpts{})
		requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + e["ttlId"].(string) + "?include=everything"}),
			http.StatusBadRequest, "invalid-parameter", "include")
	})
}

// TestExpirationsThatRanCannotChange moves the clock past an expiry and runs the scheduler's steps: the dataset is
// deleted, the expiration shows executing then completed with their times, and neither can be changed or cancelled.
func TestExpirationsThatRanCannotChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.createExpiration(t, expirationOpts{expiry: "2026-12-01"})
	ttlID, dsID := e["ttlId"].(string), e["datasetId"].(string)
	runner := postgres.NewExpirationRunner(b.db)
	ctx := context.Background()
	b.setNow(time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC))
	started, err := runner.StartExpiration(ctx, ttlID)
	require.NoError(t, err)
	require.True(t, started)

	resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ttlID})
	require.Equal(t, "executing", resp.json(t)["status"])
	require.Equal(t, "2026-12-01T00:00:01.000Z", resp.json(t)["executingAt"])
	for _, req := range []request{{method: http.MethodDelete, path: "/ttl/" + ttlID},
		{method: http.MethodPut, path: "/ttl/" + ttlID, body: map[string]any{"expiry": "2031-01-01"}}} {
		p := requireRefusal(t, b.hygiene(t, req), http.StatusBadRequest, "expiration-not-pending", "status")
		require.Contains(t, p.Detail, "executing")
	}

	require.NoError(t, runner.FinishExpiration(ctx, ttlID))
	resp = b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + dsID})
	require.Equal(t, "completed", resp.json(t)["status"])
	require.NotEmpty(t, resp.json(t)["completedAt"])
	require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodGet, path: "/dataSets/" + dsID}).status)
	p := requireRefusal(t, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + ttlID}), http.StatusBadRequest, "expiration-not-pending", "status")
	require.Contains(t, p.Detail, "completed")

	var named string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT details->>'expirationId' FROM audit_events WHERE asset_id = $1 AND action = 'Delete'`, dsID).Scan(&named))
	require.Equal(t, ttlID, named, "the dataset's Delete event names the expiration")
	require.NoError(t, runner.FinishExpiration(ctx, ttlID))
	require.Equal(t, 1, countActions(t, b, dsID, "Delete"), "a second finish deletes nothing")
}

func countActions(t testing.TB, b *testBundle, assetID, action string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = $2`, assetID, action).Scan(&n))
	return n
}

func TestExpirationTenancyAndScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.createExpiration(t, expirationOpts{})
	ttlID, dsID := e["ttlId"].(string), e["datasetId"].(string)
	other := newOrg()
	otherOrg := map[string]string{"x-gw-ims-org-id": other, "Authorization": "Bearer " + mintToken(t, other, allScopes, time.Hour)}
	otherSandbox := map[string]string{"x-sandbox-name": "dev"}
	for name, headers := range map[string]map[string]string{"AnotherOrg": otherOrg, "AnotherSandbox": otherSandbox} {
		t.Run(name, func(t *testing.T) {
			for _, req := range []request{{method: http.MethodGet, path: "/ttl/" + ttlID}, {method: http.MethodGet, path: "/ttl/" + dsID},
				{method: http.MethodPut, path: "/ttl/" + ttlID, body: map[string]any{"displayName": "mine"}},
				{method: http.MethodDelete, path: "/ttl/" + ttlID},
				{method: http.MethodPost, path: "/ttl", body: map[string]any{"datasetId": dsID, "expiry": "2031-01-01", "displayName": "x"}}} {
				req.headers = headers
				resp := b.hygiene(t, req)
				require.Equal(t, http.StatusNotFound, resp.status, "%s %s: %s", req.method, req.path, resp.body)
			}
			resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl", headers: headers})
			require.Equal(t, http.StatusOK, resp.status)
			require.Equal(t, float64(0), resp.json(t)["total_count"])
		})
	}
	read := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsRead}, time.Hour)}
	none := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeAuditRead}, time.Hour)}
	t.Run("ReadScopeReadsButCannotChange", func(t *testing.T) {
		require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ttlID, headers: read}).status)
		require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodGet, path: "/quota", headers: read}).status)
		for _, req := range []request{{method: http.MethodDelete, path: "/ttl/" + ttlID},
			{method: http.MethodPut, path: "/ttl/" + ttlID, body: map[string]any{"displayName": "x"}},
			{method: http.MethodPost, path: "/ttl", body: map[string]any{"datasetId": dsID}}} {
			req.headers = read
			requireRefusal(t, b.hygiene(t, req), http.StatusForbidden, "missing-scope", "scope")
		}
	})
	t.Run("NoScopeCannotRead", func(t *testing.T) {
		for _, path := range []string{"/ttl", "/ttl/" + ttlID, "/quota"} {
			requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: path, headers: none}), http.StatusForbidden, "missing-scope", "scope")
		}
	})
	t.Run("GatewayHeadersAreRequired", func(t *testing.T) {
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl", headers: map[string]string{"x-api-key": ""}})
		require.Equal(t, http.StatusForbidden, resp.status)
	})
}

func TestExpirationList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	names := []string{"alpha-events", "beta-events", "gamma-pilot"}
	var ids []string
	for i, name := range names {
		e := b.createExpiration(t, expirationOpts{datasetID: b.createDataset(t, datasetOpts{name: name}),
			expiry: fmt.Sprintf("2030-0%d-01", i+1), displayName: "rule " + name})
		ids = append(ids, e["ttlId"].(string))
	}
	require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + ids[2]}).status)
	list := func(t *testing.T, query string) (map[string]any, []string) {
		t.Helper()
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl?" + query})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		doc := resp.json(t)
		var got []string
		for _, r := range doc["results"].([]any) {
			got = append(got, r.(map[string]any)["ttlId"].(string))
		}
		return doc, got
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"All", "orderBy=expiry", ids},
		{"Descending", "orderBy=-expiry", []string{ids[2], ids[1], ids[0]}},
		{"ByDataset", "datasetName=ALPHA", ids[:1]},
		{"ByStatus", "status=pending&orderBy=expiry", ids[:2]},
		{"ByStatuses", "status=cancelled,pending&orderBy=expiry", ids},
		{"BySearch", "search=pilot", ids[2:]},
		{"BySearchOfAnID", "search=" + ids[1], ids[1:2]},
		{"ByAuthorLike", "author=LIKE%20%25tester%25&orderBy=expiry", ids},
		{"ByAuthorExact", "author=someone-else", nil},
		{"ByExpiryWindow", "expiryFromDate=2030-02-01&expiryToDate=2030-02-01", ids[1:2]},
		{"ByExpiryDate", "expiryDate=2030-03-01", ids[2:]},
		{"ByUpdatedWindow", "updatedFromDate=2026-11-23&updatedToDate=2026-11-23&orderBy=expiry", ids},
		{"UpdatedBeforeAnything", "updatedToDate=2026-11-22", nil},
		{"LikeCharactersAreLiteral", "datasetName=%25", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := list(t, tc.query)
			require.Equal(t, tc.want, got)
		})
	}
	t.Run("Pages", func(t *testing.T) {
		doc, got := list(t, "limit=2&page=1&orderBy=expiry")
		require.Equal(t, ids[2:], got)
		require.Equal(t, map[string]any{"current_page": float64(1), "total_pages": float64(2), "total_count": float64(3)},
			pick(doc, "current_page", "total_pages", "total_count"))
		doc, got = list(t, "")
		require.Len(t, got, 3)
		require.Equal(t, float64(1), doc["total_pages"])
	})
	for _, tc := range []struct{ name, query, field string }{
		{"LimitZero", "limit=0", "limit"}, {"LimitOver100", "limit=101", "limit"}, {"LimitHuge", "limit=99999999999999999999", "limit"},
		{"PageNegative", "page=-1", "page"}, {"StatusUnknown", "status=done", "status"}, {"OrderByUnknown", "orderBy=name", "orderBy"},
		{"BadDate", "expiryFromDate=tomorrow", "expiryFromDate"}, {"BadDatasetID", "datasetId=x", "datasetId"},
		{"SearchTooLong", "search=" + strings.Repeat("a", catalog.MaxExpirationSearch+1), "search"},
		{"NULInSearch", "search=a%00b", "search"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: "/ttl?" + tc.query}), http.StatusBadRequest,
				map[bool]string{true: "nul-character", false: "invalid-parameter"}[tc.name == "NULInSearch"], tc.field)
		})
	}
}

// TestListExpirationsNamesTheFirstRefusedParameter: a listing with several bad parameters is refused naming the
// first of the documented order, the same one on every request.
func TestListExpirationsNamesTheFirstRefusedParameter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("a", catalog.MaxExpirationSearch+1)
	for _, tc := range []struct{ name, query, field string }{
		{"EveryTextFilterTooLong", "search=" + long + "&author=" + long + "&description=" + long + "&displayName=" + long + "&datasetName=" + long, "datasetName"},
		{"LaterTextFiltersTooLong", "search=" + long + "&author=" + long + "&description=" + long, "description"},
		{"AuthorAndSearchTooLong", "search=" + long + "&author=" + long, "author"},
		{"LimitBeforeText", "search=" + long + "&limit=0", "limit"},
		{"TextBeforeStatus", "status=done&search=" + long, "search"},
		{"StatusBeforeDates", "updatedDate=x&expiryFromDate=x&orderBy=name&status=done", "status"},
		{"ExpiryBeforeUpdated", "updatedFromDate=x&expiryToDate=x", "expiryToDate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 {
				requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: "/ttl?" + tc.query}), http.StatusBadRequest,
					"invalid-parameter", tc.field)
			}
		})
	}
}

// TestHygieneRefusalsClipHugeValues: a refused parameter of 64 KiB is quoted back clipped, not whole.
func TestHygieneRefusalsClipHugeValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	huge := strings.Repeat("9", 64<<10)
	for _, tc := range []struct{ name, path, field string }{
		{"Limit", "/ttl?limit=" + huge, "limit"},
		{"ExpiryFromDate", "/ttl?expiryFromDate=" + huge, "expiryFromDate"},
		{"UpdatedDate", "/ttl?updatedDate=" + huge, "updatedDate"},
		{"Status", "/ttl?status=" + huge, "status"},
		{"OrderBy", "/ttl?orderBy=" + huge, "orderBy"},
		{"Include", "/ttl/SD-5b5712a5-bc53-4dfd-8ee6-4548373ba1e1?include=" + huge, "include"},
		{"ID", "/ttl/" + huge, "ID"},
		{"QuotaType", "/quota?quotaType=" + huge, "quotaType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := requireProblem(t, b.hygiene(t, request{method: http.MethodGet, path: tc.path}), http.StatusBadRequest, tc.field)
			require.Less(t, len(p.Detail), 400, "detail: %.200s", p.Detail)
		})
	}
}

func TestExpirationQuota(t *testing.T) {
	t.Parallel()
	b := setup(t)
	quota := func(t *testing.T) map[string]any {
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/quota?quotaType=datasetExpirationQuota"})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		quotas := resp.json(t)["quotas"].([]any)
		require.Len(t, quotas, 1)
		return quotas[0].(map[string]any)
	}
	require.Equal(t, map[string]any{"name": "datasetExpirationQuota", "consumed": float64(0), "quota": float64(testExpirationQuota)},
		pick(quota(t), "name", "consumed", "quota"))
	var first string
	for i := range testExpirationQuota {
		e := b.createExpiration(t, expirationOpts{})
		if i == 0 {
			first = e["ttlId"].(string)
		}
	}
	require.Equal(t, float64(testExpirationQuota), quota(t)["consumed"])
	// Another sandbox of the org counts against the same quota.
	resp := b.hygiene(t, request{method: http.MethodPost, path: "/ttl", headers: map[string]string{"x-sandbox-name": "dev"},
		body: map[string]any{"datasetId": b.createDataset(t, datasetOpts{headers: map[string]string{"x-sandbox-name": "dev"}}), "expiry": "2031-01-01", "displayName": "one more"}})
	p := requireRefusal(t, resp, http.StatusBadRequest, "expiration-quota-exceeded", "datasetId")
	require.Contains(t, p.Detail, strconv.Itoa(testExpirationQuota))

	require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + first}).status)
	require.Equal(t, float64(testExpirationQuota-1), quota(t)["consumed"], "a cancelled expiration frees its unit")
	t.Run("AnIdentityQuotaTypeListsOnlyItself", func(t *testing.T) {
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/quota?quotaType=dailyConsumerDeleteIdentitiesQuota"})
		require.Equal(t, http.StatusOK, resp.status)
		quotas := resp.json(t)["quotas"].([]any)
		require.Len(t, quotas, 1)
		require.Equal(t, "dailyConsumerDeleteIdentitiesQuota", quotas[0].(map[string]any)["name"])
	})
	t.Run("UnknownQuotaTypeIsRefused", func(t *testing.T) {
		requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: "/quota?quotaType=x"}), http.StatusBadRequest, "invalid-parameter", "quotaType")
	})
}

// TestRootTTLStaysTheCatalogRowTTLRoute: /ttl/{id} at the root (and under the Catalog's prefix) answers a dataset's
// row-TTL limits, never a dataset expiration.
func TestRootTTLStaysTheCatalogRowTTLRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.createExpiration(t, expirationOpts{})
	for _, prefix := range []string{"", "/data/foundation/catalog"} {
		resp := b.do(t, request{method: http.MethodGet, path: prefix + "/ttl/" + e["datasetId"].(string)})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Contains(t, resp.json(t), e["datasetId"], "keyed by dataset, as the Catalog answers")
		require.NotContains(t, resp.json(t), "ttlId")
		require.Equal(t, http.StatusBadRequest, b.do(t, request{method: http.MethodGet, path: prefix + "/ttl/" + e["ttlId"].(string)}).status)
	}
}
