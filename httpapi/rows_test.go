package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// ndjson joins events into an application/x-ndjson body.
func ndjson(events ...string) string { return strings.Join(events, "\n") + "\n" }

func event(ts string, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"timestamp":%q%s}`, ts, extra)
}

func (b *testBundle) ingest(t testing.TB, id, body string) map[string]any {
	t.Helper()
	resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: body,
		headers: map[string]string{"Content-Type": "application/x-ndjson"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	return resp.json(t)
}

// readRows returns every visible row of a store, following the next links.
func (b *testBundle) readRows(t testing.TB, id, query string) []map[string]any {
	t.Helper()
	var out []map[string]any
	path := "/dataSets/" + id + "/rows?" + query
	for path != "" {
		resp := b.do(t, request{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		page := resp.json(t)
		for _, r := range page["_embedded"].(map[string]any)["rows"].([]any) {
			out = append(out, r.(map[string]any))
		}
		path = ""
		if next, ok := page["_links"].(map[string]any)["next"].(map[string]any); ok {
			path = next["href"].(string)
		}
	}
	return out
}

func rowIDs(rows []map[string]any) []string {
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r["_id"].(string))
	}
	return ids
}

func TestIngestRows(t *testing.T) {
	t.Parallel()

	t.Run("MixedBodyKeepsGoodLines", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		res := b.ingest(t, id, ndjson(
			event("2026-11-01T10:00:00Z", `"_id":"a","page":"/home"`),
			`{"timestamp": "yesterday"}`,
			`not json`,
			"",
			event("2026-11-02T10:00:00Z", `"_id":"b","n":1.50`),
			`{"_id":"c"}`,
			`[1,2]`,
		))
		require.EqualValues(t, 2, res["accepted"])
		require.EqualValues(t, 4, res["rejected"])
		require.EqualValues(t, 0, res["expiredOnArrival"])
		errs := res["errors"].([]any)
		require.Len(t, errs, 4)
		lines := []float64{}
		for _, e := range errs {
			lines = append(lines, e.(map[string]any)["line"].(float64))
			require.NotEmpty(t, e.(map[string]any)["reason"])
		}
		require.Equal(t, []float64{2, 3, 6, 7}, lines)
		require.Contains(t, errs[2].(map[string]any)["reason"], "timestamp is required")
		rows := b.readRows(t, id, "")
		require.Equal(t, []string{"a", "b"}, rowIDs(rows))
		require.Equal(t, "/home", rows[0]["page"])
		require.EqualValues(t, 1.5, rows[1]["n"])
		require.Equal(t, "2026-11-01T10:00:00Z", rows[0]["timestamp"])
		require.Equal(t, "2027-11-01T10:00:00Z", rows[0]["_expiresAt"], "timestamp + the default P12M")
		require.NotEmpty(t, rows[0]["_ingestedAt"])
		doc, _ := b.getDataset(t, id)
		metrics := doc["extensions"].(map[string]any)["adobe_lakeHouse"].(map[string]any)["metrics"].(map[string]any)
		require.EqualValues(t, 2, metrics["rowCount"], "kept from counters, no COUNT(*)")
		require.Greater(t, metrics["storageSize"], float64(0))
		require.Greater(t, metrics["asOf"], float64(0))
	})

	t.Run("JSONArray", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows",
			body: `[` + event("2026-11-01T10:00:00Z", `"_id":"x"`) + `, 42, ` + event("2026-11-01T11:00:00Z", `"_id":"y"`) + `]`})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		res := resp.json(t)
		require.EqualValues(t, 2, res["accepted"])
		require.EqualValues(t, 1, res["rejected"])
		require.EqualValues(t, 2, res["errors"].([]any)[0].(map[string]any)["line"])
		require.Equal(t, []string{"x", "y"}, rowIDs(b.readRows(t, id, "")))
	})

	t.Run("SameIDStoredOnceWithLaterContent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2026-11-01T10:00:00Z", `"_id":"dup","v":1`), event("2026-11-01T10:00:00Z", `"_id":"dup","v":2`)))
		b.ingest(t, id, ndjson(event("2026-11-03T10:00:00Z", `"_id":"dup","v":3`)))
		rows := b.readRows(t, id, "")
		require.Len(t, rows, 1)
		require.EqualValues(t, 3, rows[0]["v"])
		require.Equal(t, "2026-11-03T10:00:00Z", rows[0]["timestamp"])
		var stored int64
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT sum(row_count) FROM row_stats WHERE dataset_id = $1`, id).Scan(&stored))
		require.EqualValues(t, 1, stored, "the counters follow replacements")
	})

	t.Run("GeneratedIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2026-11-01T10:00:00Z", ""), event("2026-11-01T10:00:00Z", "")))
		rows := b.readRows(t, id, "")
		require.Len(t, rows, 2)
		require.NotEqual(t, rows[0]["_id"], rows[1]["_id"])
	})

	t.Run("ContentTypeAndSize", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: "x", headers: map[string]string{"Content-Type": "text/csv"}})
		require.Equal(t, http.StatusUnsupportedMediaType, resp.status)
		req := httptest.NewRequest(http.MethodPost, "/dataSets/"+id+"/rows", strings.NewReader("{}"))
		req.ContentLength = 100<<20 + 1
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+b.token)
		req.Header.Set("x-api-key", "k")
		req.Header.Set("x-gw-ims-org-id", b.org)
		rec := httptest.NewRecorder()
		b.api.ServeHTTP(rec, req)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	})

	t.Run("IngestedAtOnlyForOperators", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		res := b.ingest(t, id, ndjson(event("2026-11-01T10:00:00Z", `"_ingestedAt":"2025-01-01T00:00:00Z"`)))
		require.EqualValues(t, 1, res["rejected"])
		require.Contains(t, res["errors"].([]any)[0].(map[string]any)["reason"], "_ingestedAt")
	})

	t.Run("RecordDatasetRowsNeedNoTimestamp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		res := b.ingest(t, id, ndjson(`{"_id":"member-1","tier":"gold"}`))
		require.EqualValues(t, 1, res["accepted"], "%v", res)
		rows := b.readRows(t, id, "")
		require.Len(t, rows, 1)
		require.NotContains(t, rows[0], "_expiresAt")
	})
}

