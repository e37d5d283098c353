package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

func TestCreateDataset(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsReferenceAndLocation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: map[string]any{
			"name": "clicks", "description": "web clicks", "tags": map[string]any{"team": []string{"web"}},
			"schemaRef": map[string]any{"id": "https://ns.adobe.com/acme/schemas/1", "contentType": "application/vnd.adobe.xed+json;version=1"},
		}})
		require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
		var refs []string
		require.NoError(t, json.Unmarshal(resp.body, &refs))
		require.Len(t, refs, 1)
		id := strings.TrimPrefix(refs[0], "@/dataSets/")
		require.Regexp(t, `^[0-9a-f]{24}$`, id)
		require.Equal(t, "/dataSets/"+id, resp.header.Get("Location"))

		doc, etag := b.getDataset(t, id)
		require.Equal(t, `"1.0.0"`, etag)
		require.Equal(t, "clicks", doc["name"])
		require.Equal(t, "web clicks", doc["description"])
		require.Equal(t, b.org, doc["imsOrg"])
		require.Equal(t, "prod", doc["sandboxName"])
		require.Equal(t, "1.0.0", doc["version"])
		require.Equal(t, "tester@example.com", doc["createdUser"])
		require.Equal(t, "test-client", doc["createdClient"])
		require.Greater(t, doc["created"], float64(b.now.UnixMilli()))
		require.Equal(t, doc["created"], doc["updated"])
		require.Equal(t, map[string]any{"dataBehavior": "time-series", "managedBy": "CUSTOMER"}, doc["classification"])
		require.Equal(t, map[string]any{"team": []any{"web"}}, doc["tags"])
		require.Equal(t, 1, b.auditCount(t, id))
	})

	t.Run("UnderAdobePrefixAndLowercasePath", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, request{method: http.MethodPost, path: "/data/foundation/catalog/datasets", body: map[string]any{"name": "x"}})
		require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
		require.True(t, strings.HasPrefix(resp.header.Get("Location"), "/data/foundation/catalog/dataSets/"))
		id := strings.TrimPrefix(resp.header.Get("Location"), "/data/foundation/catalog/dataSets/")
		for _, path := range []string{"/dataSets/", "/datasets/", "/data/foundation/catalog/dataSets/", "/data/foundation/catalog/datasets/"} {
			got := b.do(t, request{method: http.MethodGet, path: path + id})
			require.Equal(t, http.StatusOK, got.status, path)
		}
	})

	t.Run("DuplicateNameConflicts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.createDataset(t, datasetOpts{name: "same"})
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "same"}})
		require.Equal(t, http.StatusConflict, resp.status)
		require.Contains(t, resp.problem(t).Detail, `"same"`)
		// Another sandbox may reuse the name.
		b.createDataset(t, datasetOpts{name: "same", headers: map[string]string{"x-sandbox-name": "dev"}})
	})

	t.Run("DeletedNameIsFree", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{name: "reused"})
		require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id}).status)
		b.createDataset(t, datasetOpts{name: "reused"})
	})

	t.Run("RejectsBadBodies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cases := []struct {
			name   string
			body   any
			status int
			field  string
		}{
			{"MissingName", map[string]any{"description": "x"}, 400, "name"},
			{"EmptyName", map[string]any{"name": ""}, 400, "name"},
			{"NameNotString", map[string]any{"name": 12}, 400, "name"},
			{"TagsNotObject", map[string]any{"name": "a", "tags": []string{"x"}}, 400, "tags"},
			{"TagValueNotString", map[string]any{"name": "a", "tags": map[string]any{"t": []any{1}}}, 400, "tags.t[0]"},
			{"BadDataBehavior", map[string]any{"name": "a", "classification": map[string]any{"dataBehavior": "events"}}, 400, "classification.dataBehavior"},
			{"BadManagedBy", map[string]any{"name": "a", "classification": map[string]any{"managedBy": "ME"}}, 400, "classification.managedBy"},
			{"UnknownField", map[string]any{"name": "a", "colour": "red"}, 400, "colour"},
			{"ServiceOwnedField", map[string]any{"name": "a", "version": "9.9.9"}, 400, "version"},
			{"MalformedJSON", `{"name": "a"`, 400, "body"},
			{"TrailingData", `{"name": "a"} {}`, 400, "body"},
			{"NotAnObject", `["a"]`, 400, "body"},
			{"Empty", ``, 400, "body"},
		}
		for _, tc := range cases {
			resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: tc.body})
			require.Equal(t, tc.status, resp.status, "%s: %s", tc.name, resp.body)
			p := resp.problem(t)
			require.Equal(t, tc.field, p.Field, tc.name)
			require.NotEmpty(t, p.Detail, tc.name)
		}
		list := b.do(t, request{method: http.MethodGet, path: "/dataSets"})
		require.JSONEq(t, `{}`, string(list.body), "a rejected create must not leave a dataset")
	})

	t.Run("ContentTypeChecked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		missing := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: `{"name":"a"}`, headers: map[string]string{"Content-Type": ""}})
		require.Equal(t, http.StatusBadRequest, missing.status)
		require.Contains(t, missing.problem(t).Detail, "A valid content-type must be specified")
		wrong := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: `{"name":"a"}`, headers: map[string]string{"Content-Type": "text/plain"}})
		require.Equal(t, http.StatusUnsupportedMediaType, wrong.status)
		require.Contains(t, wrong.problem(t).Detail, "A valid content-type must be specified")
		withCharset := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: `{"name":"a"}`, headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}})
		require.Equal(t, http.StatusCreated, withCharset.status)
	})

	t.Run("BodyOverOneMiBRejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		big := `{"name":"a","description":"` + strings.Repeat("x", 1<<20) + `"}`
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: big})
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.status)
		require.Equal(t, "too-large", resp.problem(t).Type)
	})
}

