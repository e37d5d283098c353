package console_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// scaleSandbox holds the 10,000 datasets of testTenThousandDatasets, apart from the demo's.
const scaleSandbox = "scale"

// scaleDatasets is how many datasets the scale part lists.
const scaleDatasets = 10_000

// cloneDatasets creates n datasets in the template's sandbox by copying the template's rows of datasets,
// row_expirations and ttl_settings in SQL (names scale-00001 on, ids from md5): a few hundred milliseconds, where n
// calls of the API would take minutes. They have no Create audit events, which no part of the test reads.
func cloneDatasets(t *testing.T, b *bundle, template string, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, sql := range []string{
		`CREATE TEMP TABLE clone_ids ON COMMIT DROP AS
		 SELECT g, substr(md5('console-scale-' || g), 1, 24) AS id FROM generate_series(1, ` + strconv.Itoa(n) + `) g`,
		`CREATE TEMP TABLE clone_datasets ON COMMIT DROP AS
		 SELECT d.*, c.id AS new_id, c.g FROM datasets d CROSS JOIN clone_ids c WHERE d.id = '` + template + `'`,
		`UPDATE clone_datasets SET id = new_id, name = format('scale-%s', lpad(g::text, 5, '0'))`,
		`ALTER TABLE clone_datasets DROP COLUMN new_id, DROP COLUMN g`,
		`INSERT INTO datasets SELECT * FROM clone_datasets`,
		`CREATE TEMP TABLE clone_expirations ON COMMIT DROP AS
		 SELECT r.*, c.id AS new_id FROM row_expirations r CROSS JOIN clone_ids c WHERE r.dataset_id = '` + template + `'`,
		`UPDATE clone_expirations SET dataset_id = new_id`,
		`ALTER TABLE clone_expirations DROP COLUMN new_id`,
		`INSERT INTO row_expirations SELECT * FROM clone_expirations`,
		`INSERT INTO ttl_settings (dataset_id, store, ttl, effective_from)
		 SELECT c.id, s.store, s.ttl, s.effective_from FROM ttl_settings s CROSS JOIN clone_ids c
		 WHERE s.dataset_id = '` + template + `' AND s.effective_until IS NULL`,
		`ANALYZE datasets`,
	} {
		_, err := tx.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	require.NoError(t, tx.Commit(ctx))
}

// scaleRows gives the template 2,000 rows, expiring on 2031-06-01 in a partition of their own, and each clone
// scale-g a counter of 1 + (g·7919 mod 97) rows in that partition, so that ordering by storage estimates 10,000
// datasets over a real partition, as with real data: the template stores the most, scale-00097 (one row) the least.
// The clones' counters stand for rows that are not there, which only this sandbox's listings read.
func scaleRows(t *testing.T, b *bundle, c *catalog.Caller, template string) {
	t.Helper()
	ctx := context.Background()
	expiry := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)
	payload := []byte(`{"page":"/products/` + strings.Repeat("x", 160) + `"}`)
	rows := func(yield func(catalog.RowInput) bool) {
		for i := range 2000 {
			in := catalog.RowInput{ID: fmt.Sprintf("scale-%d", i), Timestamp: testNow.Add(-time.Hour), OwnExpiry: &expiry,
				Payload: payload, PayloadSize: len(payload)}
			if !yield(in) {
				return
			}
		}
	}
	res, err := postgres.NewRowService(b.db, 0).IngestRows(ctx, c, template, rows, catalog.IngestOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 2000, res.Accepted, "%+v", res.Errors)
	_, err = b.db.Pool.Exec(ctx, `
INSERT INTO row_stats (partition_name, dataset_id, setting_id, row_count, max_ingested_at, min_ingested_at, min_ts)
SELECT st.partition_name, d.id, s.id, 1 + (substr(d.name, 7)::int * 7919) % 97, st.max_ingested_at, st.min_ingested_at, st.min_ts
FROM row_stats st
CROSS JOIN datasets d
JOIN ttl_settings s ON s.dataset_id = d.id AND s.store = 'adobe_lakeHouse' AND s.effective_until IS NULL
WHERE st.dataset_id = $1 AND d.org_id = $2 AND d.sandbox_name = $3 AND d.id <> $1`, template, c.Org, c.Sandbox)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `ANALYZE row_stats`)
	require.NoError(t, err)
}

// shown reads the inventory's measures of the page last drawn: its request and drawing, and the time since the
// document's navigation began.
func shown(ctx context.Context, t *testing.T) (loaded, sinceNavigation time.Duration) {
	t.Helper()
	ms := func(attr string) time.Duration {
		v, err := strconv.Atoi(eval[string](ctx, t, `document.querySelector('#main').dataset.`+attr))
		require.NoError(t, err)
		return time.Duration(v) * time.Millisecond
	}
	return ms("loadedMs"), ms("shownMs")
}

// apiTime is how long the API took to answer the page's last GET /dataSets: from the request sent to the answer's
// first byte, as the browser's resource timing has it.
func apiTime(ctx context.Context, t *testing.T) time.Duration {
	t.Helper()
	ms := eval[float64](ctx, t, `(() => { const r = performance.getEntriesByType('resource').filter(e => e.name.includes('/dataSets?')).pop();
		return r ? r.responseStart - r.requestStart : -1; })()`)
	return (time.Duration(ms*1000) * time.Microsecond).Round(time.Millisecond)
}

