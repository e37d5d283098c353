package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// explain returns the explanation of a row (GET …/rows/{rowId}/expiry, rowID already percent-encoded), which must
// answer 200.
func (b *testBundle) explain(t testing.TB, id, rowID, query string) map[string]any {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows/" + rowID + "/expiry" + query})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	return resp.json(t)
}

func TestExplainRow(t *testing.T) {
	t.Parallel()

	t.Run("SettingGraceAndNextRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t) // at 2026-11-23T10:00Z, the lake's TTL the default P12M
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2025-11-23T10:00:00Z", `"_id":"a/b"`)))
		x := b.explain(t, id, "a%2Fb", "")
		require.Equal(t, "a/b", x["_id"])
		require.Equal(t, map[string]any{"kind": "eventTime", "value": "2025-11-23T10:00:00.000Z"}, x["clock"])
		by := x["governedBy"].(map[string]any)
		require.Equal(t, "setting", by["source"])
		require.Equal(t, map[string]any{"version": 1.0, "ttlValue": "P12M", "effectiveFrom": by["setting"].(map[string]any)["effectiveFrom"], "current": true}, by["setting"])
		require.Equal(t, "2026-11-23T10:00:00.000Z", x["expiresAt"])
		require.Equal(t, true, x["expired"], "expired at exactly timestamp + P12M, as reads hide it")
		require.Empty(t, b.readRows(t, id, ""))
		require.Equal(t, "P30D", x["graceValue"])
		require.True(t, strings.HasPrefix(x["deletableAt"].(string), "2026-12-23T10:00:00."), "30 days after its ingestion: %v", x["deletableAt"])
		require.Equal(t, false, x["deletable"])
		require.Equal(t, "2026-12-27T03:00:00.000Z", x["nextRunAt"], "the first Sunday 03:00 at or after deletableAt")
		require.Empty(t, x["heldBy"])
	})

	t.Run("EarlierShorterSetting", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		setLakeTTL(t, b, id, "P1M")
		b.ingest(t, id, ndjson(event("2026-11-20T00:00:00Z", `"_id":"short"`)))
		b.setNow(time.Date(2027, 1, 10, 0, 0, 0, 0, time.UTC))
		setLakeTTL(t, b, id, "P24M")
		x := b.explain(t, id, "short", "")
		by := x["governedBy"].(map[string]any)
		require.Equal(t, "earlierSetting", by["source"], "%v", by)
		setting := by["setting"].(map[string]any)
		require.Equal(t, 2.0, setting["version"])
		require.Equal(t, "P1M", setting["ttlValue"])
		require.Equal(t, false, setting["current"])
		require.Equal(t, "2026-12-20T00:00:00.000Z", x["expiresAt"], "P1M, not the P24M in force")
		require.Equal(t, true, x["expired"])
		require.Equal(t, true, x["deletable"])
		require.Equal(t, "2027-01-10T03:00:00.000Z", x["nextRunAt"], "already deletable: the next run")
	})

	t.Run("OverrideAndNeverExpires", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, postgres.NewPolicyService(b.db).SetLimits(context.Background(), b.org,
			catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer},
			catalog.Limits{Min: mustPeriod(t, "P30D"), Default: mustPeriod(t, "P12M")}))
		id := b.createDataset(t, datasetOpts{})
		// The same instant from either field: only what the store records beside it tells them apart.
		b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"own","_expiresAt":"2027-01-15T00:00:00Z"`),
			event("2026-11-01T00:00:00Z", `"_id":"ttl","_ttl":"P75D"`),
			event("2026-11-01T00:00:00Z", `"_id":"never","_ttl":-1`)))
		x := b.explain(t, id, "own", "")
		by := x["governedBy"].(map[string]any)
		require.Equal(t, "rowExpiresAt", by["source"], "%v", by)
		require.Equal(t, "the row's own _expiresAt, which applies while a TTL is in force: setting 1 of 1", by["message"])
		require.Equal(t, "2027-01-15T00:00:00.000Z", x["expiresAt"])
		require.Equal(t, "2027-01-15T00:00:00.000Z", x["ownExpiresAt"])
		require.Equal(t, "_expiresAt", x["ownExpiryField"])
		require.NotContains(t, x, "ownTtlSeconds")
		x = b.explain(t, id, "ttl", "")
		by = x["governedBy"].(map[string]any)
		require.Equal(t, "rowTtl", by["source"], "%v", by)
		require.Equal(t, "the row's own _ttl, 6480000 seconds after its clock, which applies while a TTL is in force: setting 1 of 1", by["message"])
		require.Equal(t, "2027-01-15T00:00:00.000Z", x["expiresAt"])
		require.Equal(t, "2027-01-15T00:00:00.000Z", x["ownExpiresAt"])
		require.Equal(t, "_ttl", x["ownExpiryField"])
		require.Equal(t, 6480000.0, x["ownTtlSeconds"], "75 days")
		x = b.explain(t, id, "never", "")
		require.NotContains(t, x, "ownExpiryField", "_ttl: -1 is no own expiry")
		require.Equal(t, "neverExpires", x["governedBy"].(map[string]any)["source"])
		require.Nil(t, x["expiresAt"])
		require.Nil(t, x["deletableAt"])
		require.Nil(t, x["nextRunAt"])
	})

	// A row stored before the service recorded which field set its own expiry (migration 0020 adds the column
	// without a default, so such rows hold NULL) is explained as an override of unknown field, not guessed.
	t.Run("OverrideStoredBeforeTheFieldWasRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"old","_ttl":"P75D"`)))
		tag, err := b.db.Pool.Exec(context.Background(), `UPDATE lake_rows SET own_expiry_source = NULL WHERE dataset_id = $1`, id)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		x := b.explain(t, id, "old", "")
		by := x["governedBy"].(map[string]any)
		require.Equal(t, "override", by["source"], "%v", by)
		require.Contains(t, by["message"], "stored before the service recorded which")
		require.Equal(t, "unknown", x["ownExpiryField"])
		require.Equal(t, "2027-01-15T00:00:00.000Z", x["ownExpiresAt"])
		require.NotContains(t, x, "ownTtlSeconds")
	})

	// Each write of a record's _id stores the field its own line sent: a rewrite replaces the field with the row.
	t.Run("RecordRewritesCarryTheirOwnField", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		setLakeTTL(t, b, id, "P12M")
		source := func() string { return b.explain(t, id, "rec", "")["governedBy"].(map[string]any)["source"].(string) }
		b.ingest(t, id, ndjson(`{"_id":"rec","_ttl":"P30D"}`))
		x := b.explain(t, id, "rec", "")
		require.Equal(t, "rowTtl", x["governedBy"].(map[string]any)["source"])
		require.Equal(t, 2592000.0, x["ownTtlSeconds"], "30 days after the write")
		b.ingest(t, id, ndjson(`{"_id":"rec","_expiresAt":"2027-06-01T00:00:00Z"}`))
		require.Equal(t, "rowExpiresAt", source())
		b.ingest(t, id, ndjson(`{"_id":"rec"}`))
		require.Equal(t, "setting", source())
		require.NotContains(t, b.explain(t, id, "rec", ""), "ownExpiryField")
	})

	t.Run("HeldRowHasNoRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2025-01-01T00:00:00Z", `"_id":"old"`)))
		hold := b.placeHold(t, id, nil)
		x := b.explain(t, id, "old", "")
		require.Equal(t, true, x["expired"])
		held := x["heldBy"].([]any)
		require.Len(t, held, 1)
		require.Equal(t, hold["id"], held[0].(map[string]any)["id"])
		require.Equal(t, "case 2026-114", held[0].(map[string]any)["reference"])
		require.Nil(t, x["nextRunAt"], "no run deletes a held row")
	})

	t.Run("RecordClockAndNullTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{behavior: "record"})
		b.ingest(t, id, ndjson(`{"_id":"rec"}`))
		x := b.explain(t, id, "rec", "")
		require.Equal(t, "lastWrite", x["clock"].(map[string]any)["kind"])
		require.Equal(t, x["ingestedAt"], x["clock"].(map[string]any)["value"])
		require.Equal(t, "noTtl", x["governedBy"].(map[string]any)["source"])
		require.Nil(t, x["expiresAt"])
		require.Equal(t, false, x["expired"])
	})

	t.Run("ProfileStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{tags: map[string][]string{"unifiedProfile": {"enabled:true"}}})
		b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"p"`), event("2026-11-01T00:00:00Z", `"_id":"ttl","_ttl":"P75D"`)))
		x := b.explain(t, id, "p", "?store=adobe_unifiedProfile")
		require.Equal(t, "adobe_unifiedProfile", x["store"])
		require.Equal(t, "P0D", x["graceValue"])
		x = b.explain(t, id, "ttl", "?store=adobe_unifiedProfile")
		require.Equal(t, "rowTtl", x["governedBy"].(map[string]any)["source"], "the profile store records the field too")
		require.Equal(t, 6480000.0, x["ownTtlSeconds"])
	})
}

// A missing row, a row of another org's dataset and a deleted row answer 404, as the row routes do.
func TestExplainRowNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"secret"`), event("2026-11-01T00:00:00Z", `"_id":"gone"`)))
	explainPath := "/dataSets/" + id + "/rows/"
	missing := b.do(t, request{method: http.MethodGet, path: explainPath + "nope/expiry"})
	require.Equal(t, http.StatusNotFound, missing.status)
	deleted := b.do(t, request{method: http.MethodDelete, path: explainPath + "nope"})
	require.Equal(t, deleted.problem(t).Type, missing.problem(t).Type, "the same problem as the row routes")
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: explainPath + "gone"}).status)
	require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodGet, path: explainPath + "gone/expiry"}).status)
	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	require.Equal(t, http.StatusNotFound, other.do(t, request{method: http.MethodGet, path: explainPath + "secret/expiry"}).status)
	b.explain(t, id, "secret", "")
}