func TestGetDataset(t *testing.T) {
	t.Parallel()

	t.Run("MalformedIDIs400", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range []string{"abc", "5BA9452F7DE80408007FC52A", "5ba9452f7de80408007fc52a0", "zzzzzzzzzzzzzzzzzzzzzzzz"} {
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
			require.Equal(t, http.StatusBadRequest, resp.status, id)
			require.Equal(t, "id", resp.problem(t).Field)
		}
	})

	t.Run("UnknownIDIs404", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/5ba9452f7de80408007fc52a"})
		require.Equal(t, http.StatusNotFound, resp.status)
		require.Equal(t, catalog.ENOTFOUND, resp.problem(t).Type)
	})

	t.Run("PropertiesProjection", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{name: "proj"})
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "?properties=name,version,nosuch"})
		require.Equal(t, http.StatusOK, resp.status)
		require.JSONEq(t, `{"`+id+`": {"name": "proj", "version": "1.0.0"}}`, string(resp.body))
		require.Equal(t, `"1.0.0"`, resp.header.Get("E-Tag"))
	})

	t.Run("EmptyParameterMeansAbsent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "?properties=&unknown=1"})
		require.Equal(t, http.StatusOK, resp.status)
		doc := resp.json(t)[id].(map[string]any)
		require.Contains(t, doc, "extensions")
	})
}

