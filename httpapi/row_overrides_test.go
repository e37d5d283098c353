package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// overridesBody is a PATCH v2 body setting the rowOverrides switch alone.
func overridesBody(value any) map[string]any {
	return map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"rowOverrides": value}}}}
}

// lastAudit returns the action and details of the latest audit event about asset id.
func (b *testBundle) lastAudit(t testing.TB, id string) (string, map[string]any) {
	t.Helper()
	var action string
	var raw []byte
	err := b.db.Pool.QueryRow(context.Background(), `SELECT action, details FROM audit_events WHERE org_id = $1 AND asset_id = $2
		ORDER BY occurred_at DESC, id DESC LIMIT 1`, b.org, id).Scan(&action, &raw)
	require.NoError(t, err)
	var details map[string]any
	require.NoError(t, json.Unmarshal(raw, &details))
	return action, details
}

// rejectedLines returns the line numbers of an ingestion answer's errors, requiring each reason to hold reason.
func rejectedLines(t testing.TB, answer map[string]any, reason string) []int {
	t.Helper()
	var lines []int
	for _, e := range answer["errors"].([]any) {
		le := e.(map[string]any)
		require.Contains(t, le["reason"], reason)
		lines = append(lines, int(le["line"].(float64)))
	}
	return lines
}

const refusedReason = `rowOverrides is "refused"`

