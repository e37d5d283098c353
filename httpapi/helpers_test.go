package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

const testSecret = "test-secret-of-at-least-thirty-two-bytes!"

var allScopes = []string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeAuditRead, catalog.ScopeRetentionRun,
	catalog.ScopeRetentionHold, catalog.ScopeWorkOrdersManage}

// testBundle is a running API on its own database, with an org of its own.
type testBundle struct {
	url   string
	db    *postgres.DB
	org   string
	token string
	now   time.Time // the clock's start; every reading is later
	api   *httpapi.Server

	clock  *atomic.Int64 // epoch ms of the last clock reading
	chunks chan int      // rows of each committed ingestion chunk
}

// testNextRun is when the test server says the next scheduled run is due.
var testNextRun = time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)

// testLakeGrace is the lake's ingestion grace in the explanations of rows (GET …/rows/{rowId}/expiry).
var testLakeGrace = retention.Period{Days: 30}

// testSchedules are the stores' schedules as GET /retention/schedule shows them (Config.Schedules), which the
// explanation of a row takes its nextRunAt from.
func testSchedules(t testing.TB) scheduleTimes {
	t.Helper()
	out := scheduleTimes{}
	for store, spec := range map[catalog.Store]string{catalog.LakeHouse: "0 3 * * 0", catalog.Profile: "0 4 * * *"} {
		s, err := jobs.ParseSchedule(spec)
		require.NoError(t, err)
		out[store] = s
	}
	return out
}

// scheduleTimes answers Config.RunAt from the stores' schedules.
type scheduleTimes jobs.Schedules

// RunAt returns the store's first slot at or after from.
func (s scheduleTimes) RunAt(store catalog.Store, from time.Time) *time.Time {
	return jobs.Schedules(s).NextRun(store, from.Add(-time.Nanosecond))
}

// testExpirationQuota is the org's quota of pending dataset expirations in the tests: small, so reaching it is cheap.
const testExpirationQuota = 5

// testWorkOrderLimits are the work-order bounds of the tests: small, so reaching them is cheap.
var testWorkOrderLimits = postgres.WorkOrderLimits{DailyQuota: 20, MonthlyQuota: 30, InFlight: 3}

// testChunkRows is the ingestion chunk size of the tests: small, so streaming shows with few rows.
const testChunkRows = 50

// setNow moves the service's clock: its next reading is t.
func (b *testBundle) setNow(t time.Time) { b.clock.Store(t.UnixMilli() - 1) }

func setup(t testing.TB) *testBundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with configure, when not nil, changing the server's Config before the server is made.
func setupWith(t testing.TB, configure func(*httpapi.Config)) *testBundle {
	t.Helper()
	db := testdb.NewDB(t)
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	b := &testBundle{db: db, org: newOrg(), now: now, clock: &atomic.Int64{}, chunks: make(chan int, 100)}
	b.clock.Store(now.UnixMilli())
	// Each reading of the clock is a millisecond after the last, so that the order of creation is the order of
	// times; setNow moves it.
	db.Now = func() time.Time { return time.UnixMilli(b.clock.Add(1)).UTC() }
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	// Runs are only queued here; the jobs package's tests run them.
	runs, _ := testdb.Jobs(t, db, testdb.JobsOptions{})
	cfg := httpapi.Config{
		Datasets: postgres.NewDatasetService(db), Holds: postgres.NewDatasetService(db), Rows: postgres.NewRowService(db, testChunkRows), Runs: runs, Auth: auth,
		Preview: postgres.NewPreviewService(db, retention.Period{}), Expirations: postgres.NewExpirationService(db, testExpirationQuota),
		Manifests:  postgres.NewManifestService(db),
		WorkOrders: postgres.NewWorkOrderService(db, testWorkOrderLimits),
		NextRun:    func(catalog.Store) *time.Time { t := testNextRun; return &t },
		Explain:    postgres.NewPreviewService(db, testLakeGrace),
		RunAt:      testSchedules(t).RunAt,
		Schedules:  map[catalog.Store]string{catalog.LakeHouse: "0 3 * * 0", catalog.Profile: "0 4 * * *"},
		Ready:      db.Ready, Registry: prometheus.NewRegistry(), TranslateError: postgres.TranslateError,
		OrgMovedAway: db.OrgMovedAway,
		// Parallel subtests send many long requests of one org at once; the per-org limit has tests of its own.
		LongRequestsPerOrg: 1000,
		ChunkCommitted: func(n int) {
			select {
			case b.chunks <- n:
			default:
			}
		},
	}
	if configure != nil {
		configure(&cfg)
	}
	b.api = httpapi.New(cfg)
	srv := httptest.NewServer(apitest.Handler(t, b.api))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	b.token = mintToken(t, b.org, allScopes, time.Hour)
	return b
}

func newOrg() string {
	return strings.ToUpper(strings.ReplaceAll(uuid.NewString(), "-", "")[:24]) + "@AdobeOrg"
}

