package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/testwait"
)

// workOrderBody is a POST /workorder body erasing the e-mails from the dataset (or ALL).
func workOrderBody(datasetID string, emails ...string) map[string]any {
	ids := make([]any, len(emails))
	for i, e := range emails {
		ids[i] = e
	}
	return map[string]any{"action": "delete_identity", "datasetId": datasetID, "displayName": fmt.Sprintf("erase %d people", len(emails)),
		"description": "a person's request", "namespacesIdentities": []any{map[string]any{"namespace": map[string]any{"code": "email"}, "IDs": ids}}}
}

// createWorkOrder posts an order through the Data Hygiene API and returns its document.
func (b *testBundle) createWorkOrder(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	resp := b.hygiene(t, request{method: http.MethodPost, path: "/workorder", body: body})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	return resp.json(t)
}

// requireWorkOrderError checks a work-order refusal: status, problem type, field, and Adobe's error_code and
// message, the body validated against Adobe's ErrorResponse schema where Adobe's spec lists the status.
func (b *testBundle) requireWorkOrderError(t *testing.T, req request, status int, typ, field string) {
	t.Helper()
	resp := b.hygiene(t, req)
	p := requireRefusal(t, resp, status, typ, field)
	var adobe struct {
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(resp.body, &adobe))
	require.Equal(t, strconv.Itoa(status)+"001", adobe.ErrorCode)
	require.Equal(t, p.Detail, adobe.Message)
	router, err := hygieneSpec()
	require.NoError(t, err)
	httpReq, err := http.NewRequestWithContext(context.Background(), req.method, "http://localhost/data/core/hygiene"+req.path, nil)
	require.NoError(t, err)
	route, params, err := router.FindRoute(httpReq)
	require.NoError(t, err)
	if route.Operation.Responses.Status(status) == nil {
		return // Adobe's spec gives no body for this status of this route
	}
	header := resp.header.Clone()
	header.Set("Content-Type", "application/json") // Adobe's spec names application/json; the body is the same
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: httpReq, PathParams: params, Route: route},
		Status:                 status, Header: header, Body: io.NopCloser(bytes.NewReader(resp.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), input), "%s", resp.body)
}

func TestWorkOrderLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "loyalty"})
	created := b.createWorkOrder(t, workOrderBody(id, "Alice@Example.com", "alice@example.com", "bob@example.com"))
	woID, _ := created["workorderId"].(string)
	require.True(t, catalog.IsWorkOrderID(woID), "workorderId %q", woID)
	require.Equal(t, map[string]any{"action": "identity-delete", "status": "received", "datasetId": id, "datasetName": "loyalty",
		"operationCount": float64(2), "orgId": b.org, "createdBy": "tester@example.com", "displayName": "erase 3 people"},
		pick(created, "action", "status", "datasetId", "datasetName", "operationCount", "orgId", "createdBy", "displayName"),
		"the two spellings of Alice's e-mail are one identity")
	require.Len(t, created["productStatusDetails"], 2)

	for _, prefix := range []string{"", "/data/core/hygiene"} {
		resp := b.do(t, request{method: http.MethodGet, path: prefix + "/workorder/" + woID})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Equal(t, woID, resp.json(t)["workorderId"])
	}
	resp := b.hygiene(t, request{method: http.MethodPut, path: "/workorder/" + woID, body: map[string]any{"name": "Erase Alice", "description": "ticket 12"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, "Erase Alice", resp.json(t)["displayName"])
	require.Equal(t, "ticket 12", resp.json(t)["description"])

	all := b.createWorkOrder(t, workOrderBody("ALL", "carol@example.com"))
	require.Equal(t, "ALL", all["datasetId"])
	list := b.hygiene(t, request{method: http.MethodGet, path: "/workorder?limit=1&orderBy=-createdAt"})
	require.Equal(t, http.StatusOK, list.status, "body: %s", list.body)
	doc := list.json(t)
	require.Equal(t, float64(2), doc["total"])
	require.Equal(t, float64(1), doc["count"])
	require.Equal(t, all["workorderId"], doc["results"].([]any)[0].(map[string]any)["workorderId"])
	require.Contains(t, doc["_links"], "next")

	t.Run("Filters", func(t *testing.T) {
		for query, want := range map[string]float64{"status=received": 2, "status=completed": 0, "search=Alice": 1,
			"search=" + woID: 1, "author=tester@example.com": 2, "author=LIKE%20other%25": 0, "displayName=erase%20alice": 1,
			"filterDate=" + b.now.Format(time.DateOnly): 2, "fromDate=2020-01-01&toDate=2020-01-02": 0, "type=identity-delete": 2} {
			resp := b.hygiene(t, request{method: http.MethodGet, path: "/workorder?" + query})
			require.Equal(t, http.StatusOK, resp.status, "%s: %s", query, resp.body)
			require.Equal(t, want, resp.json(t)["total"], query)
		}
	})
	t.Run("QuotaCountsAcceptedIdentities", func(t *testing.T) {
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/quota?quotaType=" + catalog.QuotaDailyIdentities})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		q := resp.json(t)["quotas"].([]any)
		require.Len(t, q, 1)
		require.Equal(t, map[string]any{"name": catalog.QuotaDailyIdentities, "consumed": float64(3), "quota": float64(20)},
			pick(q[0].(map[string]any), "name", "consumed", "quota"))
		resp = b.hygiene(t, request{method: http.MethodGet, path: "/quota"})
		require.Len(t, resp.json(t)["quotas"], 3)
	})
}

func TestWorkOrderRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	good := func(change func(map[string]any)) map[string]any {
		body := workOrderBody(id, "a@example.com")
		change(body)
		return body
	}
	for _, c := range []struct {
		name   string
		body   any
		status int
		typ    string
		field  string
	}{
		{"UnknownAction", good(func(m map[string]any) { m["action"] = "delete_dataset" }), 400, "invalid-action", "action"},
		{"BadDataset", good(func(m map[string]any) { m["datasetId"] = "all" }), 400, "invalid-dataset-id", "datasetId"},
		{"MissingDataset", good(func(m map[string]any) { m["datasetId"] = strings.Repeat("a", 24) }), 404, "not-found", ""},
		{"NoIdentities", good(func(m map[string]any) { m["namespacesIdentities"] = []any{} }), 400, "invalid-field", "namespacesIdentities"},
		{"BadNamespace", good(func(m map[string]any) {
			m["namespacesIdentities"] = []any{map[string]any{"namespace": map[string]any{"code": "e mail"}, "IDs": []any{"x"}}}
		}), 400, "invalid-identity", "namespacesIdentities[0].IDs[0]"},
		{"EmptyValue", good(func(m map[string]any) {
			m["namespacesIdentities"] = []any{map[string]any{"namespace": map[string]any{"code": "email"}, "IDs": []any{""}}}
		}), 400, "invalid-identity", "namespacesIdentities[0].IDs[0]"},
		{"UnknownField", good(func(m map[string]any) { m["ttl"] = 1 }), 400, "unknown-field", "ttl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b.requireWorkOrderError(t, request{method: http.MethodPost, path: "/workorder", body: c.body}, c.status, c.typ, c.field)
		})
	}
	t.Run("TooManyIdentities", func(t *testing.T) {
		ids := make([]string, catalog.MaxWorkOrderIdentities+1)
		for i := range ids {
			ids[i] = fmt.Sprintf("p%d@example.com", i)
		}
		b.requireWorkOrderError(t, request{method: http.MethodPost, path: "/workorder", body: workOrderBody(id, ids...)},
			http.StatusBadRequest, "too-many-identities", "namespacesIdentities")
	})
	t.Run("NotAnOrderID", func(t *testing.T) {
		b.requireWorkOrderError(t, request{method: http.MethodGet, path: "/workorder/BN-1"}, http.StatusBadRequest, "invalid-workorder-id", "WORKORDER_ID")
	})
	t.Run("MissingOrder", func(t *testing.T) {
		b.requireWorkOrderError(t, request{method: http.MethodGet, path: "/workorder/" + catalog.NewWorkOrderID()}, http.StatusNotFound, "not-found", "")
	})
	t.Run("BadListing", func(t *testing.T) {
		for query, field := range map[string]string{"status=done": "status", "orderBy=size": "orderBy", "limit=101": "limit",
			"fromDate=2026-01-01": "fromDate", "type=dataset-delete": "type"} {
			b.requireWorkOrderError(t, request{method: http.MethodGet, path: "/workorder?" + query}, http.StatusBadRequest, "invalid-parameter", field)
		}
	})
}

func TestWorkOrderBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	t.Run("DailyQuota", func(t *testing.T) {
		ids := make([]string, testWorkOrderLimits.DailyQuota+1)
		for i := range ids {
			ids[i] = fmt.Sprintf("q%d@example.com", i)
		}
		b.requireWorkOrderError(t, request{method: http.MethodPost, path: "/workorder", body: workOrderBody(id, ids...)},
			http.StatusBadRequest, "quota-exceeded", "namespacesIdentities")
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/quota?quotaType=" + catalog.QuotaDailyIdentities})
		require.Equal(t, float64(0), resp.json(t)["quotas"].([]any)[0].(map[string]any)["consumed"], "a refused order consumes nothing")
	})
	t.Run("OrdersInFlight", func(t *testing.T) {
		for i := range testWorkOrderLimits.InFlight {
			b.createWorkOrder(t, workOrderBody(id, fmt.Sprintf("f%d@example.com", i)))
		}
		resp := b.hygiene(t, request{method: http.MethodPost, path: "/workorder", body: workOrderBody(id, "late@example.com")})
		requireRefusal(t, resp, http.StatusTooManyRequests, "too-many-workorders", "datasetId")
	})
}

func TestWorkOrderTenancyAndScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	wo := b.createWorkOrder(t, workOrderBody(id, "a@example.com"))
	woID := wo["workorderId"].(string)
	other := newOrg()
	otherOrg := map[string]string{"x-gw-ims-org-id": other, "Authorization": "Bearer " + mintToken(t, other, allScopes, time.Hour)}
	otherSandbox := map[string]string{"x-sandbox-name": "dev"}
	for name, headers := range map[string]map[string]string{"AnotherOrg": otherOrg, "AnotherSandbox": otherSandbox} {
		t.Run(name, func(t *testing.T) {
			for _, req := range []request{{method: http.MethodGet, path: "/workorder/" + woID},
				{method: http.MethodPut, path: "/workorder/" + woID, body: map[string]any{"name": "mine"}},
				{method: http.MethodPost, path: "/workorder", body: workOrderBody(id, "a@example.com")}} {
				req.headers = headers
				resp := b.hygiene(t, req)
				require.Equal(t, http.StatusNotFound, resp.status, "%s %s: %s", req.method, req.path, resp.body)
			}
			resp := b.hygiene(t, request{method: http.MethodGet, path: "/workorder", headers: headers})
			require.Equal(t, float64(0), resp.json(t)["total"])
		})
	}
	manage := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsManage,
		catalog.ScopeRetentionHold, catalog.ScopeRetentionRun, catalog.ScopeAuditRead}, time.Hour)}
	t.Run("NoOtherScopeImpliesCreating", func(t *testing.T) {
		require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodGet, path: "/workorder/" + woID, headers: manage}).status)
		for _, req := range []request{{method: http.MethodPost, path: "/workorder", body: workOrderBody(id, "a@example.com")},
			{method: http.MethodPut, path: "/workorder/" + woID, body: map[string]any{"name": "x"}}} {
			req.headers = manage
			requireRefusal(t, b.hygiene(t, req), http.StatusForbidden, "missing-scope", "scope")
		}
	})
}