func TestListDatasets(t *testing.T) {
	t.Parallel()

	t.Run("KeyedByIDInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		idB := b.createDataset(t, datasetOpts{name: "b"})
		idA := b.createDataset(t, datasetOpts{name: "a"})
		idC := b.createDataset(t, datasetOpts{name: "c"})
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=desc:name"})
		require.Equal(t, http.StatusOK, resp.status)
		require.Equal(t, []string{idC, idB, idA}, keysInOrder(t, resp.body))
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=name&limit=2&start=1"})
		require.Equal(t, []string{idB, idC}, keysInOrder(t, resp.body))
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=asc:created"})
		require.Equal(t, []string{idB, idA, idC}, keysInOrder(t, resp.body))
	})

	t.Run("LimitOutOfRangeIs400", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, limit := range []string{"0", "-1", "abc", "101", "1.5"} {
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?limit=" + limit})
			require.Equal(t, http.StatusBadRequest, resp.status, limit)
			p := resp.problem(t)
			require.Equal(t, "limit", p.Field)
			require.Contains(t, p.Detail, "from 1 to 100")
		}
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?start=-3"})
		require.Equal(t, http.StatusBadRequest, resp.status)
	})

	t.Run("DefaultLimitIsTwenty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 21 {
			b.createDataset(t, datasetOpts{})
		}
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets"})
		require.Len(t, keysInOrder(t, resp.body), 20)
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?limit=&start="})
		require.Len(t, keysInOrder(t, resp.body), 20)
	})

	t.Run("UnknownOrderByIs400", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=desc:password"})
		require.Equal(t, http.StatusBadRequest, resp.status)
		p := resp.problem(t)
		require.Equal(t, "orderBy", p.Field)
		require.Contains(t, p.Detail, "password")
	})

	t.Run("NameFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		idA := b.createDataset(t, datasetOpts{name: "alpha"})
		idB := b.createDataset(t, datasetOpts{name: "beta"})
		idG := b.createDataset(t, datasetOpts{name: "gamma"})
		got := func(q string) []string {
			return keysInOrder(t, b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=name&" + q}).body)
		}
		require.Equal(t, []string{idA}, got("name=alpha"))
		require.Equal(t, []string{idA, idG}, got("name=alpha,gamma"))
		require.Equal(t, []string{idB}, got("name=!alpha,gamma"))
		require.Equal(t, []string{idA, idB, idG}, got("name="))
		require.Empty(t, got("name=alp"))
	})

	t.Run("NameContains", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		idA := b.createDataset(t, datasetOpts{name: "Web-Clicks"})
		idB := b.createDataset(t, datasetOpts{name: "app-web_50%"})
		b.createDataset(t, datasetOpts{name: "orders"})
		got := func(q string) []string {
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=name&" + q})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			return keysInOrder(t, resp.body)
		}
		require.Equal(t, []string{idA, idB}, got("property=name~WEB"))
		require.Equal(t, []string{idB}, got("property=name~_50%25"), "% and _ are matched literally")
		require.Empty(t, got("property=name~web.*s"), "the text is no pattern")
		require.Equal(t, []string{idB}, got("property=name~web&name=app-web_50%25"))
		for q, detail := range map[string]string{
			"property=version>1":                        "name~text",
			"property=name~" + strings.Repeat("a", 257): "at most 256 bytes",
			"property=name~a&property=name~b":           "once",
		} {
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?" + q})
			require.Equal(t, http.StatusBadRequest, resp.status, q)
			p := resp.problem(t)
			require.Equal(t, "property", p.Field, q)
			require.Contains(t, p.Detail, detail, q)
		}
	})

	t.Run("OrderByClassification", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		idSys := b.createDataset(t, datasetOpts{name: "a", managedBy: "SYSTEM"})
		idRec := b.createDataset(t, datasetOpts{name: "b", behavior: "record"})
		idCust := b.createDataset(t, datasetOpts{name: "c"})
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=desc:classification.managedBy,name"})
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Equal(t, []string{idSys, idRec, idCust}, keysInOrder(t, resp.body))
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=classification.dataBehavior,desc:name"})
		require.Equal(t, []string{idRec, idCust, idSys}, keysInOrder(t, resp.body))
	})

	t.Run("OrderByRetentionRowsAndLastRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ttl := func(id string, lake any) {
			t.Helper()
			resp := b.do(t, request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{
				"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": lake}}}}})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		}
		idYear := b.createDataset(t, datasetOpts{name: "year"}) // the default, P12M
		idWeeks := b.createDataset(t, datasetOpts{name: "weeks"})
		ttl(idWeeks, "P5W")
		idMonth := b.createDataset(t, datasetOpts{name: "month"})
		ttl(idMonth, "P1M")
		idForever := b.createDataset(t, datasetOpts{name: "forever"})
		ttl(idForever, nil)
		idRecord := b.createDataset(t, datasetOpts{name: "record", behavior: "record"})
		ttl(idRecord, "P400D")
		got := func(orderBy string) []string {
			t.Helper()
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=" + orderBy})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			return keysInOrder(t, resp.body)
		}
		lake := "extensions.adobe_lakeHouse.rowExpiration.ttlValue"
		require.Equal(t, []string{idMonth, idWeeks, idYear, idRecord, idForever}, got(lake),
			"P1M (30 days) < P5W < P12M (360 days) < P400D < keep forever")
		require.Equal(t, []string{idForever, idRecord, idYear, idWeeks, idMonth}, got("desc:"+lake))

		b.ingest(t, idWeeks, ndjson(event("2026-11-01T00:00:00Z", ""), event("2026-11-02T00:00:00Z", "")))
		b.ingest(t, idMonth, ndjson(event("2026-11-01T00:00:00Z", "")))
		require.Equal(t, []string{idWeeks, idMonth}, got("desc:extensions.adobe_lakeHouse.metrics.rowCount,name")[:2])

		_, err := b.db.Pool.Exec(context.Background(), `UPDATE row_expirations SET last_completed_at = now() - $2::interval
			WHERE dataset_id = $1 AND store = 'adobe_lakeHouse'`, idYear, "1 day")
		require.NoError(t, err)
		_, err = b.db.Pool.Exec(context.Background(), `UPDATE row_expirations SET last_completed_at = now()
			WHERE dataset_id = $1 AND store = 'adobe_lakeHouse'`, idRecord)
		require.NoError(t, err)
		require.Equal(t, []string{idRecord, idYear}, got("desc:extensions.adobe_lakeHouse.rowExpiration.lastCompleted")[:2], "never run last")
	})

	// Storage is rows times each partition's bytes per row: a few wide rows outweigh many narrow ones, so the order
	// by storage is not the order by rows, and the listing shows the figures it ordered by.
	t.Run("OrderByStorage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Wide rows (8 KB of hex that does not compress) in the partition of January's events, narrow ones in
		// March's, so the two partitions' bytes per row differ.
		idWide := b.createDataset(t, datasetOpts{name: "wide"})
		idNarrow := b.createDataset(t, datasetOpts{name: "narrow"})
		idFew := b.createDataset(t, datasetOpts{name: "few"})
		idEmpty := b.createDataset(t, datasetOpts{name: "empty"})
		b.ingest(t, idWide, storageRows("2026-01-10T00:00:00Z", 30, 8000))
		b.ingest(t, idNarrow, storageRows("2026-03-10T00:00:00Z", 200, 10))
		b.ingest(t, idFew, storageRows("2026-03-11T00:00:00Z", 60, 10))
		// The sizes are compared across listings, so they must not change between them: an autovacuum of the new
		// rows (a free-space and visibility map, the GIN pending list of the identities index flushed) grew one by
		// 12% under load. Vacuumed now, the tables stay as they are until the next write.
		_, err := b.db.Pool.Exec(context.Background(), `VACUUM lake_rows`)
		require.NoError(t, err)
		list := func(query string) ([]string, []int64) {
			t.Helper()
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?" + query})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			ids := keysInOrder(t, resp.body)
			doc := resp.json(t)
			sizes := make([]int64, len(ids))
			for i, id := range ids {
				sizes[i] = storageSize(t, doc[id].(map[string]any))
			}
			return ids, sizes
		}
		byRows, _ := list("orderBy=desc:extensions.adobe_lakeHouse.metrics.rowCount")
		require.Equal(t, []string{idNarrow, idFew, idWide, idEmpty}, byRows)

		storage := "extensions.adobe_lakeHouse.metrics.storageSize"
		ids, sizes := list("orderBy=desc:" + storage)
		require.Equal(t, []string{idWide, idNarrow, idFew, idEmpty}, ids, "30 wide rows outweigh 200 narrow ones")
		require.True(t, sizes[0] > sizes[1] && sizes[1] > sizes[2] && sizes[2] > sizes[3], "shown in the order: %v", sizes)
		require.Zero(t, sizes[3], "a dataset without rows stores nothing")
		ids, asc := list("orderBy=asc:" + storage)
		require.Equal(t, []string{idEmpty, idFew, idNarrow, idWide}, ids)
		require.Equal(t, []int64{sizes[3], sizes[2], sizes[1], sizes[0]}, asc)

		first, firstSizes := list("limit=2&orderBy=desc:" + storage)
		second, secondSizes := list("limit=2&start=2&orderBy=desc:" + storage)
		require.Equal(t, []string{idWide, idNarrow}, first)
		require.Equal(t, []string{idFew, idEmpty}, second, "the next page starts where the first ended")
		require.Equal(t, sizes, append(firstSizes, secondSizes...))

		doc, _ := b.getDataset(t, idWide)
		require.Equal(t, sizes[0], storageSize(t, doc), "GET /dataSets/{id} estimates as the ordered listing does")
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=desc:extensions.adobe_lakeHouse.metrics.storage"})
		require.Equal(t, http.StatusBadRequest, resp.status, "body: %s", resp.body)
		require.Contains(t, resp.problem(t).Detail, storage, "the refusal names the supported fields")
	})

	t.Run("TagFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		idWeb := b.createDataset(t, datasetOpts{tags: map[string][]string{"team": {"web-shop"}, "tier": {"gold"}}})
		idApp := b.createDataset(t, datasetOpts{tags: map[string][]string{"team": {"app"}}})
		b.createDataset(t, datasetOpts{})
		got := func(q string) []string {
			return keysInOrder(t, b.do(t, request{method: http.MethodGet, path: "/dataSets?orderBy=asc:created&" + q}).body)
		}
		require.Equal(t, []string{idWeb}, got("tags=team:web-shop"))
		require.Equal(t, []string{idWeb, idApp}, got("tags=team:*"))
		require.Equal(t, []string{idWeb}, got("tags=team:web*"))
		require.Equal(t, []string{idWeb}, got("tags=team:*,tier:gold"))
		require.Empty(t, got("tags=team:%25"), "a LIKE wildcard in the value is matched literally")
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets?tags=team"})
		require.Equal(t, http.StatusBadRequest, resp.status)
		require.Equal(t, "tags", resp.problem(t).Field)
	})
}

