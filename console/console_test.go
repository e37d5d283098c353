package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/console"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/demo"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

const testSecret = "console-test-secret-of-at-least-32-bytes"

// bundle is a real retentiond API, the console included, on its own database holding `make run`'s demo data.
type bundle struct {
	url      string
	db       *postgres.DB
	datasets *postgres.DatasetService
	org      string
	ids      map[string]string // demo dataset ids by name
	runGate  *gatedSweep
}

// gatedSweep is the real sweep, whose runs wait until the gate opens (open is closed), so that a test sees a run
// under way before it ends.
type gatedSweep struct {
	jobs.Sweeper
	open chan struct{}
}

// RunPart waits for the gate, then does the run's own part.
func (g *gatedSweep) RunPart(ctx context.Context, plan *catalog.Plan) (catalog.RunPart, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return catalog.RunPart{}, ctx.Err()
	}
	return g.Sweeper.RunPart(ctx, plan)
}

// testNow is the service's clock in the tests: the demo rows span the two years before it.
var testNow = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func setup(t *testing.T) *bundle {
	t.Helper()
	db := testdb.NewDB(t)
	var clock atomic.Int64
	clock.Store(testNow.UnixMilli())
	db.Now = func() time.Time { return time.UnixMilli(clock.Add(1)).UTC() }
	datasets := postgres.NewDatasetService(db)
	loaded, err := demo.Load(context.Background(), datasets, db)
	require.NoError(t, err)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	// The jobs work, as in retentiond: a run started in the browser is carried out for real, once the runs part
	// has seen it under way and opens the gate.
	sweep, err := postgres.NewSweeper(db, postgres.SweepConfig{}, nil)
	require.NoError(t, err)
	gate := &gatedSweep{Sweeper: sweep, open: make(chan struct{})}
	runs, _ := testdb.Jobs(t, db, testdb.JobsOptions{Work: true, Sweeper: gate})
	next := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	preview := postgres.NewPreviewService(db, retention.Period{})
	lakeRuns, err := jobs.ParseSchedule("0 3 * * 0")
	require.NoError(t, err)
	api := httpapi.New(httpapi.Config{
		Datasets: datasets, Rows: postgres.NewRowService(db, 0), Runs: runs,
		Preview: preview, Explain: preview, Audit: postgres.NewAuditService(db),
		NextRun: func(catalog.Store) *time.Time { return &next },
		RunAt: func(store catalog.Store, from time.Time) *time.Time {
			return jobs.Schedules{catalog.LakeHouse: lakeRuns}.NextRun(store, from.Add(-time.Nanosecond))
		},
		Schedules: map[catalog.Store]string{catalog.LakeHouse: "0 3 * * 0", catalog.Profile: "0 4 * * *"},
		Holds:     datasets, Expirations: postgres.NewExpirationService(db, 20),
		WorkOrders: postgres.NewWorkOrderService(db, postgres.WorkOrderLimits{}),
		Auth:       auth, Ready: db.Ready, Registry: prometheus.NewRegistry(), TranslateError: postgres.TranslateError,
		LongRequestsPerOrg: 100,
	})
	// The browser's calls go through the API's contract checks too: the console uses the API as documented.
	srv := httptest.NewServer(apitest.Handler(t, api))
	t.Cleanup(srv.Close)
	b := &bundle{url: srv.URL, db: db, datasets: datasets, org: demo.Orgs[0], ids: map[string]string{}, runGate: gate}
	for _, ds := range loaded {
		b.ids[ds.Name] = ds.ID
	}
	return b
}

// token mints a token of the demo org with the scopes given.
func (b *bundle) token(t *testing.T, scopes ...string) string {
	t.Helper()
	return tokenOf(t, b.org, scopes...)
}

// tokenOf mints a token of org with the scopes given.
func tokenOf(t *testing.T, org string, scopes ...string) string {
	t.Helper()
	token, err := httpapi.MintToken(testSecret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "steward@acme.example", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, ClientID: "console-test", Scope: strings.Join(scopes, " "),
	})
	require.NoError(t, err)
	return token
}

var allScopes = []string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeAuditRead, catalog.ScopeRetentionRun}

// reply is an answer read whole.
type reply struct {
	StatusCode int
	Header     http.Header
}

// get fetches a console path without a browser.
func get(t *testing.T, url string, header map[string]string) (reply, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header}, string(body)
}

func TestAssetsAreServedWithTheirHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(console.Handler("/ui/"))
	t.Cleanup(srv.Close)

	t.Run("IndexAtThePrefix", func(t *testing.T) {
		t.Parallel()
		resp, body := get(t, srv.URL+"/ui/", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Contains(t, body, `<script type="module" src="app.js"></script>`)
		require.Equal(t, console.SecurityPolicy, resp.Header.Get("Content-Security-Policy"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		require.NotContains(t, console.SecurityPolicy, "unsafe-inline")
	})

	t.Run("ModulesAreJavaScript", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"app.js", "datasets.js", "retention.js", "format.js"} {
			resp, _ := get(t, srv.URL+"/ui/"+name, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, name)
			require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"), name)
		}
		resp, _ := get(t, srv.URL+"/ui/style.css", nil)
		require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	})

	t.Run("RevalidatedByETag", func(t *testing.T) {
		t.Parallel()
		resp, _ := get(t, srv.URL+"/ui/app.js", nil)
		etag := resp.Header.Get("ETag")
		require.NotEmpty(t, etag)
		resp, body := get(t, srv.URL+"/ui/app.js", map[string]string{"If-None-Match": etag})
		require.Equal(t, http.StatusNotModified, resp.StatusCode)
		require.Empty(t, body)
	})

	t.Run("UnknownIs404", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/ui/nope.js", "/ui/../console.go", "/ui/assets/app.js"} {
			resp, _ := get(t, srv.URL+path, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		}
	})
}

// testServedByTheAPI: retentiond serves the console at /ui/, without a token, with its headers.
func testServedByTheAPI(t *testing.T, b *bundle) {
	resp, _ := get(t, b.url+"/ui", nil)
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/ui/", resp.Header.Get("Location"))
	resp, body := get(t, b.url+"/ui/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "no token needed for the files: %s", body)
	require.Equal(t, console.SecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	resp, _ = get(t, b.url+"/ui/retention.js", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	head, err := http.NewRequestWithContext(context.Background(), http.MethodHead, b.url+"/ui/", nil)
	require.NoError(t, err)
	headResp, err := http.DefaultClient.Do(head)
	require.NoError(t, err)
	headResp.Body.Close()
	require.Equal(t, http.StatusOK, headResp.StatusCode, "curl -I works")
	require.Equal(t, "text/html; charset=utf-8", headResp.Header.Get("Content-Type"))
	// Browsers ask every site for /favicon.ico: it is the console's icon, not a refusal.
	resp, _ = get(t, b.url+"/favicon.ico", nil)
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/ui/favicon.svg", resp.Header.Get("Location"))
	resp, _ = get(t, b.url+"/ui/favicon.svg", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "image/svg+xml", resp.Header.Get("Content-Type"))
}
