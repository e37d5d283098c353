package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memos returns the "memo" field of each row, in order.
func memos(rows []map[string]any) []any {
	out := make([]any, 0, len(rows))
	for _, r := range rows {
		out = append(out, r["memo"])
	}
	return out
}

// TestHeldRowKeepsItsReplacedVersions is issue 28's finding 1: a row of a held dataset written again keeps its
// previous version, hidden from ordinary reads, shown with includeExpired and marked with when it was replaced,
// counted in a Replace audit event; the row delete stays refused; without a hold a re-sent _id replaces as before.
func TestHeldRowKeepsItsReplacedVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	line := func(memo string) string {
		return ndjson(event("2026-11-20T00:00:00Z", `"_id":"evidence-1","memo":"`+memo+`"`))
	}
	b.ingest(t, id, line("draft"))
	b.ingest(t, id, line("wire $1M"))
	require.Equal(t, []any{"wire $1M"}, memos(b.readRows(t, id, "includeExpired=true")), "without a hold a re-sent _id replaces its row")
	require.Empty(t, b.holdEvents(t, id, "Replace"))

	holdID := b.placeHold(t, id, nil)["id"].(string)
	res := b.ingest(t, id, line("nothing to see"))
	require.EqualValues(t, 1, res["accepted"], "%v", res)
	b.ingest(t, id, line("still nothing"))

	current := b.readRows(t, id, "")
	require.Equal(t, []any{"still nothing"}, memos(current), "ordinary reads show the current version only")
	require.NotContains(t, current[0], "_replacedAt")
	all := b.readRows(t, id, "includeExpired=true")
	require.Equal(t, []any{"wire $1M", "nothing to see", "still nothing"}, memos(all), "every version, oldest replacement first")
	first, second := rowTime(t, all[0], "_replacedAt"), rowTime(t, all[1], "_replacedAt")
	require.True(t, first.Before(second), "each kept version says when it was replaced: %v, %v", first, second)
	require.NotContains(t, all[2], "_replacedAt")
	for _, r := range all {
		require.Equal(t, "evidence-1", r["_id"])
		require.Equal(t, "2026-11-20T00:00:00Z", r["timestamp"])
	}
	require.Equal(t, all, b.readRows(t, id, "includeExpired=true&limit=1"), "pages of one row step through versions of one timestamp and _id")

	replaced := b.holdEvents(t, id, "Replace")
	require.Len(t, replaced, 2, "each write that kept versions is audited")
	require.Equal(t, map[string]any{"versionsKept": float64(1), "stores": map[string]any{"adobe_lakeHouse": float64(1)},
		"rowIds": []any{"evidence-1"}}, replaced[0])

	del := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/evidence-1"})
	require.Equal(t, http.StatusConflict, del.status, "body: %s", del.body)
	require.Equal(t, "dataset-held", del.problem(t).Type)

	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/holds/" + holdID}).status)
	b.ingest(t, id, line("after the release"))
	require.Equal(t, []any{"wire $1M", "nothing to see", "after the release"}, memos(b.readRows(t, id, "includeExpired=true")),
		"after the release a write replaces the current version only: the kept ones wait for their expiry")
	require.Len(t, b.holdEvents(t, id, "Replace"), 2)
	del = b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/evidence-1"})
	require.Equal(t, http.StatusOK, del.status, "body: %s", del.body)
	require.Empty(t, b.readRows(t, id, "includeExpired=true"), "a delete by _id after the release removes every version")
}

// TestHeldRecordKeepsItsPreviousWrite: in a record dataset a write under a hold keeps the previous write, with its
// own write time as its timestamp.
func TestHeldRecordKeepsItsPreviousWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{behavior: "record"})
	b.ingest(t, id, ndjson(record("member-1", `"tier":"gold"`)))
	b.placeHold(t, id, nil)
	b.setNow(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	b.ingest(t, id, ndjson(record("member-1", `"tier":"none"`)))

	current := b.readRows(t, id, "")
	require.Len(t, current, 1)
	require.Equal(t, "none", current[0]["tier"])
	all := b.readRows(t, id, "includeExpired=true")
	require.Len(t, all, 2)
	require.Equal(t, "gold", all[0]["tier"])
	require.Equal(t, "none", all[1]["tier"])
	require.True(t, rowTime(t, all[0], "timestamp").Before(rowTime(t, all[1], "timestamp")), "the kept write keeps its own write time")
	require.False(t, rowTime(t, all[0], "_replacedAt").Before(rowTime(t, all[1], "timestamp")), "it was replaced by the next write")
	require.Len(t, b.holdEvents(t, id, "Replace"), 1)
}

// TestHeldProfileRowKeepsItsVersions: the profile copy of a held row keeps its previous version too, and the audit
// event counts each store's.
func TestHeldProfileRowKeepsItsVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{tags: map[string][]string{"unifiedProfile": {"enabled:true"}}})
	b.ingest(t, id, ndjson(event("2026-11-20T00:00:00Z", `"_id":"p-1","memo":"first"`)))
	b.placeHold(t, id, nil)
	b.ingest(t, id, ndjson(event("2026-11-21T00:00:00Z", `"_id":"p-1","memo":"second"`)))

	require.Equal(t, []any{"second"}, memos(b.readRows(t, id, "store=adobe_unifiedProfile")))
	profile := b.readRows(t, id, "store=adobe_unifiedProfile&includeExpired=true")
	require.Equal(t, []any{"first", "second"}, memos(profile))
	require.Contains(t, profile[0], "_replacedAt")
	require.Equal(t, []any{"first", "second"}, memos(b.readRows(t, id, "includeExpired=true")))
	replaced := b.holdEvents(t, id, "Replace")
	require.Len(t, replaced, 1)
	require.Equal(t, float64(2), replaced[0]["versionsKept"])
	require.Equal(t, map[string]any{"adobe_lakeHouse": float64(1), "adobe_unifiedProfile": float64(1)}, replaced[0]["stores"])
}

// TestServiceRowFieldsAreReserved is issue 28's finding 9: the fields the service writes into a row are refused on
// ingestion, line by line, so that no row can read as expired or replaced by what it was sent with.
func TestServiceRowFieldsAreReserved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	res := b.ingest(t, id, ndjson(
		event("2026-11-20T00:00:00Z", `"_id":"spoof","_expired":true`),
		event("2026-11-20T00:00:00Z", `"_id":"forged","_replacedAt":"2026-11-21T00:00:00Z"`),
		event("2026-11-20T00:00:00Z", `"_id":"plain"`)))
	require.EqualValues(t, 1, res["accepted"], "%v", res)
	require.EqualValues(t, 2, res["rejected"], "%v", res)
	reasons := lineReasons(res)
	require.Contains(t, reasons[1], "_expired")
	require.Contains(t, reasons[2], "_replacedAt")
	for _, q := range []string{"", "includeExpired=true"} {
		rows := b.readRows(t, id, q)
		require.Equal(t, []string{"plain"}, rowIDs(rows), q)
		require.NotContains(t, rows[0], "_expired", q)
	}
}
