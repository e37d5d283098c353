package httpapi_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/postgres"
)

// auditBundle is the API of setup with the Audit Query routes, and the audit service to write fixtures with.
type auditBundle struct {
	*testBundle
	audit *postgres.AuditService
}

func setupAudit(t *testing.T) *auditBundle {
	t.Helper()
	return setupAuditWith(t, func(*postgres.AuditService) {})
}

// setupAuditWith is setupAudit with the audit service configured by configure before the server starts.
func setupAuditWith(t *testing.T, configure func(*postgres.AuditService)) *auditBundle {
	t.Helper()
	b := &auditBundle{testBundle: setup(t)}
	b.audit = postgres.NewAuditService(b.db)
	// The tests' counts must not depend on the machine's speed: a count has a minute, where the service gives it
	// 25 ms and then falls back to the planner's estimate, which a slow or busy machine would reach. The test of that
	// fallback sets its own budget.
	b.audit.CountBudget = time.Minute
	configure(b.audit)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	b.api = httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(b.db), Rows: postgres.NewRowService(b.db, testChunkRows), Audit: b.audit,
		Auth: auth, Ready: b.db.Ready, Registry: prometheus.NewRegistry(),
		LongRequestsPerOrg: 1000, // as in setup
	})
	srv := httptest.NewServer(apitest.Handler(t, b.api))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// record appends ev, defaulting its tenancy to the bundle's org in prod and its other fields to an Update of a
// dataset, and returns it as written.
func (b *auditBundle) record(t *testing.T, ev audit.Event) *audit.Event {
	t.Helper()
	if ev.Org == "" {
		ev.Org = b.org
	}
	if ev.Sandbox == "" {
		ev.Sandbox = "prod"
	}
	for field, def := range map[*string]string{
		&ev.RequestID: "req-" + audit.NewID()[:8], &ev.AssetType: audit.AssetDataset, &ev.AssetID: "5c8c3c555033b814b69f947f",
		&ev.AssetName: "clicks", &ev.Action: audit.ActionUpdate, &ev.Status: audit.StatusSuccess, &ev.User: "tester@example.com",
		&ev.ClientID: "test-client",
	} {
		if *field == "" {
			*field = def
		}
	}
	require.NoError(t, b.audit.Record(context.Background(), &ev))
	return &ev
}

// eventsPage is a page of GET /audit/events as a client reads it.
type eventsPage struct {
	Embedded struct {
		Events []map[string]any `json:"events"`
	} `json:"_embedded"`
	Links map[string]struct {
		Href      string `json:"href"`
		Templated bool   `json:"templated"`
	} `json:"_links"`
	Page struct {
		Size                   int  `json:"size"`
		TotalElements          int  `json:"totalElements"`
		TotalPages             int  `json:"totalPages"`
		Number                 int  `json:"number"`
		TotalElementsCapped    bool `json:"totalElementsCapped"`
		TotalElementsEstimated bool `json:"totalElementsEstimated"`
	} `json:"page"`
	QueryID string `json:"queryId"`
}

func (p *eventsPage) ids() []string {
	out := make([]string, 0, len(p.Embedded.Events))
	for _, ev := range p.Embedded.Events {
		out = append(out, ev["id"].(string))
	}
	return out
}

// events calls GET path (with its query) and returns the page, requiring 200.
func (b *auditBundle) events(t *testing.T, path string, headers map[string]string) *eventsPage {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: path, headers: headers})
	require.Equal(t, http.StatusOK, resp.status, "%s: %s", path, resp.body)
	var p eventsPage
	require.NoError(t, json.Unmarshal(resp.body, &p))
	return &p
}