// TestWorkOrderPreview: the preview of an order counts the rows of its identities per dataset and store, creates
// nothing, takes the scope that creates orders, refuses what POST /workorder refuses, and sees only the caller's
// sandbox.
func TestWorkOrderPreview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "people"})
	ts := b.now.Add(-time.Hour).UTC().Format(time.RFC3339)
	b.ingest(t, id, fmt.Sprintf(`{"timestamp":%q,"identityMap":{"email":[{"id":"alice@example.com"}]}}
{"timestamp":%q,"identityMap":{"email":[{"id":"ALICE@example.com"}]}}
{"timestamp":%q,"identityMap":{"email":[{"id":"bob@example.com"}]}}`, ts, ts, ts))
	preview := func(headers map[string]string, body any) *response {
		return b.do(t, request{method: http.MethodPost, path: "/data/core/hygiene/workorder/preview", body: body, headers: headers})
	}

	resp := preview(nil, workOrderBody("ALL", "Alice@Example.com"))
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc := resp.json(t)
	require.Equal(t, map[string]any{"datasetId": "ALL", "identityCount": float64(1), "datasetCount": float64(1), "rowCount": float64(2)},
		pick(doc, "datasetId", "identityCount", "datasetCount", "rowCount"))
	require.Equal(t, []any{map[string]any{"datasetId": id, "datasetName": "people", "rowCount": float64(2),
		"stores": map[string]any{"adobe_lakeHouse": float64(2), "adobe_unifiedProfile": float64(0)}}}, doc["datasets"])
	list := b.hygiene(t, request{method: http.MethodGet, path: "/workorder"})
	require.Equal(t, float64(0), list.json(t)["total"], "a preview creates no order")

	t.Run("RefusesWhatCreatingRefuses", func(t *testing.T) {
		body := workOrderBody(id, "a@example.com")
		body["action"] = "delete_dataset"
		requireRefusal(t, preview(nil, body), http.StatusBadRequest, "invalid-action", "action")
	})
	t.Run("TakesTheCreatingScope", func(t *testing.T) {
		read := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage}, time.Hour)}
		requireRefusal(t, preview(read, workOrderBody("ALL", "alice@example.com")), http.StatusForbidden, "missing-scope", "scope")
	})
	t.Run("AnotherOrg", func(t *testing.T) {
		other := newOrg()
		headers := map[string]string{"x-gw-ims-org-id": other, "Authorization": "Bearer " + mintToken(t, other, allScopes, time.Hour)}
		require.Equal(t, http.StatusNotFound, preview(headers, workOrderBody(id, "alice@example.com")).status)
		resp := preview(headers, workOrderBody("ALL", "alice@example.com"))
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Equal(t, float64(0), resp.json(t)["rowCount"], "another org counts none of this org's rows")
	})
}

// workOrderRefusals reads the service's count of POST /workorder requests refused before their body was read (0
// before the first) and the bytes of refused orders' bodies it decoded.
func (b *testBundle) workOrderRefusals(t *testing.T) (unread, refusedBytes float64) {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/metrics"})
	require.Equal(t, http.StatusOK, resp.status)
	for line := range strings.Lines(string(resp.body)) {
		if v, ok := strings.CutPrefix(line, `retention_workorder_creates_total{outcome="refused_unread"} `); ok {
			var err error
			unread, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
		}
		if v, ok := strings.CutPrefix(line, "retention_workorder_refused_body_bytes_total "); ok {
			var err error
			refusedBytes, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
		}
	}
	return unread, refusedBytes
}

// TestWorkOrderRefusedBeforeItsBodyIsRead: an order that no body could get accepted (the org's orders in flight at
// their bound, a quota used up), or that comes while another of the org's orders is being read, is refused before
// its body is decoded: a body that is not even JSON gets the bound's refusal, not malformed-json, and the service
// counts it unread.
func TestWorkOrderRefusedBeforeItsBodyIsRead(t *testing.T) {
	t.Parallel()
	const notJSON = `{"namespacesIdentities": [ this is not JSON`
	t.Run("OrdersInFlight", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range testWorkOrderLimits.InFlight {
			b.createWorkOrder(t, workOrderBody("ALL", fmt.Sprintf("f%d@example.com", i)))
		}
		b.requireWorkOrderError(t, request{method: http.MethodPost, path: "/workorder", body: notJSON},
			http.StatusTooManyRequests, "too-many-workorders", "datasetId")
		unread, refusedBytes := b.workOrderRefusals(t)
		require.Equal(t, float64(1), unread)
		require.Zero(t, refusedBytes)
	})
	t.Run("QuotaUsedUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := make([]string, testWorkOrderLimits.DailyQuota)
		for i := range ids {
			ids[i] = fmt.Sprintf("q%d@example.com", i)
		}
		b.createWorkOrder(t, workOrderBody("ALL", ids...))
		b.requireWorkOrderError(t, request{method: http.MethodPost, path: "/workorder", body: notJSON},
			http.StatusBadRequest, "quota-exceeded", "namespacesIdentities")
		unread, refusedBytes := b.workOrderRefusals(t)
		require.Equal(t, float64(1), unread)
		require.Zero(t, refusedBytes)
	})
}

// heldBody is a work-order request the test sends over a connection of its own, its headers and the first half of
// its body written straight to the socket: the server has them whatever a client's buffers would do, and reads on
// until the test sends the rest or closes the connection.
type heldBody struct {
	conn net.Conn
	rest []byte
}

