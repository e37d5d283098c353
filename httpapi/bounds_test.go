package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// setupBounds is setup with the audit routes too: the bounds hold on every route that takes a query.
func setupBounds(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	runs, _ := testdb.Jobs(t, b.db, testdb.JobsOptions{})
	b.api = httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(b.db), Holds: postgres.NewDatasetService(b.db), Rows: postgres.NewRowService(b.db, testChunkRows),
		Runs: runs, Preview: postgres.NewPreviewService(b.db, retention.Period{}), Audit: postgres.NewAuditService(b.db),
		Expirations: postgres.NewExpirationService(b.db, testExpirationQuota), Auth: auth, Ready: b.db.Ready,
		Registry: prometheus.NewRegistry(), TranslateError: postgres.TranslateError, LongRequestsPerOrg: 1000,
	})
	srv := httptest.NewServer(apitest.Handler(t, b.api))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// terms is n comma-separated copies of term.
func terms(term string, n int) string {
	return strings.TrimSuffix(strings.Repeat(term+",", n), ",")
}

// Issue 28, finding 2: each tags term was an EXISTS with three bind parameters, so 21,845 terms (or 65,534 name:*
// terms) answered 500 and 20,000 took 1.4 s each. Every list filter now takes at most httpapi.MaxParameterTerms
// terms and a query string at most httpapi.MaxQueryBytes; past either, a 400 names the parameter.
func TestListFiltersAreBounded(t *testing.T) {
	t.Parallel()
	b := setupBounds(t)
	id := b.createDataset(t, datasetOpts{})
	most := httpapi.MaxParameterTerms
	over := strings.Repeat("x", httpapi.MaxQueryBytes)
	repeated := func(name, value string, n int) string {
		return strings.TrimSuffix(strings.Repeat(name+"="+url.QueryEscape(value)+"&", n), "&")
	}
	for _, tc := range []struct {
		name, path, field string
	}{
		{"Tags21845", "/dataSets?tags=" + terms("a:b", 21845), "tags"},
		{"TagsWildcard65534", "/dataSets?tags=" + terms("a:*", 65534), "tags"},
		{"TagsOneTooMany", "/dataSets?tags=" + terms("a:b", most+1), "tags"},
		{"NameOneTooMany", "/dataSets?name=" + terms("n", most+1), "name"},
		{"NotNameOneTooMany", "/dataSets?name=!" + terms("n", most+1), "name"},
		{"PropertyRepeated", "/dataSets?" + repeated("property", "holds.active>0", most+1), "property"},
		{"PropertiesOneTooMany", "/dataSets?properties=" + terms("name", most+1), "properties"},
		{"OrderByOneTooMany", "/dataSets?orderBy=" + terms("name", most+1), "orderBy"},
		{"QueryTooLong", "/dataSets?limit=5&name=" + over, "name"},
		{"AuditPropertyRepeated", "/audit/events?" + repeated("property", "action==Create", most+1), "property"},
		{"AuditPropertyValues", "/audit/events?property=user==" + terms("u", most+1), "property"},
		{"HygieneStatus", "/data/core/hygiene/ttl?status=" + terms("pending", most+1), "status"},
		{"HygieneOrderBy", "/data/core/hygiene/ttl?orderBy=" + terms("-expiry", most+1), "orderBy"},
		{"RowsQueryTooLong", "/dataSets/" + id + "/rows?cursor=" + over, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(t, request{method: http.MethodGet, path: tc.path})
			requireProblem(t, resp, http.StatusBadRequest, tc.field)
			require.Less(t, len(resp.body), 1024, "the refusal is short: %.300s", resp.body)
		})
	}
	t.Run("AtTheBound", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{
			"/dataSets?tags=" + terms("a:b", most),
			"/dataSets?tags=" + terms("a:*", most),
			"/dataSets?name=" + terms("n", most) + "&orderBy=" + terms("name", most) + "&properties=" + terms("name", most),
			"/dataSets?" + repeated("property", "holds.active>0", most),
			"/audit/events?property=user==" + terms("u", most),
		} {
			resp := b.do(t, request{method: http.MethodGet, path: path})
			require.Equal(t, http.StatusOK, resp.status, "%.200s: %s", path, resp.body)
		}
	})
}