// query builds /audit/events?property=…&… from terms and extra parameters.
func query(terms []string, extra ...string) string {
	v := url.Values{}
	for _, term := range terms {
		v.Add("property", term)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return "/audit/events?" + v.Encode()
}

// fixture writes a varied log of the bundle's org: actions, asset types, assets, users, statuses and request ids
// spread over twelve minutes, newest last.
func (b *auditBundle) fixture(t *testing.T) []*audit.Event {
	t.Helper()
	base := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	actions := []string{audit.ActionCreate, audit.ActionUpdate, audit.ActionUpdate, audit.ActionExpire, audit.ActionDelete}
	var out []*audit.Event
	for i := range 12 {
		ev := audit.Event{
			Timestamp: base.Add(time.Duration(i) * time.Minute), Action: actions[i%len(actions)],
			AssetID:   []string{"aaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccc"}[i%3],
			AssetName: []string{"clicks", "views", "sessions"}[i%3], User: []string{"ann@example.com", "bob@example.com"}[i%2],
			RequestID: fmt.Sprintf("req-%02d", i/2), Details: map[string]any{"i": i},
		}
		if ev.Action == audit.ActionExpire {
			ev.User, ev.RequestID = "retention-service", "run:"+strconv.Itoa(i)
			if i == 8 {
				ev.Status = audit.StatusFailure
			}
		}
		if i == 11 {
			ev.AssetType, ev.AssetID, ev.AssetName = audit.AssetAuditLog, "audit-log", "audit log"
		}
		out = append(out, b.record(t, ev))
	}
	return out
}

// newestFirst returns the ids of the events that match keep, in the default order.
func newestFirst(events []*audit.Event, keep func(*audit.Event) bool) []string {
	var ids []string
	for i := len(events) - 1; i >= 0; i-- {
		if keep(events[i]) {
			ids = append(ids, events[i].ID)
		}
	}
	return ids
}

func TestAuditEventsFilters(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	events := b.fixture(t)
	at := func(i int) string { return events[i].Timestamp.Format(time.RFC3339) }
	is := func(field func(*audit.Event) string, values ...string) func(*audit.Event) bool {
		return func(e *audit.Event) bool { return slices.Contains(values, field(e)) }
	}
	action := func(e *audit.Event) string { return e.Action }
	status := func(e *audit.Event) string { return e.Status }
	all := func(*audit.Event) bool { return true }

	for _, tc := range []struct {
		name  string
		terms []string
		want  func(*audit.Event) bool
	}{
		{"ActionEquals", []string{"action==Update"}, is(action, "Update")},
		{"ActionAnyOfCaseInsensitive", []string{"action==create,update"}, is(action, "Create", "Update")},
		{"ActionRepeatedValue", []string{"action==Update,update,UPDATE"}, is(action, "Update")},
		{"ActionNotEquals", []string{"action!=Update"}, func(e *audit.Event) bool { return e.Action != "Update" }},
		{"ActionNoneOf", []string{"action!=Update,Expire"}, is(action, "Create", "Delete")},
		{"AssetType", []string{"assetType==Dataset"}, is(func(e *audit.Event) string { return e.AssetType }, "Dataset")},
		{"AssetTypeAuditLog", []string{"assetType==auditlog"}, is(func(e *audit.Event) string { return e.AssetType }, "AuditLog")},
		{"AssetID", []string{"assetId==bbbbbbbbbbbbbbbbbbbbbbbb"}, is(func(e *audit.Event) string { return e.AssetID }, "bbbbbbbbbbbbbbbbbbbbbbbb")},
		{"AssetName", []string{"assetName==sessions,views"}, is(func(e *audit.Event) string { return e.AssetName }, "sessions", "views")},
		{"User", []string{"user==bob@example.com"}, is(func(e *audit.Event) string { return e.User }, "bob@example.com")},
		{"StatusFailure", []string{"status==failure"}, is(status, "Failure")},
		{"StatusNotSuccess", []string{"status!=Success"}, is(status, "Failure")},
		{"RequestID", []string{"requestId==req-02"}, is(func(e *audit.Event) string { return e.RequestID }, "req-02")},
		{"TimestampAfter", []string{"timestamp>" + at(8)}, func(e *audit.Event) bool { return e.Timestamp.After(events[8].Timestamp) }},
		{"TimestampBefore", []string{"timestamp<" + at(3)}, func(e *audit.Event) bool { return e.Timestamp.Before(events[3].Timestamp) }},
		{"TimestampRange", []string{"timestamp>=" + at(3), "timestamp<=" + at(5)}, func(e *audit.Event) bool {
			return !e.Timestamp.Before(events[3].Timestamp) && !e.Timestamp.After(events[5].Timestamp)
		}},
		{"TimestampEquals", []string{"timestamp==" + at(4) + "," + at(6)}, func(e *audit.Event) bool {
			return e.Timestamp.Equal(events[4].Timestamp) || e.Timestamp.Equal(events[6].Timestamp)
		}},
		{"TimestampNotEquals", []string{"timestamp!=" + at(4)}, func(e *audit.Event) bool { return !e.Timestamp.Equal(events[4].Timestamp) }},
		{"TimestampInAdobeForm", []string{"timestamp>" + events[8].Timestamp.Format(audit.TimestampLayout)}, func(e *audit.Event) bool {
			return e.Timestamp.After(events[8].Timestamp)
		}},
		{"TypeCore", []string{"type==core"}, all},
		{"TypeEnhanced", []string{"type==Enhanced"}, func(*audit.Event) bool { return false }},
		{"TypeNotCore", []string{"type!=core"}, func(*audit.Event) bool { return false }},
		{"AllTermsMustHold", []string{"action==Update", "user==ann@example.com", "timestamp>" + at(1)}, func(e *audit.Event) bool {
			return e.Action == "Update" && e.User == "ann@example.com" && e.Timestamp.After(events[1].Timestamp)
		}},
		{"NoFilter", nil, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := newestFirst(events, tc.want)
			p := b.events(t, query(tc.terms), nil)
			got := p.ids()
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, got, "%v", tc.terms)
			require.Equal(t, len(want), p.Page.TotalElements)
			// The same filter under Adobe's base path.
			again := b.events(t, "/data/foundation"+query(tc.terms), nil)
			require.Equal(t, got, again.ids())
			// With small pages the total is counted, not read off the last page.
			small := b.events(t, query(tc.terms, "limit", "2"), nil)
			require.Equal(t, want[:min(2, len(want))], small.ids())
			require.Equal(t, len(want), small.Page.TotalElements)
			require.False(t, small.Page.TotalElementsEstimated)
		})
	}
}

