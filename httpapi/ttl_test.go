package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ttlBody is a PATCH v2 body setting the ttlValue of each given store (nil sets null).
func ttlBody(values map[string]any) map[string]any {
	ext := map[string]any{}
	for store, v := range values {
		ext[store] = map[string]any{"rowExpiration": map[string]any{"ttlValue": v}}
	}
	return map[string]any{"extensions": ext}
}

func (b *testBundle) patch(t testing.TB, id string, body any, headers map[string]string) *response {
	t.Helper()
	return b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: body, headers: headers})
}

func TestNewDatasetGetsDefaultTTL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		managedBy, lake, profile string
	}{
		{"CUSTOMER", "P12M", "P12M"},
		{"SYSTEM", "P13M", "P90D"},
	} {
		id := b.createDataset(t, datasetOpts{managedBy: tc.managedBy})
		doc, _ := b.getDataset(t, id)
		for store, want := range map[string]string{"adobe_lakeHouse": tc.lake, "adobe_unifiedProfile": tc.profile} {
			re := rowExpiration(t, doc, store)
			require.Equal(t, want, re["ttlValue"], "%s %s", tc.managedBy, store)
			require.Equal(t, "default", re["valueStatus"])
			require.Equal(t, "service", re["setBy"])
			require.IsType(t, float64(0), re["updated"], "updated is epoch ms as a number")
		}
	}
	record := b.createDataset(t, datasetOpts{behavior: "record"})
	doc, _ := b.getDataset(t, record)
	require.Nil(t, rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"], "record datasets start without a TTL")
}

func TestGetTTLLimits(t *testing.T) {
	t.Parallel()

	t.Run("ShowsBothStoresLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{name: "limits"})
		resp := b.do(t, request{method: http.MethodGet, path: "/data/foundation/catalog/ttl/" + id})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		doc := resp.json(t)[id].(map[string]any)
		require.Equal(t, "limits", doc["name"])
		require.Equal(t, map[string]any{
			"adobe_lakeHouse":      map[string]any{"rowExpiration": map[string]any{"defaultValue": "P12M", "maxValue": "P10Y", "minValue": "P30D", "rowOverrides": "allowed"}},
			"adobe_unifiedProfile": map[string]any{"rowExpiration": map[string]any{"defaultValue": "P12M", "maxValue": "P10Y", "minValue": "P1D"}},
		}, doc["extensions"])
	})

	t.Run("SystemLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{managedBy: "SYSTEM"})
		doc := b.do(t, request{method: http.MethodGet, path: "/ttl/" + id}).json(t)[id].(map[string]any)
		require.Equal(t, map[string]any{"defaultValue": "P13M", "maxValue": "P13M", "minValue": "P30D", "rowOverrides": "allowed"}, rowExpiration(t, doc, "adobe_lakeHouse"))
		require.Equal(t, map[string]any{"defaultValue": "P90D", "maxValue": "P90D", "minValue": "P1D"}, rowExpiration(t, doc, "adobe_unifiedProfile"))
	})

	t.Run("UnknownIs404", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodGet, path: "/ttl/5ba9452f7de80408007fc52a"}).status)
		require.Equal(t, http.StatusBadRequest, b.do(t, request{method: http.MethodGet, path: "/ttl/xyz"}).status)
	})
}

func TestPatchTTLAccepts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The seed's values, plus the lake's limits themselves (both bounds are inclusive) and a week-based period.
	for _, value := range []any{"P3M", "P6M", "P12M", "P30D", "P1Y", nil, "P10Y", "P1M", "P5W", "P1Y2M3D"} {
		t.Run(fmt.Sprint(value), func(t *testing.T) {
			t.Parallel()
			id := b.createDataset(t, datasetOpts{})
			before := b.auditCount(t, id)
			resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": value}), nil)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			doc := resp.json(t)[id].(map[string]any)
			re := rowExpiration(t, doc, "adobe_lakeHouse")
			require.Equal(t, value, re["ttlValue"])
			require.Equal(t, "custom", re["valueStatus"])
			require.Equal(t, "user", re["setBy"])
			require.Equal(t, "1.0.1", doc["version"])
			stored, etag := b.getDataset(t, id)
			require.Equal(t, value, rowExpiration(t, stored, "adobe_lakeHouse")["ttlValue"])
			require.Equal(t, `"1.0.1"`, etag)
			require.Equal(t, before+1, b.auditCount(t, id))
		})
	}
}