func TestRowOverridesSwitch(t *testing.T) {
	t.Parallel()

	t.Run("AllowedByDefaultAndShown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "allowed", rowExpiration(t, doc, "adobe_lakeHouse")["rowOverrides"])
		require.NotContains(t, rowExpiration(t, doc, "adobe_unifiedProfile"), "rowOverrides", "the switch is the dataset's, shown once")
		ttl := b.do(t, request{method: http.MethodGet, path: "/ttl/" + id}).json(t)[id].(map[string]any)
		require.Equal(t, "allowed", rowExpiration(t, ttl, "adobe_lakeHouse")["rowOverrides"])
	})

	t.Run("RefusedIsShownAndAudited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		before := b.auditCount(t, id)
		resp := b.patch(t, id, overridesBody("refused"), nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		doc := resp.json(t)[id].(map[string]any)
		require.Equal(t, "refused", rowExpiration(t, doc, "adobe_lakeHouse")["rowOverrides"])
		require.Equal(t, "P12M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"], "the TTL is left as it was")
		require.Equal(t, "default", rowExpiration(t, doc, "adobe_lakeHouse")["valueStatus"])
		require.Equal(t, "1.0.1", doc["version"])
		ttl := b.do(t, request{method: http.MethodGet, path: "/ttl/" + id}).json(t)[id].(map[string]any)
		require.Equal(t, "refused", rowExpiration(t, ttl, "adobe_lakeHouse")["rowOverrides"])
		require.Equal(t, before+1, b.auditCount(t, id))
		action, details := b.lastAudit(t, id)
		require.Equal(t, "Update", action)
		require.Equal(t, map[string]any{"before": "allowed", "after": "refused"}, details["rowOverrides"])
	})

	t.Run("RefusedLinesNamedByLine", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		require.Equal(t, http.StatusOK, b.patch(t, id, overridesBody("refused"), nil).status)
		answer := b.ingest(t, id, ndjson(
			event("2026-11-01T00:00:00Z", `"_id":"plain"`),
			event("2026-11-01T00:00:00Z", `"_id":"ttl","_ttl":"P90D"`),
			event("2026-11-01T00:00:00Z", `"_id":"at","_expiresAt":"2027-01-15T00:00:00Z"`),
			event("2026-11-01T00:00:00Z", `"_id":"never","_ttl":-1`),
		))
		require.EqualValues(t, 1, answer["accepted"])
		require.EqualValues(t, 3, answer["rejected"])
		require.Equal(t, []int{2, 3, 4}, rejectedLines(t, answer, refusedReason))
		require.Equal(t, []string{"plain"}, rowIDs(b.readRows(t, id, "")))
	})

	t.Run("StoredOverridesKeepTheirExpiryAndTheTTLStillApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P3M"}), nil).status)
		ts := b.now.Add(-10 * 24 * time.Hour).Format(time.RFC3339)
		b.ingest(t, id, ndjson(
			event(ts, `"_id":"own","_expiresAt":"`+b.now.Add(30*24*time.Hour).Format(time.RFC3339)+`"`),
			event(ts, `"_id":"long","_ttl":"P1Y"`),
			event(ts, `"_id":"plain"`),
		))
		require.Equal(t, http.StatusOK, b.patch(t, id, overridesBody("refused"), nil).status)
		b.setNow(b.now.Add(35 * 24 * time.Hour))
		require.ElementsMatch(t, []string{"long", "plain"}, rowIDs(b.readRows(t, id, "")), "own expired by its _expiresAt")
		b.setNow(b.now.Add(100 * 24 * time.Hour))
		require.Equal(t, []string{"long"}, rowIDs(b.readRows(t, id, "")), "plain expired by the TTL; long keeps its own P1Y")
	})

	t.Run("AllowedAgainAcceptsOverrides", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		require.Equal(t, http.StatusOK, b.patch(t, id, overridesBody("refused"), nil).status)
		require.Equal(t, http.StatusOK, b.patch(t, id, overridesBody("allowed"), nil).status)
		_, details := b.lastAudit(t, id)
		require.Equal(t, map[string]any{"before": "refused", "after": "allowed"}, details["rowOverrides"])
		answer := b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"ttl","_ttl":"P90D"`)))
		require.EqualValues(t, 1, answer["accepted"])
	})

	t.Run("BadValuesAre400AndChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		before, tag := b.getDataset(t, id)
		audits := b.auditCount(t, id)
		lake := "extensions.adobe_lakeHouse.rowExpiration.rowOverrides"
		for _, tc := range []struct {
			body  any
			field string
		}{
			{overridesBody("off"), lake},
			{overridesBody(true), lake},
			{overridesBody(nil), lake},
			{overridesBody(1e300), lake},
			{overridesBody("refused\u0000"), lake},
			{overridesBody(map[string]any{"value": "refused"}), lake},
			{"{\"extensions\":{\"adobe_lakeHouse\":{\"rowExpiration\":{\"rowOverrides\":\"ref\xffused\"}}}}", lake},
			{map[string]any{"extensions": map[string]any{"adobe_unifiedProfile": map[string]any{"rowExpiration": map[string]any{"rowOverrides": "refused"}}}},
				"extensions.adobe_unifiedProfile.rowExpiration.rowOverrides"},
		} {
			requireProblem(t, b.patch(t, id, tc.body, nil), http.StatusBadRequest, tc.field)
		}
		after, afterTag := b.getDataset(t, id)
		require.Equal(t, settled(before), settled(after))
		require.Equal(t, tag, afterTag)
		require.Equal(t, audits, b.auditCount(t, id))
	})

	t.Run("RecordDatasetTakesTheSwitch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		resp := b.patch(t, id, overridesBody("refused"), nil)
		require.Equal(t, http.StatusOK, resp.status, "records expire, so their own expiry can be refused too; body: %s", resp.body)
		doc, _ := b.getDataset(t, id)
		require.Equal(t, "refused", rowExpiration(t, doc, "adobe_lakeHouse")["rowOverrides"])
	})
}

// TestRowOverridesSwitchedDuringIngestion: a switch to refused that answers while a body streams governs every
// chunk committed after it, though its lines were read while overrides were allowed: they are refused by their line
// numbers, and the rows without an override in the same chunk are stored.
func TestRowOverridesSwitchedDuringIngestion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	pw, done := b.streamIngest(t, id)
	for i := range testChunkRows {
		_, err := fmt.Fprintln(pw, event("2026-11-01T00:00:00Z", fmt.Sprintf(`"_id":"a%03d","_ttl":"P90D"`, i)))
		require.NoError(t, err)
	}
	require.Equal(t, testChunkRows, <-b.chunks, "the first chunk, overrides and all, commits before the switch")
	require.Equal(t, http.StatusOK, b.patch(t, id, overridesBody("refused"), nil).status)
	var want []int
	for i := range testChunkRows {
		extra := fmt.Sprintf(`"_id":"b%03d"`, i)
		if i%2 == 1 {
			extra += `,"_ttl":"P90D"`
			want = append(want, testChunkRows+i+1)
		}
		_, err := fmt.Fprintln(pw, event("2026-11-01T00:00:00Z", extra))
		require.NoError(t, err)
	}
	require.NoError(t, pw.Close())
	resp := <-done
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	answer := resp.json(t)
	require.EqualValues(t, testChunkRows+testChunkRows/2, answer["accepted"])
	require.EqualValues(t, testChunkRows/2, answer["rejected"])
	require.Equal(t, want, rejectedLines(t, answer, refusedReason))
	require.Equal(t, testChunkRows+testChunkRows/2, b.storedRows(t, id))
	var overridden int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM lake_rows WHERE dataset_id = $1 AND own_expiry IS NOT NULL`, id).Scan(&overridden))
	require.Equal(t, testChunkRows, overridden, "only the rows committed before the switch keep an override")
}