func TestAuditEventsRefusals(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)

	refused := func(t *testing.T, path, field, mention string) {
		t.Helper()
		resp := b.do(t, request{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", path, resp.body)
		p := resp.problem(t)
		require.Equal(t, field, p.Field, path)
		require.Contains(t, p.Detail, mention, path)
	}

	t.Run("MalformedFilters", func(t *testing.T) {
		t.Parallel()
		for _, term := range []string{
			"action", "action=Update", "==Update", "action==", "action==Create,,Update", "action~Upd", "action>Update",
			"timestamp>last-week", "timestamp>2026-01-01", "timestamp<2026-01-01T00:00:00Z,2026-02-01T00:00:00Z", "type==other",
		} {
			refused(t, query([]string{"action==Update", term}), "property", term)
		}
	})

	t.Run("FieldsTheAPIDoesNotOffer", func(t *testing.T) {
		t.Parallel()
		for _, term := range []string{"imsOrgId==OTHER@AdobeOrg", "sandboxName==dev", "details==x", "seq>3"} {
			resp := b.do(t, request{method: http.MethodGet, path: query([]string{term})})
			require.Equal(t, http.StatusBadRequest, resp.status, term)
			p := resp.problem(t)
			require.Equal(t, "unknown-filter-field", p.Type)
			require.Contains(t, p.Detail, term)
		}
	})

	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		for _, v := range []string{"0", "1001", "-1", "ten"} {
			refused(t, "/audit/events?limit="+v, "limit", v)
		}
		for _, v := range []string{"-1", "x"} {
			refused(t, "/audit/events?start="+v, "start", v)
		}
		refused(t, "/audit/events?orderBy=-color", "orderBy", "color")
		refused(t, "/audit/events?queryId=bm9wZQ", "queryId", "bm9wZQ")
		refused(t, "/audit/events?queryId=bm9wZQ&property=action%3D%3DUpdate", "queryId", "queryId")
	})

	t.Run("ExportFormat", func(t *testing.T) {
		t.Parallel()
		refused(t, "/audit/export?format=xml", "format", "xml")
		refused(t, "/audit/export?property=color%3D%3Dred", "property", "color==red")
	})

	t.Run("NeedsAuditScope", func(t *testing.T) {
		t.Parallel()
		token := mintToken(t, b.org, []string{catalog.ScopeDatasetsManage}, time.Hour)
		for _, path := range []string{"/audit/events", "/audit/export", "/audit/verify", "/data/foundation/audit/events"} {
			resp := b.do(t, request{method: http.MethodGet, path: path, headers: map[string]string{"Authorization": "Bearer " + token}})
			require.Equal(t, http.StatusForbidden, resp.status, path)
			require.Equal(t, "missing-scope", resp.problem(t).Type)
		}
	})

	t.Run("NeedsGatewayHeaders", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/data/foundation/audit/events", headers: map[string]string{"x-api-key": ""}})
		require.Equal(t, http.StatusForbidden, resp.status)
		require.Contains(t, string(resp.body), "403000")
	})
}