func TestPatchTTLRejects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lake := "extensions.adobe_lakeHouse.rowExpiration.ttlValue"
	cases := []struct {
		name  string
		body  any
		field string
		says  string
	}{
		{"Fraction", ttlBody(map[string]any{"adobe_lakeHouse": "P1.5M"}), lake, "fraction"},
		{"Negative", ttlBody(map[string]any{"adobe_lakeHouse": "-P1M"}), lake, "P1M"},
		{"NegativeUnit", ttlBody(map[string]any{"adobe_lakeHouse": "P-1D"}), lake, "P-1D"},
		{"Zero", ttlBody(map[string]any{"adobe_lakeHouse": "P0D"}), lake, "positive"},
		{"EmptyP", ttlBody(map[string]any{"adobe_lakeHouse": "P"}), lake, `"P"`},
		{"EmptyPT", ttlBody(map[string]any{"adobe_lakeHouse": "PT"}), lake, "time"},
		{"Lowercase", ttlBody(map[string]any{"adobe_lakeHouse": "p3m"}), lake, "uppercase"},
		{"TimePart", ttlBody(map[string]any{"adobe_lakeHouse": "PT12H"}), lake, "time"},
		{"DuplicateUnit", ttlBody(map[string]any{"adobe_lakeHouse": "P1D2D"}), lake, "P1D2D"},
		{"OutOfOrder", ttlBody(map[string]any{"adobe_lakeHouse": "P1M1Y"}), lake, "P1M1Y"},
		{"NotAString", ttlBody(map[string]any{"adobe_lakeHouse": 90}), lake, "a number"},
		{"Text", ttlBody(map[string]any{"adobe_lakeHouse": "3 months"}), lake, "3 months"},
		{"EmptyString", ttlBody(map[string]any{"adobe_lakeHouse": ""}), lake, "empty"},
		{"BelowMin", ttlBody(map[string]any{"adobe_lakeHouse": "P29D"}), lake, "below minValue P30D"},
		{"BelowMinInWeeks", ttlBody(map[string]any{"adobe_lakeHouse": "P4W"}), lake, "below minValue P30D"},
		{"AboveMax", ttlBody(map[string]any{"adobe_lakeHouse": "P11Y"}), lake, "above maxValue P10Y"},
		{"AboveMaxInDays", ttlBody(map[string]any{"adobe_lakeHouse": "P3601D"}), lake, "above maxValue P10Y"},
		{"TooLargeToCompute", ttlBody(map[string]any{"adobe_lakeHouse": "P99999999999999999999Y"}), lake, "P1000Y"},
		{"ProfileLongerThanLake", ttlBody(map[string]any{"adobe_lakeHouse": "P3M", "adobe_unifiedProfile": "P6M"}),
			"extensions.adobe_unifiedProfile.rowExpiration.ttlValue", "P6M is longer than the data lake ttlValue P3M"},
		{"ProfileNullWhileLakeSet", ttlBody(map[string]any{"adobe_unifiedProfile": nil}),
			"extensions.adobe_unifiedProfile.rowExpiration.ttlValue", "null is longer than the data lake ttlValue P12M"},
		{"MissingTTLValue", map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{}}}}, lake, "required"},
		{"RowExpirationNotObject", map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": "P3M"}}},
			"extensions.adobe_lakeHouse.rowExpiration", "object"},
		{"Name", map[string]any{"name": "renamed"}, "name", "cannot be changed"},
		{"ImsOrg", map[string]any{"imsOrg": "x"}, "imsOrg", "cannot be changed"},
		{"SandboxName", map[string]any{"sandboxName": "dev"}, "sandboxName", "cannot be changed"},
		{"Created", map[string]any{"created": 1}, "created", "set by the service"},
		{"Updated", map[string]any{"updated": 1}, "updated", "set by the service"},
		{"Version", map[string]any{"version": "2.0.0"}, "version", "set by the service"},
		{"ManagedBy", map[string]any{"classification": map[string]any{"managedBy": "SYSTEM"}}, "classification.managedBy", "fixed"},
		{"UnknownTopLevel", map[string]any{"colour": "red"}, "colour", "not a dataset field"},
		{"Metrics", map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"metrics": map[string]any{"rowCount": 1}}}},
			"extensions.adobe_lakeHouse.metrics", "service"},
	}
	for _, owned := range []string{"valueStatus", "setBy", "updated", "lastCompleted", "nextRun", "defaultValue", "minValue", "maxValue"} {
		cases = append(cases, struct {
			name  string
			body  any
			field string
			says  string
		}{"Owned" + owned, map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P3M", owned: "x"}}}},
			"extensions.adobe_lakeHouse.rowExpiration." + owned, "set by the service"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := b.createDataset(t, datasetOpts{})
			before, beforeTag := b.getDataset(t, id)
			events := b.auditCount(t, id)
			resp := b.patch(t, id, tc.body, nil)
			require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
			p := resp.problem(t)
			require.Equal(t, tc.field, p.Field)
			require.Contains(t, p.Detail, tc.says)
			after, afterTag := b.getDataset(t, id)
			require.Equal(t, settled(before), settled(after), "a rejected PATCH changes nothing")
			require.Equal(t, beforeTag, afterTag)
			require.Equal(t, events, b.auditCount(t, id), "a rejected PATCH writes no audit event")
		})
	}
}

func TestPatchSystemDatasetLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{managedBy: "SYSTEM"})
	require.Equal(t, http.StatusBadRequest, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P14M"}), nil).status)
	resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": nil}), nil)
	require.Equal(t, http.StatusBadRequest, resp.status)
	require.Contains(t, resp.problem(t).Detail, "SYSTEM")
	require.Equal(t, http.StatusOK, b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P6M"}), nil).status)
}

func TestCrossStoreRule(t *testing.T) {
	t.Parallel()

	t.Run("ShorteningLakeLowersProfile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		doc := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P3M"}), nil).json(t)[id].(map[string]any)
		for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
			re := rowExpiration(t, doc, store)
			require.Equal(t, "P3M", re["ttlValue"], store)
			require.Equal(t, "custom", re["valueStatus"], store)
			require.Equal(t, "user", re["setBy"], store)
		}
		doc = b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P6M"}), nil).json(t)[id].(map[string]any)
		require.Equal(t, "P6M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, "P3M", rowExpiration(t, doc, "adobe_unifiedProfile")["ttlValue"], "raising the lake leaves the profile")
	})

	t.Run("BothStoresAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P6M", "adobe_unifiedProfile": "P30D"}), nil)
		require.Equal(t, http.StatusOK, resp.status)
		doc := resp.json(t)[id].(map[string]any)
		require.Equal(t, "P6M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, "P30D", rowExpiration(t, doc, "adobe_unifiedProfile")["ttlValue"])
	})

	t.Run("ProfileOnlyLeavesLake", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		doc := b.patch(t, id, ttlBody(map[string]any{"adobe_unifiedProfile": "P1D"}), nil).json(t)[id].(map[string]any)
		require.Equal(t, "P12M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
		require.Equal(t, "default", rowExpiration(t, doc, "adobe_lakeHouse")["valueStatus"])
		require.Equal(t, "P1D", rowExpiration(t, doc, "adobe_unifiedProfile")["ttlValue"])
	})

	t.Run("NullLakeIsLongest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": nil, "adobe_unifiedProfile": nil}), nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		doc := resp.json(t)[id].(map[string]any)
		require.Nil(t, rowExpiration(t, doc, "adobe_unifiedProfile")["ttlValue"])
		resp = b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P1Y"}), nil)
		doc = resp.json(t)[id].(map[string]any)
		require.Equal(t, "P1Y", rowExpiration(t, doc, "adobe_unifiedProfile")["ttlValue"], "a null profile is lowered to a new finite lake TTL")
	})
}

func TestPatchAuditEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "audited"})
	resp := b.patch(t, id, ttlBody(map[string]any{"adobe_lakeHouse": "P3M"}), map[string]string{"x-request-id": "req-ttl-1"})
	require.Equal(t, http.StatusOK, resp.status)
	var action, assetName, user, client, requestID, status string
	var details map[string]any
	err := b.db.Pool.QueryRow(context.Background(), `
		SELECT action, asset_name, user_id, client_id, request_id, status, details FROM audit_events
		WHERE org_id = $1 AND asset_id = $2 AND action = 'Update'`, b.org, id).
		Scan(&action, &assetName, &user, &client, &requestID, &status, &details)
	require.NoError(t, err)
	require.Equal(t, "audited", assetName)
	require.Equal(t, "tester@example.com", user)
	require.Equal(t, "test-client", client)
	require.Equal(t, "req-ttl-1", requestID)
	require.Equal(t, "Success", status)
	stores := details["rowExpiration"].(map[string]any)
	lake := stores["adobe_lakeHouse"].(map[string]any)
	require.Equal(t, "P12M", lake["before"].(map[string]any)["ttlValue"])
	require.Equal(t, "default", lake["before"].(map[string]any)["valueStatus"])
	require.Equal(t, "P3M", lake["after"].(map[string]any)["ttlValue"])
	profile := stores["adobe_unifiedProfile"].(map[string]any)
	require.Equal(t, "P3M", profile["after"].(map[string]any)["ttlValue"], "the lowered profile is in the event too")
}

func TestPatchDeepMerge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{tags: map[string][]string{"team": {"a", "b"}, "keep": {"x"}}})
	resp := b.patch(t, id, map[string]any{
		"description": "new",
		"tags":        map[string]any{"team": []string{"c"}, "gone": nil},
		"extensions": map[string]any{
			"acme_custom":     map[string]any{"nested": map[string]any{"level": 1}},
			"adobe_lakeHouse": map[string]any{"note": "kept beside rowExpiration"},
		},
	}, nil)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	resp = b.patch(t, id, map[string]any{"extensions": map[string]any{"acme_custom": map[string]any{"nested": map[string]any{"other": true}, "flag": nil}}}, nil)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc, etag := b.getDataset(t, id)
	require.Equal(t, `"1.0.2"`, etag)
	require.Equal(t, "new", doc["description"])
	require.Equal(t, map[string]any{"team": []any{"c"}, "keep": []any{"x"}}, doc["tags"], "an array replaces the old one whole")
	ext := doc["extensions"].(map[string]any)
	require.Equal(t, map[string]any{"nested": map[string]any{"level": json.Number("1"), "other": true}, "flag": nil}, normalizeNumbers(ext["acme_custom"]))
	lake := ext["adobe_lakeHouse"].(map[string]any)
	require.Equal(t, "kept beside rowExpiration", lake["note"])
	require.Equal(t, "P12M", lake["rowExpiration"].(map[string]any)["ttlValue"])

	resp = b.patch(t, id, map[string]any{"description": nil}, nil)
	require.Equal(t, http.StatusOK, resp.status)
	doc, _ = b.getDataset(t, id)
	require.NotContains(t, doc, "description")
}

// normalizeNumbers turns float64 values into json.Number, so documents decoded by different means compare equal.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalizeNumbers(e)
		}
		return out
	case float64:
		return json.Number(fmt.Sprint(x))
	}
	return v
}

func TestPatchIfMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	_, etag := b.getDataset(t, id)
	require.Equal(t, http.StatusOK, b.patch(t, id, map[string]any{"description": "one"}, map[string]string{"If-Match": etag}).status)
	stale := b.patch(t, id, map[string]any{"description": "two"}, map[string]string{"If-Match": etag})
	require.Equal(t, http.StatusPreconditionFailed, stale.status)
	require.Equal(t, "If-Match", stale.problem(t).Field)
	doc, current := b.getDataset(t, id)
	require.Equal(t, "one", doc["description"])
	require.Equal(t, http.StatusOK, b.patch(t, id, map[string]any{"description": "three"}, map[string]string{"If-Match": current}).status)
	require.Equal(t, http.StatusOK, b.patch(t, id, map[string]any{"description": "four"}, map[string]string{"If-Match": "*"}).status)
	doc, _ = b.getDataset(t, id)
	require.Equal(t, "four", doc["description"])
	require.Equal(t, "1.0.3", doc["version"])
}

func TestConcurrentPatchesLoseNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	const writers = 8
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := map[string]any{"tags": map[string]any{fmt.Sprintf("t%d", i): []string{"v"}}}
			if i == 0 {
				body = ttlBody(map[string]any{"adobe_lakeHouse": "P3M"})
			}
			resp := b.patch(t, id, body, nil)
			if resp.status != http.StatusOK {
				t.Errorf("writer %d: %d %s", i, resp.status, resp.body)
			}
		}()
	}
	wg.Wait()
	doc, _ := b.getDataset(t, id)
	require.Equal(t, fmt.Sprintf("1.0.%d", writers), doc["version"])
	tags := doc["tags"].(map[string]any)
	for i := 1; i < writers; i++ {
		require.Contains(t, tags, fmt.Sprintf("t%d", i))
	}
	require.Equal(t, "P3M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"])
	require.Equal(t, writers+1, b.auditCount(t, id))
}

func TestTTLPreview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setNow(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	id := b.createDataset(t, datasetOpts{})
	var lines []string
	for m := 1; m <= 24; m++ {
		lines = append(lines, event(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).AddDate(0, -m, 0).Format(time.RFC3339), fmt.Sprintf(`"_id":"m%02d"`, m)))
	}
	b.ingest(t, id, ndjson(lines...))
	preview := func(q string) map[string]any {
		resp := b.do(t, request{method: http.MethodGet, path: "/ttl/" + id + "/preview" + q})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		return resp.json(t)
	}
	current := preview("")
	require.Equal(t, "P12M", current["ttlValue"])
	require.EqualValues(t, 13, current["rowsToDelete"], "rows 12 to 24 months old, under P12M")
	require.EqualValues(t, 24, current["rowCount"])
	require.EqualValues(t, 22, preview("?ttlValue=P3M")["rowsToDelete"])
	require.EqualValues(t, 13, preview("?ttlValue=null")["rowsToDelete"], "already expired rows stay expired")
	require.EqualValues(t, 13, preview("?ttlValue=P2Y")["rowsToDelete"], "lengthening does not resurrect")
	buckets := current["distribution"].(map[string]any)["buckets"].([]any)
	require.Len(t, buckets, 24)
	require.Equal(t, map[string]any{"month": "2026-10", "rows": float64(1)}, buckets[0])
	doc, _ := b.getDataset(t, id)
	require.Equal(t, "P12M", rowExpiration(t, doc, "adobe_lakeHouse")["ttlValue"], "a preview changes nothing")

	for _, q := range []string{"?ttlValue=P1.5M", "?ttlValue=p3m", "?store=nope"} {
		require.Equal(t, http.StatusBadRequest, b.do(t, request{method: http.MethodGet, path: "/ttl/" + id + "/preview" + q}).status, q)
	}
	record := b.createDataset(t, datasetOpts{behavior: "record"})
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/ttl/" + record + "/preview"}).status, "records expire, so they have previews")
	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	require.Equal(t, http.StatusNotFound, other.do(t, request{method: http.MethodGet, path: "/ttl/" + id + "/preview"}).status)
}
