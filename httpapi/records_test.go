package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// record returns the body of one record line: its _id and its other fields.
func record(id, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"_id":"` + id + `"` + extra + `}`
}

// lineReasons returns the reasons of the refused lines of an ingestion answer, by line.
func lineReasons(res map[string]any) map[int]string {
	reasons := map[int]string{}
	for _, e := range res["errors"].([]any) {
		reasons[int(e.(map[string]any)["line"].(float64))] = e.(map[string]any)["reason"].(string)
	}
	return reasons
}

// rowTime parses a time the rows answer shows.
func rowTime(t testing.TB, row map[string]any, field string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, row[field].(string))
	require.NoError(t, err, "%s of row %v", field, row["_id"])
	return v
}

func TestRecordDatasetSettings(t *testing.T) {
	t.Parallel()

	t.Run("StartsWithoutTTLUnderRecordLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		doc, _ := b.getDataset(t, id)
		for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
			re := rowExpiration(t, doc, store)
			require.Nil(t, re["ttlValue"], "%s: records do not expire until a TTL is set", store)
			require.Equal(t, "default", re["valueStatus"])
			require.Equal(t, "service", re["setBy"])
		}
		resp := b.do(t, request{method: http.MethodGet, path: "/ttl/" + id})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		limits := resp.json(t)[id].(map[string]any)
		require.Equal(t, map[string]any{"defaultValue": nil, "minValue": "P1D", "maxValue": "P10Y", "rowOverrides": "allowed"},
			rowExpiration(t, limits, "adobe_lakeHouse"), "the lake's limits, with the dataset's rowOverrides switch")
		require.Equal(t, map[string]any{"defaultValue": nil, "minValue": "P1D", "maxValue": "P10Y"}, rowExpiration(t, limits, "adobe_unifiedProfile"))
	})

	t.Run("PatchIsCheckedAndAudited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		events := b.auditCount(t, id)
		// P1D is the record minimum, and below the time-series lake's P30D.
		resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P1D"}), nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Equal(t, "P1D", rowExpiration(t, resp.json(t)[id].(map[string]any), "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, events+1, b.auditCount(t, id), "an Update event in the same transaction")

		resp = b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P11Y"}), nil)
		require.Equal(t, http.StatusBadRequest, resp.status)
		p := resp.problem(t)
		require.Equal(t, "extensions.adobe_lakeHouse.rowExpiration.ttlValue", p.Field)
		require.Contains(t, p.Detail, "above maxValue P10Y")
		require.Equal(t, events+1, b.auditCount(t, id), "a refused change writes nothing")
	})
}

func TestRecordLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{behavior: "record"})
	res := b.ingest(t, id, ndjson(
		record("a", `"tier":"gold"`),
		`{"tier":"silver"}`,
		record("b", `"timestamp":"2026-11-01T00:00:00Z"`),
	))
	require.EqualValues(t, 1, res["accepted"], "%v", res)
	reasons := lineReasons(res)
	require.Contains(t, reasons[2], "_id is required in a record dataset")
	require.Contains(t, reasons[3], "timestamp is set by the service in a record dataset")

	rows := b.readRows(t, id, "")
	require.Equal(t, []string{"a"}, rowIDs(rows))
	require.Equal(t, "gold", rows[0]["tier"])
	require.Equal(t, rows[0]["_ingestedAt"], rows[0]["timestamp"], "a record's timestamp is its last write")
	require.NotContains(t, rows[0], "_expiresAt", "no TTL yet")
}

func TestRecordClockIsTheLastWrite(t *testing.T) {
	t.Parallel()

	t.Run("ResentIDRestartsTheClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P30D"}), nil).status)
		b.ingest(t, id, ndjson(record("a", `"v":1`), record("b", `"v":1`)))

		b.setNow(b.now.AddDate(0, 0, 20))
		b.ingest(t, id, ndjson(record("a", `"v":2`)))

		b.setNow(b.now.AddDate(0, 0, 30).Add(time.Minute))
		rows := b.readRows(t, id, "")
		require.Equal(t, []string{"a"}, rowIDs(rows), "b was last written 30 days ago; a 10 days ago")
		require.EqualValues(t, 2, rows[0]["v"])
		written := rowTime(t, rows[0], "timestamp")
		require.WithinDuration(t, b.now.AddDate(0, 0, 20), written, time.Second)
		require.Equal(t, written.AddDate(0, 0, 30), rowTime(t, rows[0], "_expiresAt"))

		b.setNow(written.AddDate(0, 0, 30).Add(-time.Second))
		require.Len(t, b.readRows(t, id, ""), 1, "a second before its last write + P30D")
		b.setNow(written.AddDate(0, 0, 30))
		require.Empty(t, b.readRows(t, id, ""), "expired at exactly its last write + P30D")
	})

	t.Run("TTLSetLaterCountsFromEachWrite", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		b.ingest(t, id, ndjson(record("old", "")))
		b.setNow(b.now.AddDate(0, 0, 40))
		b.ingest(t, id, ndjson(record("new", "")))
		b.setNow(b.now.AddDate(0, 0, 45))
		require.Len(t, b.readRows(t, id, ""), 2, "no TTL: records do not expire")

		require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P30D"}), nil).status)
		require.Equal(t, []string{"new"}, rowIDs(b.readRows(t, id, "")), "old was written 45 days ago")

		require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": nil, "adobe_unifiedProfile": nil}), nil).status)
		require.Equal(t, []string{"new"}, rowIDs(b.readRows(t, id, "")), "disabling the TTL brings no expired record back")
	})
}

func TestRecordOverrides(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{behavior: "record"})
	// Where the record lake has no maximum, -1 keeps a record forever.
	require.NoError(t, postgres.NewPolicyService(b.db).SetLimits(context.Background(), b.org,
		catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer, Records: true},
		catalog.Limits{Min: mustPeriod(t, "P1D")}))
	require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P30D"}), nil).status)
	res := b.ingest(t, id, ndjson(
		record("short", `"_ttl":"P2D"`),
		record("absolute", `"_expiresAt":"2026-12-01T00:00:00Z"`),
		record("never", `"_ttl":-1`),
		record("plain", ""),
		record("tooSoon", `"_expiresAt":"2026-11-23T12:00:00Z"`),
	))
	require.EqualValues(t, 4, res["accepted"], "%v", res)
	require.Contains(t, lineReasons(res)[5], "earlier than the row's write + minValue P1D")

	rows := b.readRows(t, id, "")
	byID := map[string]map[string]any{}
	for _, r := range rows {
		byID[r["_id"].(string)] = r
	}
	require.Equal(t, rowTime(t, byID["short"], "timestamp").AddDate(0, 0, 2), rowTime(t, byID["short"], "_expiresAt"),
		"_ttl counts from the write")

	for _, step := range []struct {
		at   time.Time
		want []string
	}{
		{b.now.AddDate(0, 0, 2).Add(time.Minute), []string{"absolute", "never", "plain"}},
		{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), []string{"never", "plain"}},
		{b.now.AddDate(0, 0, 30).Add(time.Minute), []string{"never"}},
		{b.now.AddDate(50, 0, 0), []string{"never"}},
	} {
		b.setNow(step.at)
		require.ElementsMatch(t, step.want, rowIDs(b.readRows(t, id, "")), "at %s", step.at)
	}
}

func TestRecordPreviewGroupsByLastWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{behavior: "record"})
	require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P30D"}), nil).status)
	b.ingest(t, id, ndjson(record("a", ""), record("b", ""), record("c", "")))
	b.setNow(b.now.AddDate(0, 0, 20))
	b.ingest(t, id, ndjson(record("c", `"v":2`), record("d", "")))
	b.setNow(b.now.AddDate(0, 0, 35))

	preview := func(q string) map[string]any {
		resp := b.do(t, request{method: http.MethodGet, path: "/ttl/" + id + "/preview" + q})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		return resp.json(t)
	}
	current := preview("")
	require.EqualValues(t, 4, current["rowCount"])
	require.EqualValues(t, 2, current["rowsToDelete"], "a and b; c was written again 15 days ago")
	require.EqualValues(t, 4, preview("?ttlValue=P10D")["rowsToDelete"])
	require.Equal(t, []any{
		map[string]any{"month": "2026-12", "rows": float64(2)},
		map[string]any{"month": "2026-11", "rows": float64(2)},
	}, current["distribution"].(map[string]any)["buckets"], "rows by the month of their last write")
}