// Hostile row ids and a bad store are a 400 naming the parameter, never a 500.
func TestExplainRowHostileInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	for _, tc := range []struct{ name, path, field string }{
		{"NUL", "a%00b", "rowId"},
		{"InvalidUTF8", "a%FFb", "rowId"},
		{"OverLength", strings.Repeat("x", catalog.MaxRowIDLength+1), "rowId"},
		{"OverLengthEncoded", strings.Repeat("%C3%A9", catalog.MaxRowIDLength/2+1), "rowId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows/" + tc.path + "/expiry"})
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			require.Equal(t, tc.field, resp.problem(t).Field)
		})
	}
	// Go's HTTP server refuses a request line that is not valid percent-encoding before any route sees it.
	for name, rowID := range map[string]string{"BadPercentEncoding": "a%ZZb", "TruncatedPercentEncoding": "a%2"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			_, err = fmt.Fprintf(conn, "GET /dataSets/%s/rows/%s/expiry HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nx-api-key: k\r\nx-gw-ims-org-id: %s\r\nConnection: close\r\n\r\n",
				id, rowID, b.token, b.org)
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		})
	}
	t.Run("BadStore", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows/x/expiry?store=nowhere"})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		require.Equal(t, "store", resp.problem(t).Field)
	})
	t.Run("LongestIDIsNotFound", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows/" + strings.Repeat("x", catalog.MaxRowIDLength) + "/expiry"})
		require.Equal(t, http.StatusNotFound, resp.status, "body: %s", resp.body)
	})
}

func setLakeTTL(t *testing.T, b *testBundle, id string, v any) {
	t.Helper()
	resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": v}), nil)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
}