func TestDeleteDataset(t *testing.T) {
	t.Parallel()

	t.Run("DisappearsAtOnceAndIsAudited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id})
		require.Equal(t, http.StatusOK, resp.status)
		require.JSONEq(t, `["@/dataSets/`+id+`"]`, string(resp.body))
		require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id}).status)
		require.Equal(t, http.StatusNotFound, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id}).status)
		require.Equal(t, 2, b.auditCount(t, id), "create and delete")
	})

	t.Run("SystemDatasetIsProtected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{managedBy: "SYSTEM"})
		resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id})
		require.Equal(t, http.StatusForbidden, resp.status)
		require.Contains(t, resp.problem(t).Detail, "SYSTEM")
		require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id}).status)
	})
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp := b.do(t, request{method: http.MethodGet, path: path, headers: map[string]string{"Authorization": ""}})
		require.Equal(t, http.StatusOK, resp.status, path)
	}
	b.createDataset(t, datasetOpts{})
	resp := b.do(t, request{method: http.MethodGet, path: "/metrics"})
	require.Equal(t, http.StatusOK, resp.status)
	require.Contains(t, string(resp.body), `retention_http_requests_total{method="POST",route="/dataSets",status="201"} 1`)
}

// TestMetricsBoundTheMethodLabel: a client may send any token as its method, even unauthenticated; each would have
// been a series of its own for as long as the process lives.
func TestMetricsBoundTheMethodLabel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 3 {
		resp := b.do(t, request{method: fmt.Sprintf("HOSTILE%d", i), path: "/dataSets", headers: map[string]string{"Authorization": ""}})
		require.Less(t, resp.status, http.StatusInternalServerError)
	}
	resp := b.do(t, request{method: http.MethodGet, path: "/metrics"})
	require.Equal(t, http.StatusOK, resp.status)
	require.NotContains(t, string(resp.body), "HOSTILE")
	require.Regexp(t, `retention_http_requests_total\{method="other",[^}]*\} 3`, string(resp.body))
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: map[string]string{"x-request-id": "trace-123"}})
	require.Equal(t, "trace-123", resp.header.Get("X-Request-Id"))
	resp = b.do(t, request{method: http.MethodGet, path: "/dataSets"})
	require.NotEmpty(t, resp.header.Get("X-Request-Id"))
}

func TestUnknownRouteIsProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(t, request{method: http.MethodGet, path: "/nope"})
	require.Equal(t, http.StatusNotFound, resp.status)
	require.Equal(t, "route-not-found", resp.problem(t).Type)
}

// keysInOrder returns the keys of a JSON object in the order they appear.
func keysInOrder(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(body)))
	tok, err := dec.Token()
	require.NoError(t, err, "body: %s", body)
	require.Equal(t, json.Delim('{'), tok, "body: %s", body)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

// storageRows is n events at ts, each with a payload of width hex digits that does not compress (pseudo-random,
// fixed seed), so that the partition's size grows with width.
func storageRows(ts string, n, width int) string {
	r := rand.New(rand.NewPCG(uint64(n), uint64(width)))
	events := make([]string, n)
	for i := range events {
		var payload strings.Builder
		for payload.Len() < width {
			fmt.Fprintf(&payload, "%016x", r.Uint64())
		}
		events[i] = event(ts, fmt.Sprintf(`"n":%d,"payload":%q`, i, payload.String()[:width]))
	}
	return ndjson(events...)
}

// storageSize is the lake's storageSize in a dataset's document.
func storageSize(t *testing.T, doc map[string]any) int64 {
	t.Helper()
	lake, _ := doc["extensions"].(map[string]any)["adobe_lakeHouse"].(map[string]any)
	metrics, ok := lake["metrics"].(map[string]any)
	require.True(t, ok, "metrics in %v", doc)
	size, ok := metrics["storageSize"].(float64)
	require.True(t, ok, "storageSize in %v", metrics)
	return int64(size)
}