func mintToken(t testing.TB, org string, scopes []string, ttl time.Duration) string {
	t.Helper()
	token, err := httpapi.MintToken(testSecret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "tester@example.com", ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl))},
		Org:              org, ClientID: "test-client", Scope: strings.Join(scopes, " "),
	})
	require.NoError(t, err)
	return token
}

// request describes one call; zero fields get the bundle's defaults.
type request struct {
	method  string
	path    string
	body    any               // marshalled as JSON unless it is a string or []byte, sent as is
	headers map[string]string // set, overriding defaults; an empty value removes the header
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

func (r *response) problem(t testing.TB) httpapi.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "body: %s", r.body)
	var p httpapi.Problem
	require.NoError(t, json.Unmarshal(r.body, &p))
	return p
}

func (b *testBundle) do(t testing.TB, req request) *response {
	t.Helper()
	var body io.Reader
	contentType := ""
	switch v := req.body.(type) {
	case nil:
	case string:
		body, contentType = strings.NewReader(v), "application/json"
	case []byte:
		body, contentType = bytes.NewReader(v), "application/json"
	default:
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		body, contentType = bytes.NewReader(raw), "application/json"
	}
	httpReq, err := http.NewRequestWithContext(context.Background(), req.method, b.url+req.path, body)
	require.NoError(t, err)
	httpReq.Header.Set("Authorization", "Bearer "+b.token)
	httpReq.Header.Set("x-api-key", "test-key")
	httpReq.Header.Set("x-gw-ims-org-id", b.org)
	if contentType != "" {
		httpReq.Header.Set("Content-Type", contentType)
	}
	for k, v := range req.headers {
		if v == "" {
			httpReq.Header.Del(k)
			continue
		}
		httpReq.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(httpReq)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// datasetOpts configures createDataset; zero fields get defaults.
type datasetOpts struct {
	name      string
	managedBy string
	behavior  string
	tags      map[string][]string
	headers   map[string]string
}

// createDataset creates a dataset through the API and returns its id.
func (b *testBundle) createDataset(t testing.TB, opts datasetOpts) string {
	t.Helper()
	if opts.name == "" {
		opts.name = "ds-" + uuid.NewString()[:8]
	}
	body := map[string]any{"name": opts.name}
	classification := map[string]any{}
	if opts.managedBy != "" {
		classification["managedBy"] = opts.managedBy
	}
	if opts.behavior != "" {
		classification["dataBehavior"] = opts.behavior
	}
	if len(classification) > 0 {
		body["classification"] = classification
	}
	if opts.tags != nil {
		body["tags"] = opts.tags
	}
	resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: body, headers: opts.headers})
	require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	var refs []string
	require.NoError(t, json.Unmarshal(resp.body, &refs))
	require.Len(t, refs, 1)
	return strings.TrimPrefix(refs[0], "@/dataSets/")
}

// getDataset returns the dataset document and its ETag.
func (b *testBundle) getDataset(t testing.TB, id string) (map[string]any, string) {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc, ok := resp.json(t)[id].(map[string]any)
	require.True(t, ok, "body: %s", resp.body)
	return doc, resp.header.Get("ETag")
}

// auditCount counts the audit events of the bundle's org about asset id.
func (b *testBundle) auditCount(t testing.TB, id string) int {
	t.Helper()
	var n int
	err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE org_id = $1 AND asset_id = $2`, b.org, id).Scan(&n)
	require.NoError(t, err)
	return n
}

// rowExpiration returns the rowExpiration object of a store in a dataset document.
func rowExpiration(t testing.TB, doc map[string]any, store string) map[string]any {
	t.Helper()
	ext, _ := doc["extensions"].(map[string]any)
	storeDoc, _ := ext[store].(map[string]any)
	re, ok := storeDoc["rowExpiration"].(map[string]any)
	require.True(t, ok, "no rowExpiration for %s in %v", store, doc)
	return re
}

// settled returns a dataset document without the metrics' asOf, which is the time of the read itself: what a
// rejected change must leave equal is everything else.
func settled(doc map[string]any) map[string]any {
	if ext, ok := doc["extensions"].(map[string]any); ok {
		for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
			if s, ok := ext[store].(map[string]any); ok {
				if m, ok := s["metrics"].(map[string]any); ok {
					delete(m, "asOf")
				}
			}
		}
	}
	return doc
}

// streamIngest posts an NDJSON body written through the returned pipe; the answer arrives on the channel.
func (b *testBundle) streamIngest(t *testing.T, id string) (*io.PipeWriter, <-chan *response) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan *response, 1)
	go func() {
		defer pr.Close() // unblocks writes the server will never read
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, b.url+"/dataSets/"+id+"/rows", pr)
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+b.token)
		req.Header.Set("x-api-key", "k")
		req.Header.Set("x-gw-ims-org-id", b.org)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- &response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		done <- &response{status: resp.StatusCode, header: resp.Header, body: body}
	}()
	return pw, done
}