// pageFetches is what the browser fetched of GET /dataSets since its resource timings were last cleared: the
// requests' URLs and the bytes of their answers, decoded.
func pageFetches(ctx context.Context, t *testing.T) (urls []string, bytes int) {
	t.Helper()
	got := eval[map[string]any](ctx, t, `(() => { const rs = performance.getEntriesByType('resource').filter(e => e.name.includes('/dataSets?'));
		return { urls: rs.map(e => e.name), bytes: rs.reduce((n, e) => n + e.decodedBodySize, 0) }; })()`)
	for _, u := range got["urls"].([]any) {
		urls = append(urls, u.(string))
	}
	return urls, int(got["bytes"].(float64))
}

// pageBytesBound is the most a page of the inventory may fetch: 26 datasets (a page and one to know there is a next)
// come to about 30 KB here, while a page that read every one of the 10,000 would fetch megabytes.
const pageBytesBound = 512 << 10

// requireOnePage checks the work behind the page last shown: one GET /dataSets of a page and one dataset more,
// answered in less than pageBytesBound.
func requireOnePage(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	urls, bytes := pageFetches(ctx, t)
	require.Len(t, urls, 1, "%s: GET /dataSets sent once", what)
	require.Contains(t, urls[0], "limit=26", what)
	require.Less(t, bytes, pageBytesBound, "%s: the page's answer", what)
	run(ctx, t, chromedp.Evaluate[chromedp.Void](`performance.clearResourceTimings()`))
}

// testTenThousandDatasets measures the inventory over 10,000 datasets in the browser and logs the figures
// (docs/console.md quotes them; the target is a first page under 1 s). It judges the work, not the time, which a
// loaded machine stretches: each page is one request for a page of datasets, so a page that read every dataset (a
// count, or a sort in the client) fails it.
func testTenThousandDatasets(t *testing.T, b *bundle) {
	c := &catalog.Caller{User: "steward@acme.example", Org: b.org, Sandbox: scaleSandbox}
	template, err := b.datasets.CreateDataset(context.Background(), c, catalog.DatasetCreate{Name: "scale-00000",
		Tags: map[string][]string{"team": {"scale"}}, Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	start := time.Now()
	cloneDatasets(t, b, template.ID, scaleDatasets-1)
	t.Logf("created %d datasets by SQL in %v", scaleDatasets, time.Since(start).Round(time.Millisecond))
	scaleRows(t, b, c, template.ID)

	ctx := tab(t)
	run(ctx, t, chromedp.Navigate(b.url+"/ui/#token="+b.token(t, allScopes...)+"&sandbox="+scaleSandbox),
		chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
	waitText(ctx, t, "#inventory-status", "Showing datasets 1 to 25.")
	loaded, first := shown(ctx, t)
	t.Logf("10,000 datasets: first page shown %v after navigation (its request and drawing %v, of which the API's answer %v)", first, loaded, apiTime(ctx, t))
	requireOnePage(ctx, t, "first page with 10,000 datasets")
	require.Equal(t, "scale-00000", names(ctx, t)[0])
	// Opened again, as a steward coming back does: the browser revalidates the modules (ETags) instead of loading them.
	run(ctx, t, chromedp.Reload(), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
	waitText(ctx, t, "#inventory-status", "Showing datasets 1 to 25.")
	loaded, again := shown(ctx, t)
	modules := time.Duration(eval[float64](ctx, t, `performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd`)) * time.Millisecond
	t.Logf("10,000 datasets: reopened, first page shown %v after navigation (modules loaded at %v; its request and drawing %v)", again, modules.Round(time.Millisecond), loaded)
	requireOnePage(ctx, t, "first page with 10,000 datasets, reopened")
	checkAccessibility(ctx, t, "datasets, 10,000")

	measure := func(what, hash, status, firstName string) {
		t.Helper()
		run(ctx, t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('#main').dataset.loadedMs = ''; location.hash = %q`, hash)))
		waitText(ctx, t, "#inventory-status", status)
		require.Equal(t, firstName, names(ctx, t)[0], what)
		loaded, _ := shown(ctx, t)
		t.Logf("10,000 datasets: %s: %v (the API's answer %v)", what, loaded, apiTime(ctx, t))
		requireOnePage(ctx, t, what)
	}
	measure("sorted by name descending", "#/datasets?sort=desc:name", "Showing datasets 1 to 25.", "scale-09999")
	measure("sorted by rows, descending", "#/datasets?sort=desc:extensions.adobe_lakeHouse.metrics.rowCount", "Showing datasets 1 to 25.", "scale-00000")
	measure("sorted by storage, descending", "#/datasets?sort=desc:extensions.adobe_lakeHouse.metrics.storageSize", "Showing datasets 1 to 25.", "scale-00000")
	measure("sorted by storage", "#/datasets?sort=extensions.adobe_lakeHouse.metrics.storageSize", "Showing datasets 1 to 25.", "scale-00097")
	measure("sorted by next retention job", "#/datasets?sort=extensions.adobe_lakeHouse.rowExpiration.nextRun", "Showing datasets 1 to 25.", "scale-00000")
	measure("sorted by data lake retention", "#/datasets?sort=extensions.adobe_lakeHouse.rowExpiration.ttlValue", "Showing datasets 1 to 25.", "scale-00000")
	measure("last page (page 400)", "#/datasets?page=399", "Showing datasets 9,976 to 10,000.", "scale-09975")
	require.True(t, eval[bool](ctx, t, `document.querySelector('#page-next').disabled`), "no page after the last")
	measure("filtered by name (name~0999)", "#/datasets?q=0999", "Showing datasets 1 to 11.", "scale-00999")
	measure("filtered by tag (team:scale), page 2", "#/datasets?tag=team:scale&page=1", "Showing datasets 26 to 50.", "scale-00025")
}