func TestRowOverrides(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	res := b.ingest(t, id, ndjson(
		event("2026-11-01T00:00:00Z", `"_id":"own","_expiresAt":"2027-01-15T00:00:00Z"`),
		event("2026-11-01T00:00:00Z", `"_id":"period","_ttl":"P90D"`),
		event("2026-11-01T00:00:00Z", `"_id":"tooShort","_ttl":"P1D"`),
		event("2026-11-01T00:00:00Z", `"_id":"tooLong","_expiresAt":"2040-01-01T00:00:00Z"`),
		event("2026-11-01T00:00:00Z", `"_id":"never","_ttl":-1`),
		event("2026-11-01T00:00:00Z", `"_id":"both","_ttl":"P90D","_expiresAt":"2027-01-15T00:00:00Z"`),
		event("2026-11-01T00:00:00Z", `"_id":"badPeriod","_ttl":"P1.5M"`),
	))
	require.EqualValues(t, 2, res["accepted"], "%v", res)
	reasons := map[float64]string{}
	for _, e := range res["errors"].([]any) {
		reasons[e.(map[string]any)["line"].(float64)] = e.(map[string]any)["reason"].(string)
	}
	require.Contains(t, reasons[3], "minValue P30D")
	require.Contains(t, reasons[4], "maxValue P10Y")
	require.Contains(t, reasons[5], "no maxValue")
	require.Contains(t, reasons[6], "not both")
	require.Contains(t, reasons[7], "fraction")
	rows := b.readRows(t, id, "")
	require.Equal(t, []string{"own", "period"}, rowIDs(rows))
	require.Equal(t, "2027-01-15T00:00:00Z", rows[0]["_expiresAt"])
	require.Equal(t, "2027-01-30T00:00:00Z", rows[1]["_expiresAt"])

	// Where the lake has no maximum, -1 keeps a row forever.
	require.NoError(t, postgres.NewPolicyService(b.db).SetLimits(context.Background(), b.org,
		catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer},
		catalog.Limits{Min: mustPeriod(t, "P30D"), Default: mustPeriod(t, "P12M")}))
	res = b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"never","_ttl":-1`)))
	require.EqualValues(t, 1, res["accepted"], "%v", res)
	b.setNow(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	require.Equal(t, []string{"never"}, rowIDs(b.readRows(t, id, "")))
}

func mustPeriod(t testing.TB, s string) retention.Period {
	t.Helper()
	p, err := retention.ParsePeriod(s)
	require.NoError(t, err)
	return p
}

func TestReadsHideExpiredRows(t *testing.T) {
	t.Parallel()

	t.Run("OneSecondEitherSideOfExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2025-11-23T10:00:00Z", `"_id":"edge"`)))
		b.setNow(time.Date(2026, 11, 23, 9, 59, 59, 0, time.UTC))
		require.Len(t, b.readRows(t, id, ""), 1, "one second before timestamp + P12M")
		b.setNow(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
		require.Empty(t, b.readRows(t, id, ""), "expired at exactly timestamp + P12M")
	})

	t.Run("MonthEnd", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.setNow(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		id := b.createDataset(t, datasetOpts{})
		require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P1M"}), nil).status)
		b.setNow(time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)) // an event is sent once it has happened
		b.ingest(t, id, ndjson(event("2024-01-31T00:00:00Z", `"_id":"jan31"`)))
		rows := b.readRows(t, id, "")
		require.Equal(t, "2024-02-29T00:00:00Z", rows[0]["_expiresAt"], "Postgres clamps to the month's end")
		b.setNow(time.Date(2024, 2, 28, 23, 59, 59, 0, time.UTC))
		require.Len(t, b.readRows(t, id, ""), 1)
		b.setNow(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC))
		require.Empty(t, b.readRows(t, id, ""))
	})

	t.Run("BackfillExpiredOnArrival", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		res := b.ingest(t, id, ndjson(event("2020-01-01T00:00:00Z", ""), event("2026-11-01T00:00:00Z", "")))
		require.EqualValues(t, 2, res["accepted"])
		require.EqualValues(t, 1, res["expiredOnArrival"])
		require.Len(t, b.readRows(t, id, ""), 1)
	})
}

func TestTTLChangesApplyAtOnce(t *testing.T) {
	t.Parallel()

	// seedRows creates a dataset at 2026-11-01 with rows 1, 4, 7 and 10 months old.
	seedRows := func(t *testing.T, b *testBundle) string {
		b.setNow(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(
			event("2026-10-01T00:00:00Z", `"_id":"m1"`),
			event("2026-07-01T00:00:00Z", `"_id":"m4"`),
			event("2026-04-01T00:00:00Z", `"_id":"m7"`),
			event("2026-01-01T00:00:00Z", `"_id":"m10"`),
		))
		return id
	}
	setTTL := func(t *testing.T, b *testBundle, id string, v any) {
		resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": v}), nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	}

	t.Run("ShortenHidesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := seedRows(t, b)
		require.Len(t, b.readRows(t, id, ""), 4)
		setTTL(t, b, id, "P6M")
		require.Equal(t, []string{"m4", "m1"}, rowIDs(b.readRows(t, id, "")))
	})

	t.Run("LengthenDoesNotResurrect", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := seedRows(t, b)
		setTTL(t, b, id, "P6M")
		setTTL(t, b, id, "P24M")
		rows := b.readRows(t, id, "")
		require.Equal(t, []string{"m4", "m1"}, rowIDs(rows), "m7 and m10 expired under P6M and stay gone")
		require.Equal(t, "2028-07-01T00:00:00Z", rows[0]["_expiresAt"], "unexpired rows follow the new value")
		b.setNow(time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC))
		require.Equal(t, []string{"m4", "m1"}, rowIDs(b.readRows(t, id, "")), "they live longer than P6M would allow")
	})

	t.Run("DisableKeepsWhatIsLeft", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := seedRows(t, b)
		setTTL(t, b, id, "P6M")
		setTTL(t, b, id, nil)
		b.setNow(time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC))
		rows := b.readRows(t, id, "")
		require.Equal(t, []string{"m4", "m1"}, rowIDs(rows))
		require.NotContains(t, rows[0], "_expiresAt")
	})

	t.Run("RowsAfterChangeFollowOnlyNewValue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.setNow(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
		id := b.createDataset(t, datasetOpts{})
		setTTL(t, b, id, "P3M")
		setTTL(t, b, id, "P24M")
		b.ingest(t, id, ndjson(event("2026-01-01T00:00:00Z", `"_id":"late"`)))
		require.Equal(t, []string{"late"}, rowIDs(b.readRows(t, id, "")), "P3M ended before the row arrived")
	})
}

func TestStreamedBodyIsReadableBeforeItEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	pw, done := b.streamIngest(t, id)
	for i := range testChunkRows {
		_, err := fmt.Fprintln(pw, event("2026-11-01T00:00:00Z", fmt.Sprintf(`"_id":"r%03d"`, i)))
		require.NoError(t, err)
	}
	require.Equal(t, testChunkRows, <-b.chunks, "the first chunk commits while the body is still open")
	require.Len(t, b.readRows(t, id, ""), testChunkRows)
	_, err := fmt.Fprintln(pw, event("2026-11-01T00:00:00Z", `"_id":"last"`))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	resp := <-done
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.EqualValues(t, testChunkRows+1, resp.json(t)["accepted"])
}

func TestRowPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	var lines []string
	for i := range 25 {
		lines = append(lines, event(fmt.Sprintf("2026-11-01T00:%02d:00Z", i%7), fmt.Sprintf(`"_id":"r%02d"`, i)))
	}
	b.ingest(t, id, ndjson(lines...))
	rows := b.readRows(t, id, "limit=4")
	require.Len(t, rows, 25)
	seen := map[string]bool{}
	for i, r := range rows {
		require.False(t, seen[r["_id"].(string)], "no row twice")
		seen[r["_id"].(string)] = true
		if i > 0 {
			require.LessOrEqual(t, rows[i-1]["timestamp"], r["timestamp"])
		}
	}
	window := b.readRows(t, id, "start=2026-11-01T00:02:00Z&end=2026-11-01T00:04:00Z")
	for _, r := range window {
		require.GreaterOrEqual(t, r["timestamp"], "2026-11-01T00:02:00Z")
		require.Less(t, r["timestamp"], "2026-11-01T00:04:00Z")
	}
	require.Len(t, window, 8)
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "start=yesterday", "store=nope", "cursor=@@@"} {
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows?" + q})
		require.Equal(t, http.StatusBadRequest, resp.status, q)
	}
}

func TestProfileStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enabled := b.createDataset(t, datasetOpts{tags: map[string][]string{"unifiedProfile": {"enabled:true"}}})
	plain := b.createDataset(t, datasetOpts{})
	require.Equal(t, http.StatusOK, b.patch(t, enabled, ttlBody(map[string]any{"adobe_unifiedProfile": "P30D"}), nil).status)
	b.setNow(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	body := ndjson(event("2026-11-20T00:00:00Z", `"_id":"new"`), event("2026-09-01T00:00:00Z", `"_id":"old"`))
	b.ingest(t, enabled, body)
	b.ingest(t, plain, body)
	require.Equal(t, []string{"old", "new"}, rowIDs(b.readRows(t, enabled, "")))
	require.Equal(t, []string{"new"}, rowIDs(b.readRows(t, enabled, "store=adobe_unifiedProfile")), "the profile copy expires by its own TTL")
	require.Empty(t, b.readRows(t, plain, "store=adobe_unifiedProfile"), "only profile-enabled datasets keep a profile copy")
}

func TestDeleteRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{tags: map[string][]string{"unifiedProfile": {"enabled:true"}}})
	b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"a/b"`), event("2026-11-01T00:00:00Z", `"_id":"keep"`)))
	events := b.auditCount(t, id)
	resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/a%2Fb"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, []string{"keep"}, rowIDs(b.readRows(t, id, "")))
	require.Equal(t, []string{"keep"}, rowIDs(b.readRows(t, id, "store=adobe_unifiedProfile")))
	require.Equal(t, events+1, b.auditCount(t, id))
	require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/a%2Fb"}).status)
}

func TestRowRoutesTenancy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"secret"`)))
	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	for _, req := range []request{
		{method: http.MethodGet, path: "/dataSets/" + id + "/rows"},
		{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: ndjson(event("2026-11-01T00:00:00Z", "")), headers: map[string]string{"Content-Type": "application/x-ndjson"}},
		{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/secret"},
	} {
		require.Equal(t, http.StatusNotFound, other.do(t, req).status, "%s %s", req.method, req.path)
	}
	require.Equal(t, []string{"secret"}, rowIDs(b.readRows(t, id, "")))
	readOnly := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsRead}, time.Hour), "Content-Type": "application/x-ndjson"}
	require.Equal(t, http.StatusForbidden, b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: "{}", headers: readOnly}).status)
}