// holdWorkOrderBody sends the headers and half the body of a POST to path (under /data/core/hygiene) for b's org,
// and returns once the server reads it holding the org's work-order body slot.
func (b *testBundle) holdWorkOrderBody(t *testing.T, path string, body map[string]any) *heldBody {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	u, err := url.Parse(b.url)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	half := len(raw) / 2
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST %s%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nx-api-key: test-key\r\n"+
		"x-gw-ims-org-id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		"/data/core/hygiene", path, u.Host, b.token, b.org, len(raw))
	head.Write(raw[:half])
	_, err = conn.Write(head.Bytes())
	require.NoError(t, err)
	testwait.For(t, time.Minute, func() (bool, string) {
		n := b.api.WorkOrderReadsOf(b.org)
		return n == 1, fmt.Sprintf("%d bodies of the org being read", n)
	})
	return &heldBody{conn: conn, rest: raw[half:]}
}

// finish sends the rest of the body and returns the server's answer.
func (h *heldBody) finish(t *testing.T) *response {
	t.Helper()
	// Only a hung server meets this deadline: it turns a hang into a failure.
	require.NoError(t, h.conn.SetDeadline(time.Now().Add(time.Minute)))
	_, err := h.conn.Write(h.rest)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// TestWorkOrderBodiesOfAnOrgAreReadOneAtATime: while a server reads one work-order body of an org, an order's or a
// preview's, the org's next body to either route is refused at once with 429 too-many-workorder-reads and
// Retry-After, undecoded; another org's bodies are read meanwhile; once the first body has been answered, or its
// client has left in the middle of it, the org's next bodies are read.
func TestWorkOrderBodiesOfAnOrgAreReadOneAtATime(t *testing.T) {
	t.Parallel()
	const notJSON, hygiene = `{"namespacesIdentities": [ this is not JSON`, "/data/core/hygiene"
	routes := map[string]string{"Order": "/workorder", "Preview": "/workorder/preview"}
	for heldName, held := range routes {
		for _, clientLeaves := range []bool{false, true} {
			name := heldName + "Answered"
			if clientLeaves {
				name = heldName + "ClientLeft"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// The first body waits while the test sends other requests: on a loaded machine, the server's bound
				// on a body's idle reads (30 s in tests) must not be what ends it.
				b := setupWith(t, func(c *httpapi.Config) { c.ReadTimeout = time.Hour })
				first := b.holdWorkOrderBody(t, held, workOrderBody("ALL", "first@example.com"))
				unread, refusedBytes := b.workOrderRefusals(t)

				b.requireWorkOrderError(t, request{method: http.MethodPost, path: "/workorder", body: notJSON},
					http.StatusTooManyRequests, "too-many-workorder-reads", "")
				resp := b.do(t, request{method: http.MethodPost, path: hygiene + "/workorder/preview", body: notJSON})
				requireRefusal(t, resp, http.StatusTooManyRequests, "too-many-workorder-reads", "")
				require.Equal(t, "1", resp.header.Get("Retry-After"))
				unreadAfter, refusedBytesAfter := b.workOrderRefusals(t)
				require.Equal(t, unread+1, unreadAfter, "the refused order is counted unread")
				require.Equal(t, refusedBytes, refusedBytesAfter, "no refused body was decoded")

				other := newOrg()
				headers := map[string]string{"Authorization": "Bearer " + mintToken(t, other, allScopes, time.Hour), "x-gw-ims-org-id": other}
				for _, path := range []string{"/workorder", "/workorder/preview"} {
					resp := b.do(t, request{method: http.MethodPost, path: hygiene + path, body: workOrderBody("ALL", "a@example.com"), headers: headers})
					require.Equal(t, http.StatusOK, resp.status, "another org's %s is read meanwhile: %s", path, resp.body)
				}
				require.Equal(t, 1, b.api.WorkOrderReadsOf(b.org), "the first body is still being read")

				if clientLeaves {
					require.NoError(t, first.conn.Close())
				} else {
					resp := first.finish(t)
					require.Equal(t, http.StatusOK, resp.status, "the first body is answered: %s", resp.body)
				}
				testwait.For(t, time.Minute, func() (bool, string) {
					n := b.api.WorkOrderReadsOf(b.org)
					return n == 0, fmt.Sprintf("%d bodies of the org being read", n)
				})
				b.createWorkOrder(t, workOrderBody("ALL", "next@example.com"))
				resp = b.do(t, request{method: http.MethodPost, path: hygiene + "/workorder/preview", body: workOrderBody("ALL", "next@example.com")})
				require.Equal(t, http.StatusOK, resp.status, "the org's next preview is read: %s", resp.body)
			})
		}
	}
}