func TestAuditEventsShape(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	id := b.createDataset(t, datasetOpts{name: "shaped"})
	resp := b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id, headers: map[string]string{"x-request-id": "trace-me"},
		body: map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P6M"}}}}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

	p := b.events(t, "/data/foundation/audit/events?property=action%3D%3DUpdate", nil)
	require.Len(t, p.Embedded.Events, 1)
	ev := p.Embedded.Events[0]
	require.Equal(t, "Update", ev["action"])
	require.Equal(t, "Dataset", ev["assetType"])
	require.Equal(t, id, ev["assetId"])
	require.Equal(t, "shaped", ev["assetName"])
	require.Equal(t, "Success", ev["status"])
	require.Equal(t, b.org, ev["imsOrgId"])
	require.Equal(t, "prod", ev["sandboxName"])
	require.Equal(t, "tester@example.com", ev["userEmail"])
	require.Equal(t, "trace-me", ev["requestId"])
	require.Equal(t, "Core", ev["eventType"])
	require.Equal(t, "1.0", ev["version"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+0000$`, ev["timestamp"])
	require.Regexp(t, `^[0-9a-f-]{36}$`, ev["id"])
	lake := ev["details"].(map[string]any)["rowExpiration"].(map[string]any)["adobe_lakeHouse"].(map[string]any)
	require.Equal(t, "P6M", lake["after"].(map[string]any)["ttlValue"], "details: %v", ev["details"])
	require.Contains(t, lake, "before")
	chain := ev["chain"].(map[string]any)
	require.Equal(t, float64(2), chain["seq"], "create is 1, the update 2")
	require.Len(t, chain["hash"], 64)

	require.Equal(t, 1, p.Page.TotalElements)
	require.Equal(t, 1, p.Page.TotalPages)
	require.Equal(t, 1, p.Page.Number)
	require.Equal(t, 50, p.Page.Size)
	require.False(t, p.Page.TotalElementsCapped)
	require.NotEmpty(t, p.QueryID)
	require.Contains(t, p.Links["self"].Href, "/data/foundation/audit/events?")
	require.Equal(t, "/data/foundation/audit/events?queryId="+p.QueryID+"&limit=50{&start}", p.Links["page"].Href)
	require.True(t, p.Links["page"].Templated)
	require.NotContains(t, p.Links, "next", "one page holds everything")

	// The queryId re-runs the query.
	again := b.events(t, "/audit/events?queryId="+p.QueryID, nil)
	require.Equal(t, p.ids(), again.ids())
}

func TestAuditEventsEmptyParametersAreAbsent(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	events := b.fixture(t)
	p := b.events(t, "/audit/events?property=&limit=50&start=&queryId=&orderBy=", nil)
	require.Equal(t, newestFirst(events, func(*audit.Event) bool { return true }), p.ids())
	p = b.events(t, "/audit/events?property=&property=action%3D%3DDelete", nil)
	require.Len(t, p.ids(), 2)
}

func TestAuditEventsPaging(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	base := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	var all []*audit.Event
	for i := range 23 {
		// Pairs share a timestamp, so the tie-breaker has to keep pages apart.
		all = append(all, b.record(t, audit.Event{Timestamp: base.Add(time.Duration(i/2) * time.Second), Details: map[string]any{"i": i}}))
	}
	b.record(t, audit.Event{Action: audit.ActionCreate, Timestamp: base})

	for _, order := range []string{"-timestamp", "+timestamp", "assetName,-timestamp"} {
		t.Run("ToTheEnd"+strings.NewReplacer("+", "Asc", "-", "Desc", ",", "").Replace(order), func(t *testing.T) {
			t.Parallel()
			path := query([]string{"action==Update"}, "limit", "5", "orderBy", order)
			var seen []string
			var timestamps []time.Time
			for n := 1; ; n++ {
				p := b.events(t, path, nil)
				require.Equal(t, 23, p.Page.TotalElements)
				require.Equal(t, 5, p.Page.TotalPages)
				require.Equal(t, n, p.Page.Number)
				require.LessOrEqual(t, len(p.Embedded.Events), 5)
				seen = append(seen, p.ids()...)
				for _, ev := range p.Embedded.Events {
					ts, err := time.Parse(audit.TimestampLayout, ev["timestamp"].(string))
					require.NoError(t, err)
					timestamps = append(timestamps, ts)
				}
				next, ok := p.Links["next"]
				if !ok {
					require.Equal(t, 5, n, "the fifth page is the last")
					break
				}
				require.Contains(t, next.Href, "queryId="+p.QueryID)
				path = next.Href
			}
			require.Len(t, seen, 23)
			want := make([]string, 0, len(all))
			for _, ev := range all {
				want = append(want, ev.ID)
			}
			require.ElementsMatch(t, want, seen, "every event once")
			sorted := slices.IsSortedFunc(timestamps, func(a, c time.Time) int { return c.Compare(a) })
			if order == "+timestamp" {
				sorted = slices.IsSortedFunc(timestamps, func(a, c time.Time) int { return a.Compare(c) })
			}
			require.True(t, sorted, "pages follow %s", order)
		})
	}

	t.Run("StartPastTheEnd", func(t *testing.T) {
		t.Parallel()
		p := b.events(t, "/audit/events?start=500", nil)
		require.Empty(t, p.Embedded.Events)
		require.Equal(t, 24, p.Page.TotalElements)
		require.NotContains(t, p.Links, "next")
	})

	t.Run("StartNeedNotBeAMultipleOfLimit", func(t *testing.T) {
		t.Parallel()
		first := b.events(t, "/audit/events?limit=10", nil).ids()
		p := b.events(t, "/audit/events?limit=4&start=3", nil)
		require.Equal(t, first[3:7], p.ids())
	})
}

// insertLog writes n events of the bundle's org in prod directly, a second apart back from the bundle's start time,
// with seq 1…n: a large log for counting and streaming, whose chain does not matter.
func (b *auditBundle) insertLog(t *testing.T, n int) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `
INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name, action,
                          status, user_id, client_id, details, seq, prev_hash, hash)
SELECT gen_random_uuid(), $1, 'prod', $2::timestamptz - g * interval '1 second', 'r', 'Dataset', 'a', 'n', 'Update',
       'Success', 'u', 'c', jsonb_build_object('g', g, 'pad', repeat('x', 200)), g, '', ''
FROM generate_series(1, $3::int) g`, b.org, b.now, n)
	require.NoError(t, err)
}

func TestAuditEventsTotal(t *testing.T) {
	t.Parallel()

	t.Run("CappedPastTenThousand", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		b.insertLog(t, 10_050)
		p := b.events(t, "/audit/events?limit=1000", nil)
		require.Len(t, p.Embedded.Events, 1000)
		require.Equal(t, audit.TotalCap, p.Page.TotalElements)
		require.True(t, p.Page.TotalElementsCapped)
		require.False(t, p.Page.TotalElementsEstimated)
		require.Equal(t, 10, p.Page.TotalPages)
		last := b.events(t, "/audit/events?limit=1000&start=10000", nil)
		require.Len(t, last.Embedded.Events, 50, "the events past the cap are still there to page to")
		require.NotContains(t, last.Links, "next")
		require.Equal(t, 10_050, last.Page.TotalElements, "the last page knows the exact total")
		require.False(t, last.Page.TotalElementsCapped)
		small := b.events(t, "/audit/events?property=timestamp%3E"+url.QueryEscape(b.now.Add(-11*time.Second).Format(time.RFC3339)), nil)
		require.Equal(t, 10, small.Page.TotalElements)
		require.False(t, small.Page.TotalElementsCapped)
	})

	t.Run("EstimatedWhenCountingTakesTooLong", func(t *testing.T) {
		t.Parallel()
		b := setupAuditWith(t, func(s *postgres.AuditService) { s.CountBudget = time.Millisecond })
		b.insertLog(t, 10_050)
		_, err := b.db.Pool.Exec(context.Background(), `ANALYZE audit_events`)
		require.NoError(t, err)
		p := b.events(t, "/audit/events?property=status%21%3DFailure&property=user%21%3Dnobody", nil)
		require.Len(t, p.Embedded.Events, 50)
		require.True(t, p.Page.TotalElementsEstimated, "page: %+v", p.Page)
		require.Positive(t, p.Page.TotalElements)
		require.Contains(t, p.Links, "next")
	})
}

func TestAuditTenancy(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	mine := b.record(t, audit.Event{})
	dev := b.record(t, audit.Event{Sandbox: "dev"})
	otherOrg := newOrg()
	theirs := b.record(t, audit.Event{Org: otherOrg})
	otherHeaders := map[string]string{"Authorization": "Bearer " + mintToken(t, otherOrg, allScopes, time.Hour), "x-gw-ims-org-id": otherOrg}

	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    *audit.Event
	}{
		{"DefaultSandbox", nil, mine},
		{"NamedSandbox", map[string]string{"x-sandbox-name": "dev"}, dev},
		{"OtherOrg", otherHeaders, theirs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"/audit/events", "/audit/events?property=assetId%3D%3D" + mine.AssetID} {
				require.Equal(t, []string{tc.want.ID}, b.events(t, path, tc.headers).ids(), path)
			}
			for _, format := range []string{"csv", "json"} {
				exported := b.export(t, "/audit/export?format="+format, tc.headers)
				require.Len(t, exported, 1, format)
				require.Equal(t, tc.want.ID, exported[0]["id"], format)
			}
		})
	}

	t.Run("ForeignQueryIDRunsInTheCallersScope", func(t *testing.T) {
		t.Parallel()
		p := b.events(t, "/audit/events?property=user%3D%3Dtester%40example.com", otherHeaders)
		require.Equal(t, []string{theirs.ID}, b.events(t, "/audit/events?queryId="+p.QueryID, otherHeaders).ids())
		require.Equal(t, []string{mine.ID}, b.events(t, "/audit/events?queryId="+p.QueryID, nil).ids())
	})

	t.Run("UnscopedSandboxSeesNothing", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, b.events(t, "/audit/events", map[string]string{"x-sandbox-name": "staging"}).Embedded.Events)
	})
}

// export calls GET path and decodes the export, CSV or JSON as the response says, into one map per event with the
// fields as strings (details as their JSON text).
func (b *auditBundle) export(t *testing.T, path string, headers map[string]string) []map[string]string {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: path, headers: headers})
	require.Equal(t, http.StatusOK, resp.status, "%s: %s", path, resp.body)
	require.Contains(t, resp.header.Get("Content-Disposition"), "attachment")
	var out []map[string]string
	if strings.HasPrefix(resp.header.Get("Content-Type"), "text/csv") {
		records, err := csv.NewReader(bytes.NewReader(resp.body)).ReadAll()
		require.NoError(t, err)
		require.NotEmpty(t, records, "a CSV export has a header row")
		header := records[0]
		require.Equal(t, []string{"id", "timestamp", "imsOrgId", "sandboxName", "requestId", "assetType", "assetId", "assetName",
			"action", "status", "userEmail", "clientId", "details", "seq", "prevHash", "hash"}, header)
		for _, rec := range records[1:] {
			m := map[string]string{}
			for i, name := range header {
				m[name] = rec[i]
			}
			out = append(out, m)
		}
		return out
	}
	require.True(t, strings.HasPrefix(resp.header.Get("Content-Type"), "application/json"), resp.header.Get("Content-Type"))
	var docs []map[string]any
	require.NoError(t, json.Unmarshal(resp.body, &docs))
	for _, d := range docs {
		out = append(out, flatten(t, d))
	}
	return out
}

// flatten turns an event document into the CSV columns' form.
func flatten(t *testing.T, d map[string]any) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range []string{"id", "timestamp", "imsOrgId", "sandboxName", "requestId", "assetType", "assetId", "assetName",
		"action", "status", "userEmail", "clientId"} {
		m[k], _ = d[k].(string)
	}
	details, err := json.Marshal(d["details"])
	require.NoError(t, err)
	m["details"] = string(details)
	chain := d["chain"].(map[string]any)
	m["seq"] = strconv.FormatFloat(chain["seq"].(float64), 'f', -1, 64)
	m["prevHash"], m["hash"] = chain["prevHash"].(string), chain["hash"].(string)
	return m
}

func TestAuditExport(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	events := b.fixture(t)
	// Older than the export's 365 days, so left out of exports while queries still show it.
	ancient := b.record(t, audit.Event{Timestamp: b.now.AddDate(-1, 0, -2)})

	// pagedQuery reads every page of a query through the events API, in the CSV columns' form.
	pagedQuery := func(t *testing.T, terms []string, order string) []map[string]string {
		t.Helper()
		var out []map[string]string
		path := query(terms, "limit", "4", "orderBy", order)
		for {
			p := b.events(t, path, nil)
			for _, ev := range p.Embedded.Events {
				out = append(out, flatten(t, ev))
			}
			next, ok := p.Links["next"]
			if !ok {
				return out
			}
			path = next.Href
		}
	}
	exportPath := func(format string, terms []string, order string) string {
		v := url.Values{"format": {format}, "orderBy": {order}}
		for _, term := range terms {
			v.Add("property", term)
		}
		return "/audit/export?" + v.Encode()
	}

	for _, tc := range []struct {
		name  string
		terms []string
		order string
	}{
		{"Everything", nil, "-timestamp"},
		{"Filtered", []string{"action==update,expire", "timestamp>" + events[2].Timestamp.Format(time.RFC3339)}, "-timestamp"},
		{"Ascending", []string{"user!=bob@example.com"}, "+timestamp"},
	} {
		t.Run(tc.name+"EqualsTheQuery", func(t *testing.T) {
			t.Parallel()
			want := slices.DeleteFunc(pagedQuery(t, tc.terms, tc.order), func(m map[string]string) bool { return m["id"] == ancient.ID })
			require.NotEmpty(t, want)
			for _, format := range []string{"csv", "json"} {
				got := b.export(t, exportPath(format, tc.terms, tc.order), nil)
				require.Equal(t, want, got, format)
			}
		})
	}

	t.Run("DefaultsToCSV", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/data/foundation/audit/export", headers: map[string]string{"Accept": "application/octet-stream"}})
		require.Equal(t, http.StatusOK, resp.status)
		require.Equal(t, "text/csv; charset=utf-8", resp.header.Get("Content-Type"))
		require.Equal(t, len(events)+1, strings.Count(string(resp.body), "\n"), "a header row and one row per event")
	})

	t.Run("EmptyExport", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, b.export(t, "/audit/export?format=json&property=assetName%3D%3Dnone", nil))
		resp := b.do(t, request{method: http.MethodGet, path: "/audit/export?property=assetName%3D%3Dnone"})
		require.Equal(t, "id,timestamp,imsOrgId,sandboxName,requestId,assetType,assetId,assetName,action,status,userEmail,clientId,details,seq,prevHash,hash\n", string(resp.body))
	})

	t.Run("LargerThanTheBuffer", func(t *testing.T) {
		t.Parallel()
		big := setupAudit(t)
		big.insertLog(t, 3000)
		for _, format := range []string{"csv", "json"} {
			got := big.export(t, "/audit/export?format="+format, nil)
			require.Len(t, got, 3000, format)
			require.Equal(t, "1", got[0]["seq"], "newest first: %s", format)
			require.Equal(t, "3000", got[2999]["seq"], format)
		}
	})
}

func TestAuditVerify(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	events := b.fixture(t)
	dev := b.record(t, audit.Event{Sandbox: "dev"})

	verify := func(t *testing.T, path string) map[string]any {
		t.Helper()
		resp := b.do(t, request{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		return resp.json(t)
	}
	v := verify(t, "/audit/verify")
	require.Equal(t, true, v["valid"])
	require.Equal(t, float64(len(events)), v["events"], "the chain is the org's, the answer prod's: dev's event is walked, not counted")
	require.Nil(t, v["firstBroken"])
	require.Equal(t, events[len(events)-1].Hash, v["head"].(map[string]any)["hash"], "prod's newest event")
	require.NotEqual(t, dev.Hash, v["head"].(map[string]any)["hash"])

	// A superuser edits one event, with the triggers off; the walk stops at exactly that event.
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE audit_events SET status = 'Success' WHERE id = $1`, events[8].ID)
		return err
	}))
	v = verify(t, "/data/foundation/audit/verify")
	require.Equal(t, false, v["valid"])
	broken := v["firstBroken"].(map[string]any)
	require.Equal(t, float64(events[8].Seq), broken["seq"])
	require.Equal(t, events[8].ID, broken["id"])
	require.Equal(t, audit.BreakHash, broken["reason"])
	require.Equal(t, float64(len(events)), v["events"])
}
