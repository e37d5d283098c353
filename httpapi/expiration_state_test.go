package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// TestExpirationFoundByDatasetIsTheOpenOne: E1 cancelled, E2 created and cancelled, E1 reopened; the dataset's id
// names E1, the open one, for a read and for a cancel, though E2 is newer.
func TestExpirationFoundByDatasetIsTheOpenOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ds := b.createDataset(t, datasetOpts{})
	e1 := b.createExpiration(t, expirationOpts{datasetID: ds})["ttlId"].(string)
	require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + e1}).status)
	e2 := b.createExpiration(t, expirationOpts{datasetID: ds})["ttlId"].(string)
	require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + e2}).status)
	resp := b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + e1, body: map[string]any{"expiry": "2032-01-01"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

	resp = b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ds})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, map[string]any{"ttlId": e1, "status": "pending"}, pick(resp.json(t), "ttlId", "status"))
	resp = b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + ds})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Equal(t, map[string]any{"ttlId": e1, "status": "cancelled"}, pick(resp.json(t), "ttlId", "status"))
}

// TestDeletingADatasetCancelsItsExpiration: with the whole quota used, deleting every scheduled dataset cancels
// each expiration in the deleting transaction (status, reason, Cancel event), which frees the quota at once.
func TestDeletingADatasetCancelsItsExpiration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := map[string]string{}
	for range testExpirationQuota {
		e := b.createExpiration(t, expirationOpts{})
		ids[e["datasetId"].(string)] = e["ttlId"].(string)
	}
	for ds := range ids {
		require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + ds}).status)
	}
	for ds, ttl := range ids {
		resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ttl})
		require.Equal(t, "cancelled", resp.json(t)["status"], "expiration of %s", ds)
		require.Contains(t, resp.json(t)["reason"], "was deleted")
		require.Equal(t, 1, countActions(t, b, ttl, "Cancel"))
		var cancelled string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT details->>'cancelledExpirationId' FROM audit_events WHERE asset_id = $1 AND action = 'Delete'`, ds).Scan(&cancelled))
		require.Equal(t, ttl, cancelled, "the dataset's Delete event names the expiration it cancelled")
	}
	resp := b.hygiene(t, request{method: http.MethodGet, path: "/quota"})
	require.Equal(t, float64(0), resp.json(t)["quotas"].([]any)[0].(map[string]any)["consumed"])
	b.createExpiration(t, expirationOpts{})
}

// TestExpirationTagIsTheService: adobe/hygiene/ttl is derived from the pending expiration. A v1 GET-then-PUT round
// trip does not store it (the tag leaves with the cancel), a v2 PATCH or a create naming it is refused, and the tag
// filter finds the datasets with a real pending expiration.
func TestExpirationTagIsTheService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sched := b.createExpiration(t, expirationOpts{expiry: "2030-12-31"})
	ds, ttl := sched["datasetId"].(string), sched["ttlId"].(string)
	plain := b.createDataset(t, datasetOpts{tags: map[string][]string{"team": {"web"}}})

	doc, _ := b.getDataset(t, ds)
	want := strconv.FormatInt(time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli(), 10)
	require.Equal(t, []any{want}, doc["tags"].(map[string]any)["adobe/hygiene/ttl"])
	resp := b.v1Update(t, http.MethodPut, "", ds, map[string]any{"name": doc["name"], "tags": doc["tags"]}, nil)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

	forged := b.createDataset(t, datasetOpts{})
	_, err := b.db.Pool.Exec(context.Background(), `UPDATE datasets SET tags = '{"adobe/hygiene/ttl":["1924992000000"]}' WHERE id = $1`, forged)
	require.NoError(t, err, "a tag stored before requests were kept from storing it")
	doc, _ = b.getDataset(t, forged)
	require.NotContains(t, doc["tags"], "adobe/hygiene/ttl", "a stored tag is never shown")

	t.Run("TheFilterFindsTheRealOne", func(t *testing.T) {
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=adobe/hygiene/ttl:*"})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Contains(t, resp.json(t), ds)
		require.NotContains(t, resp.json(t), plain)
		require.NotContains(t, resp.json(t), forged)
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=adobe/hygiene/ttl:" + want})
		require.Contains(t, resp.json(t), ds)
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=adobe/hygiene/ttl:1*"})
		require.Contains(t, resp.json(t), ds)
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=adobe/hygiene/ttl:42"})
		require.NotContains(t, resp.json(t), ds)
	})
	t.Run("V2PatchCannotForgeIt", func(t *testing.T) {
		resp := b.patch(t, plain, map[string]any{"tags": map[string]any{"adobe/hygiene/ttl": []string{"1924992000000"}}}, nil)
		requireRefusal(t, resp, http.StatusBadRequest, "read-only-field", "tags.adobe/hygiene/ttl")
	})
	t.Run("CreateCannotForgeIt", func(t *testing.T) {
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "forged",
			"tags": map[string]any{"adobe/hygiene/ttl": []string{"1924992000000"}}}})
		requireRefusal(t, resp, http.StatusBadRequest, "read-only-field", "tags.adobe/hygiene/ttl")
	})
	t.Run("V1PatchStripsIt", func(t *testing.T) {
		resp := b.v1Update(t, http.MethodPatch, "", plain, map[string]any{"tags": map[string]any{
			"team": []string{"web"}, "adobe/hygiene/ttl": []string{"1924992000000"}}}, nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		doc, _ := b.getDataset(t, plain)
		require.Equal(t, map[string]any{"team": []any{"web"}}, doc["tags"])
	})

	require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + ttl}).status)
	doc, _ = b.getDataset(t, ds)
	require.NotContains(t, doc["tags"], "adobe/hygiene/ttl", "the cancel took the tag away: the round trip stored none")
	resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=adobe/hygiene/ttl:*"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Empty(t, resp.json(t), "no dataset has a pending expiration any more")
}

// TestExpirationHistoryIsBounded: history rows are appended, never rewritten: the expiration's own row keeps its
// size however many changes it had, the history keeps the newest catalog.MaxExpirationHistory entries, and a
// listing shows history only with include=history.
func TestExpirationHistoryIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ttl := b.createExpiration(t, expirationOpts{})["ttlId"].(string)
	rowSize := func() int {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT pg_column_size(e.*) FROM dataset_expirations e WHERE id = $1`, ttl).Scan(&n))
		return n
	}
	put := func(i int) {
		resp := b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + ttl, body: map[string]any{"description": fmt.Sprintf("change %03d", i)}})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	}
	put(0)
	first := rowSize()
	for i := 1; i < catalog.MaxExpirationHistory+10; i++ {
		put(i)
	}
	require.Equal(t, first, rowSize(), "the expiration's row does not grow with its history")

	resp := b.hygiene(t, request{method: http.MethodGet, path: "/ttl/" + ttl + "?include=history"})
	history := resp.json(t)["history"].([]any)
	require.Len(t, history, catalog.MaxExpirationHistory, "the oldest entries left")
	require.Equal(t, "updated", history[len(history)-1].(map[string]any)["status"])

	resp = b.hygiene(t, request{method: http.MethodGet, path: "/ttl"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.NotContains(t, resp.json(t)["results"].([]any)[0], "history")
	resp = b.hygiene(t, request{method: http.MethodGet, path: "/ttl?include=history"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	require.Len(t, resp.json(t)["results"].([]any)[0].(map[string]any)["history"], catalog.MaxExpirationHistory)
	requireRefusal(t, b.hygiene(t, request{method: http.MethodGet, path: "/ttl?include=everything"}), http.StatusBadRequest, "invalid-parameter", "include")
}

// TestExpirationsOfADatasetAreBounded: a dataset has at most catalog.MaxExpirationsPerDataset expirations, open or
// cancelled; one more is refused naming the newest cancelled one, which may be reopened instead.
func TestExpirationsOfADatasetAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ds := b.createDataset(t, datasetOpts{})
	var last string
	for range catalog.MaxExpirationsPerDataset {
		last = b.createExpiration(t, expirationOpts{datasetID: ds})["ttlId"].(string)
		require.Equal(t, http.StatusOK, b.hygiene(t, request{method: http.MethodDelete, path: "/ttl/" + last}).status)
	}
	resp := b.hygiene(t, request{method: http.MethodPost, path: "/ttl",
		body: map[string]any{"datasetId": ds, "expiry": "2031-01-01", "displayName": "one more"}})
	p := requireRefusal(t, resp, http.StatusBadRequest, "too-many-expirations", "datasetId")
	require.Contains(t, p.Detail, last)
	resp = b.hygiene(t, request{method: http.MethodPut, path: "/ttl/" + last, body: map[string]any{"expiry": "2031-01-01"}})
	require.Equal(t, http.StatusOK, resp.status, "reopening stays possible: %s", resp.body)
}