// Issue 28, finding 14: GET /dataSets?orderBy=<600 KB> answered a 600 KB 400. Each refused value is now clipped
// (catalog.Clip) where it is quoted, and a query past httpapi.MaxQueryBytes is refused without quoting it at all:
// each answer is short and names the parameter.
func TestRefusedValuesAreEchoedClipped(t *testing.T) {
	t.Parallel()
	b := setupBounds(t)
	id := b.createDataset(t, datasetOpts{})
	rows := "/dataSets/" + id + "/rows?"
	for _, size := range []struct {
		name string
		n    int
	}{{"4KB", 4 << 10}, {"600KB", 600 << 10}} {
		long := strings.Repeat("z", size.n)
		for _, tc := range []struct {
			name, path, field string
		}{
			{"DatasetsLimit", "/dataSets?limit=" + long, "limit"},
			{"DatasetsStart", "/dataSets?start=" + long, "start"},
			{"DatasetsOrderBy", "/dataSets?orderBy=" + long, "orderBy"},
			{"DatasetsTags", "/dataSets?tags=" + long, "tags"},
			{"DatasetsProperty", "/dataSets?property=" + long, "property"},
			{"DatasetID", "/dataSets/" + long, "id"},
			{"RowsStore", rows + "store=" + long, "store"},
			{"RowsLimit", rows + "limit=" + long, "limit"},
			{"RowsStart", rows + "start=" + long, "start"},
			{"RowsIncludeExpired", rows + "includeExpired=" + long, "includeExpired"},
			{"RowsCursor", rows + "cursor=" + long, "cursor"},
			{"RunsLimit", "/retention/runs?limit=" + long, "limit"},
			{"RunsStart", "/retention/runs?start=" + long, "start"},
			{"PreviewStore", "/ttl/" + id + "/preview?store=" + long, "store"},
			{"AuditLimit", "/audit/events?limit=" + long, "limit"},
			{"AuditStart", "/audit/events?start=" + long, "start"},
			{"AuditProperty", "/audit/events?property=" + long, "property"},
			{"AuditPropertyValue", "/audit/events?property=timestamp>" + long, "property"},
			{"AuditOrderBy", "/audit/events?orderBy=" + long, "orderBy"},
			{"AuditQueryID", "/audit/events?queryId=" + long, "queryId"},
			{"AuditExportFormat", "/audit/export?format=" + long, "format"},
			{"HygieneStatus", "/data/core/hygiene/ttl?status=" + long, "status"},
		} {
			t.Run(size.name+tc.name, func(t *testing.T) {
				t.Parallel()
				resp := b.do(t, request{method: http.MethodGet, path: tc.path})
				requireProblem(t, resp, http.StatusBadRequest, tc.field)
				require.Less(t, len(resp.body), 1024, "the refusal is short: %.300s", resp.body)
			})
		}
	}
}

// blockingDatasets is a dataset service whose listings wait until release is closed, after telling started.
type blockingDatasets struct {
	catalog.DatasetService
	started chan struct{}
	release chan struct{}
}

func (d blockingDatasets) FindDatasets(ctx context.Context, _ *catalog.Caller, _ catalog.DatasetFilter) ([]*catalog.Dataset, error) {
	d.started <- struct{}{}
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	return nil, nil
}

// Issue 28, finding 2's cost: an org's listings in flight are capped per replica, as its long requests are, so one
// org's listings cannot occupy what every org shares; past the cap a listing is refused at once with 429
// too-many-listings, and another org's listing is served.
func TestListingsOfAnOrgAreCapped(t *testing.T) {
	t.Parallel()
	ds := blockingDatasets{started: make(chan struct{}), release: make(chan struct{})}
	b := setupStub(t, httpapi.Config{Datasets: ds, LongRequestsPerOrg: 2})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets"})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		})
		<-ds.started
	}
	refused := make(chan *response, 1)
	go func() { refused <- b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=a:*"}) }()
	var resp *response
	select {
	case resp = <-refused:
	case <-ds.started:
		close(ds.release)
		t.Fatal("a third listing of the org reached the database past its cap of 2")
	}
	require.Equal(t, http.StatusTooManyRequests, resp.status, "body: %s", resp.body)
	require.Equal(t, "too-many-listings", resp.problem(t).Type)
	require.Equal(t, "1", resp.header.Get("Retry-After"))

	other := &testBundle{url: b.url, org: newOrg()}
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	done := make(chan *response)
	go func() { done <- other.do(t, request{method: http.MethodGet, path: "/dataSets"}) }()
	<-ds.started
	close(ds.release)
	require.Equal(t, http.StatusOK, (<-done).status, "another org's listing is served")
	wg.Wait()
}
