package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// storeMetrics is a store's metrics object in a dataset's document, nil when it has none.
func storeMetrics(doc map[string]any, store string) map[string]any {
	ext, _ := doc["extensions"].(map[string]any)
	s, _ := ext[store].(map[string]any)
	m, _ := s["metrics"].(map[string]any)
	return m
}

// TestDatasetShowsItsExpiredBacklog: GET /dataSets/{id} shows each store's expired backlog in its metrics (rows
// that arrived expired count at once; a store without any shows 0 and null), as the OpenAPI document says
// (apitest validates the answers); a listing shows none.
func TestDatasetShowsItsExpiredBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{tags: map[string][]string{"unifiedProfile": {"enabled:true"}}})
	b.ingest(t, id, ndjson(event("2025-01-15T10:00:00Z", ""), event("2025-02-15T10:00:00Z", ""),
		event("2025-03-15T10:00:00Z", ""), event(b.now.Format(time.RFC3339), "")))

	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	doc := resp.json(t)[id].(map[string]any)
	lake := storeMetrics(doc, "adobe_lakeHouse")
	require.InDelta(t, 3, lake["expiredRowCount"], 0, "the three rows of 2025 arrived expired under P12M: %v", lake)
	oldest, ok := lake["oldestExpiredAt"].(float64)
	require.True(t, ok, "oldestExpiredAt in epoch ms: %v", lake)
	// Rows that arrived expired count from their arrival (their latest ingestion: now), never later than now.
	require.LessOrEqual(t, int64(oldest), time.Now().UnixMilli())
	require.GreaterOrEqual(t, int64(oldest), b.now.UnixMilli())
	require.InDelta(t, 4, lake["rowCount"], 0)
	profile := storeMetrics(doc, "adobe_unifiedProfile")
	require.NotNil(t, profile, "the profile store has a metrics object of its own: %v", doc["extensions"])
	require.Contains(t, profile, "expiredRowCount")
	require.Contains(t, profile, "oldestExpiredAt")

	list := b.do(t, request{method: http.MethodGet, path: "/dataSets?limit=10"})
	require.Equal(t, http.StatusOK, list.status)
	listed := storeMetrics(list.json(t)[id].(map[string]any), "adobe_lakeHouse")
	require.NotContains(t, listed, "expiredRowCount", "a listing shows no backlog")
}
