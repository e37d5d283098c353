package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// setupInput is setup with every route served, the Audit Query API's included, and without the API's net for data
// exceptions (postgres.TranslateError): what it serves must be refused before it reaches SQL.
func setupInput(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	runs, _ := testdb.Jobs(t, b.db, testdb.JobsOptions{})
	b.api = httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(b.db), Rows: postgres.NewRowService(b.db, testChunkRows), Runs: runs,
		Preview: postgres.NewPreviewService(b.db, retention.Period{}), Audit: postgres.NewAuditService(b.db), Auth: auth,
		Ready: b.db.Ready, Registry: prometheus.NewRegistry(),
	})
	srv := httptest.NewServer(apitest.Handler(t, b.api))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// setupStub is a bundle whose server runs on cfg's services, to make them fail as a database can.
func setupStub(t *testing.T, cfg httpapi.Config) *testBundle {
	t.Helper()
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	cfg.Auth, cfg.Registry, cfg.TranslateError = auth, prometheus.NewRegistry(), postgres.TranslateError
	// The stubs fail on purpose, some as a bug would: their 500s are what the tests look at.
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(cfg), apitest.AllowInternalErrors()))
	t.Cleanup(srv.Close)
	b := &testBundle{url: srv.URL, org: newOrg()}
	b.token = mintToken(t, b.org, allScopes, time.Hour)
	return b
}

// getDocumentExact is getDataset with numbers read as json.Number: a dataset may hold numbers float64 cannot carry.
func (b *testBundle) getDocumentExact(t testing.TB, id string) (map[string]any, string) {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	dec := json.NewDecoder(bytes.NewReader(resp.body))
	dec.UseNumber()
	var keyed map[string]map[string]any
	require.NoError(t, dec.Decode(&keyed), "body: %s", resp.body)
	doc, ok := keyed[id]
	require.True(t, ok, "body: %s", resp.body)
	return doc, resp.header.Get("ETag")
}

// requireProblem requires a problem answer of status naming field, and returns it.
func requireProblem(t *testing.T, resp *response, status int, field string) httpapi.Problem {
	t.Helper()
	require.Equal(t, status, resp.status, "body: %s", resp.body)
	p := resp.problem(t)
	require.Equal(t, field, p.Field, "body: %s", resp.body)
	return p
}

// ingestRaw posts an ingestion body of the given content type and returns the answer, whatever its status.
func (b *testBundle) ingestRaw(t testing.TB, id, contentType, body string) *response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: body,
		headers: map[string]string{"Content-Type": contentType}})
}

// storedRows counts the dataset's rows in the lake, hidden or not.
func (b *testBundle) storedRows(t testing.TB, id string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM lake_rows WHERE dataset_id = $1`, id).Scan(&n))
	return n
}

// Finding 3: a number past float64's range was stored, and every read of the dataset and its sandbox's listing
// answered 500 afterwards.
func TestLargeNumbersNeverBreakADataset(t *testing.T) {
	t.Parallel()
	full := "1" + strings.Repeat("0", 400)

	t.Run("ExtensionKeptAndEveryRouteStillWorks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.patch(t, id, `{"extensions":{"custom":{"n":1e400}}}`, nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		require.Contains(t, string(resp.body), `"n":`+full)
		for _, req := range []request{
			{method: http.MethodGet, path: "/dataSets/" + id},
			{method: http.MethodGet, path: "/dataSets"},
			{method: http.MethodGet, path: "/ttl/" + id},
			{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: `{"description":"still works"}`},
			{method: http.MethodGet, path: "/dataSets/" + id + "/rows"},
		} {
			resp := b.do(t, req)
			require.Equal(t, http.StatusOK, resp.status, "%s %s: %s", req.method, req.path, resp.body)
		}
		get := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
		require.Contains(t, string(get.body), `"description":"still works"`)
		require.Contains(t, string(get.body), `"n":`+full)
		b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"r"`)))
		require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/r"}).status)
		require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id}).status)
	})

	t.Run("SchemaRefKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: `{"name":"big","schemaRef":{"v":1e400}}`})
		require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
		list := b.do(t, request{method: http.MethodGet, path: "/dataSets"})
		require.Equal(t, http.StatusOK, list.status, "body: %s", list.body)
		require.Contains(t, string(list.body), `"schemaRef":{"v":`+full+`}`)
	})

	t.Run("NumberPostgresCannotHoldRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		before, tag := b.getDataset(t, id)
		p := requireProblem(t, b.patch(t, id, `{"extensions":{"custom":{"n":1e200000}}}`, nil), http.StatusBadRequest, "extensions.custom.n")
		require.Equal(t, "number-out-of-range", p.Type)
		require.Contains(t, p.Detail, "1e200000")
		after, afterTag := b.getDataset(t, id)
		require.Equal(t, settled(before), settled(after))
		require.Equal(t, tag, afterTag)
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets", body: `{"name":"huge","schemaRef":{"v":-1e200000}}`})
		requireProblem(t, resp, http.StatusBadRequest, "schemaRef.v")
	})
}

// Finding 4: numbers were rounded through float64, in answers and then in the database.
func TestNumbersKeptExact(t *testing.T) {
	t.Parallel()
	exact := []string{`"i":9007199254740993`, `"dec":0.1000000000000000000001`}

	t.Run("DatasetDocument", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		resp := b.patch(t, id, `{"extensions":{"custom":{"i":9007199254740993,"dec":0.1000000000000000000001,"e":1.50e1}}}`, nil)
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		get := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
		for _, want := range append(exact, `"e":15.0`) {
			require.Contains(t, string(resp.body), want, "the PATCH answer shows what is stored")
			require.Contains(t, string(get.body), want, "a read shows what was sent")
		}
		require.Equal(t, http.StatusOK, b.patch(t, id, `{"description":"unrelated"}`, nil).status)
		var i, dec string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT extensions->'custom'->>'i', extensions->'custom'->>'dec' FROM datasets WHERE id = $1`, id).Scan(&i, &dec))
		require.Equal(t, "9007199254740993", i, "an unrelated PATCH writes back what it read, unrounded")
		require.Equal(t, "0.1000000000000000000001", dec)
	})

	t.Run("RowPayload", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.createDataset(t, datasetOpts{})
		b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"n","i":9007199254740993,"dec":0.1000000000000000000001`)))
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows"})
		require.Equal(t, http.StatusOK, resp.status)
		// Rows are answered as Postgres prints them (spaces after colons), so compare the numbers, decoded exactly.
		var page struct {
			Embedded struct {
				Rows []map[string]any `json:"rows"`
			} `json:"_embedded"`
		}
		dec := json.NewDecoder(bytes.NewReader(resp.body))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&page))
		require.Len(t, page.Embedded.Rows, 1)
		row := page.Embedded.Rows[0]
		require.Equal(t, json.Number("9007199254740993"), row["i"])
		require.Equal(t, json.Number("0.1000000000000000000001"), row["dec"])
	})
}

// Finding 5: the row id of a path was percent-decoded twice, so one DELETE removed another row.
func TestPathIDsAreDecodedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(
		event("2026-11-01T00:00:00Z", `"_id":"x/y"`),
		event("2026-11-01T00:00:01Z", `"_id":"x%2Fy"`),
		event("2026-11-01T00:00:02Z", `"_id":"100%"`),
	))
	deleted := func(path string) string {
		t.Helper()
		resp := b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/" + path})
		require.Equal(t, http.StatusOK, resp.status, "%s: %s", path, resp.body)
		var rowID string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT details->>'rowId' FROM audit_events WHERE asset_id = $1 AND details ? 'rowId' ORDER BY occurred_at DESC, seq DESC LIMIT 1`, id).Scan(&rowID))
		return rowID
	}
	require.Equal(t, "x%2Fy", deleted("x%252Fy"))
	require.Equal(t, []string{"x/y", "100%"}, rowIDs(b.readRows(t, id, "")))
	require.Equal(t, "100%", deleted("100%25"))
	require.Equal(t, "x/y", deleted("x%2Fy"))
	require.Empty(t, b.readRows(t, id, ""))

	encoded := fmt.Sprintf("%%%02X%s", id[0], id[1:])
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + encoded})
	require.Equal(t, http.StatusOK, resp.status, "a dataset id is decoded once too: %s", resp.body)
}

// Finding 6, parameters: NUL, bytes that are not UTF-8 and bad escapes reached SQL and answered 500.
func TestUnstorableTextInParametersIs400(t *testing.T) {
	t.Parallel()
	b := setupInput(t)
	id := b.createDataset(t, datasetOpts{})
	queryID := base64.RawURLEncoding.EncodeToString([]byte("q1?property=assetId%3D%3D%00&orderBy=-timestamp&limit=50"))
	cursor := base64.RawURLEncoding.EncodeToString([]byte("2026-11-01T00:00:00Z|a\x00"))
	for _, tc := range []struct {
		name, method, path, field string
	}{
		{"ListNameNUL", http.MethodGet, "/dataSets?name=%00", "name"},
		{"ListTagsInvalidUTF8", http.MethodGet, "/dataSets?tags=a:%FF", "tags"},
		{"ListBadEscape", http.MethodGet, "/dataSets?name=%zz", "query"},
		{"ListNULParameterName", http.MethodGet, "/dataSets?%00=1", "query"},
		{"DatasetIDNUL", http.MethodGet, "/dataSets/%00", "id"},
		{"AuditPropertyNUL", http.MethodGet, "/audit/events?property=assetId==%00", "property"},
		{"AuditExportInvalidUTF8", http.MethodGet, "/audit/export?property=user==%FF", "property"},
		{"AuditQueryIDHoldingNUL", http.MethodGet, "/audit/events?queryId=" + queryID, "queryId"},
		{"AuditOrderByNUL", http.MethodGet, "/audit/events?orderBy=%00", "orderBy"},
		{"RowCursorHoldingNUL", http.MethodGet, "/dataSets/" + id + "/rows?cursor=" + cursor, "cursor"},
		{"RowsStartInvalidUTF8", http.MethodGet, "/dataSets/" + id + "/rows?start=%FF", "start"},
		{"DeleteRowNUL", http.MethodDelete, "/dataSets/" + id + "/rows/%00", "rowId"},
		{"DeleteRowInvalidUTF8", http.MethodDelete, "/dataSets/" + id + "/rows/%FF%FE", "rowId"},
		{"PreviewNUL", http.MethodGet, "/ttl/" + id + "/preview?ttlValue=%00", "ttlValue"},
		{"RunIDNUL", http.MethodGet, "/retention/runs/%00", "runId"},
		{"AdobePrefixNUL", http.MethodGet, "/data/foundation/catalog/dataSets?name=%00", "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, b.do(t, request{method: tc.method, path: tc.path}), http.StatusBadRequest, tc.field)
		})
	}
}

// Finding 6, bodies: NUL in a document's text or a number Postgres cannot hold answered 500 (SQLSTATE 22P05,
// 22003), and bytes that are not UTF-8 were silently replaced.
func TestUnstorableValuesInBodiesAre400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	for _, tc := range []struct {
		name, body, field string
	}{
		{"NameNUL", `{"name":"a\u0000"}`, "name"},
		{"NameInvalidUTF8", "{\"name\":\"a\xff\"}", "name"},
		{"DescriptionNUL", `{"name":"d","description":"\u0000"}`, "description"},
		{"TagNUL", `{"name":"d","tags":{"team":["\u0000"]}}`, "tags.team[0]"},
		{"SchemaRefNUL", `{"name":"d","schemaRef":{"id":"\u0000"}}`, "schemaRef.id"},
		{"SchemaRefOverflow", `{"name":"d","schemaRef":{"v":1e200000}}`, "schemaRef.v"},
		{"SchemaRefLoneSurrogate", `{"name":"d","schemaRef":{"id":"\udfff"}}`, "schemaRef.id"},
	} {
		t.Run("Create"+tc.name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, b.do(t, request{method: http.MethodPost, path: "/dataSets", body: tc.body}), http.StatusBadRequest, tc.field)
		})
	}
	before, tag := b.getDataset(t, id)
	for _, tc := range []struct {
		name, body, field string
	}{
		{"DescriptionNUL", `{"description":"a\u0000b"}`, "description"},
		{"DescriptionInvalidUTF8", "{\"description\":\"a\xc3\"}", "description"},
		{"TagNameNUL", `{"tags":{"\u0000":["x"]}}`, `tags["\x00"]`},
		{"ExtensionKeyNUL", `{"extensions":{"custom":{"k\u0000":1}}}`, `extensions.custom["k\x00"]`},
		{"ExtensionOverflow", `{"extensions":{"custom":{"n":1e200000}}}`, "extensions.custom.n"},
		{"ExtensionInvalidUTF8", "{\"extensions\":{\"custom\":{\"s\":\"\xfe\"}}}", "extensions.custom.s"},
	} {
		t.Run("Patch"+tc.name, func(t *testing.T) {
			requireProblem(t, b.patch(t, id, tc.body, nil), http.StatusBadRequest, tc.field)
		})
	}
	after, afterTag := b.getDataset(t, id)
	require.Equal(t, settled(before), settled(after), "a refused PATCH changes nothing")
	require.Equal(t, tag, afterTag)
}

// Finding 8, the document part: PATCHes under the body limit grew one dataset to megabytes, which every listing of
// its sandbox returned.
func TestDatasetDocumentIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	chunk := strings.Repeat("x", catalog.MaxDocumentBytes/4)
	var resp *response
	for i := 0; ; i++ {
		require.Less(t, i, 10, "the document kept growing")
		resp = b.patch(t, id, map[string]any{"extensions": map[string]any{fmt.Sprintf("k%d", i): chunk}}, nil)
		if resp.status != http.StatusOK {
			break
		}
	}
	p := requireProblem(t, resp, http.StatusBadRequest, "extensions")
	require.Equal(t, "document-too-large", p.Type)
	list := b.do(t, request{method: http.MethodGet, path: "/dataSets"})
	require.Equal(t, http.StatusOK, list.status)
	require.Less(t, len(list.body), catalog.MaxDocumentBytes+4096, "the listing carries the dataset within its bound")
}

// Finding 6, ingestion: one bad line failed its whole chunk with a 500, and _ids that are not UTF-8 merged.
func TestIngestionRefusesBadLinesAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	bad := map[int]string{
		75: `{"timestamp":"2026-11-01T00:00:00Z","page":"a\u0000b"}`,
		80: `{"timestamp":"2026-11-01T00:00:00Z","n":1e200000}`,
		90: "{\"timestamp\":\"2026-11-01T00:00:00Z\",\"_id\":\"\xff\"}",
		91: "{\"timestamp\":\"2026-11-01T00:00:00Z\",\"_id\":\"\xfe\"}",
		92: `{"timestamp":"2026-11-01T00:00:00Z","_id":"\ud800"}`,
		93: `{"timestamp":"2026-11-01T00:00:00Z","k\u0000":1}`,
	}
	const lines = 3 * testChunkRows
	var body strings.Builder
	for line := 1; line <= lines; line++ {
		if ev, ok := bad[line]; ok {
			body.WriteString(ev + "\n")
			continue
		}
		body.WriteString(event("2026-11-01T00:00:00Z", fmt.Sprintf(`"_id":"r%03d"`, line)) + "\n")
	}
	res := b.ingest(t, id, body.String())
	require.EqualValues(t, lines-len(bad), res["accepted"], "%v", res)
	require.EqualValues(t, len(bad), res["rejected"])
	reasons := map[float64]string{}
	for _, e := range res["errors"].([]any) {
		reasons[e.(map[string]any)["line"].(float64)] = e.(map[string]any)["reason"].(string)
	}
	require.Contains(t, reasons[75], "page holds the character U+0000")
	require.Contains(t, reasons[80], "n: the number 1e200000")
	require.Contains(t, reasons[90], "_id holds bytes that are not UTF-8")
	require.Contains(t, reasons[91], "_id holds bytes that are not UTF-8")
	require.Contains(t, reasons[92], `_id holds \ud800`)
	require.Contains(t, reasons[93], "U+0000")
	require.Equal(t, lines-len(bad), b.storedRows(t, id), "every good line is stored, and only those")
}

// Finding 9: an ingestion under way kept committing rows after DELETE /dataSets of its dataset had answered.
func TestIngestionStopsWhenItsDatasetIsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	pw, done := b.streamIngest(t, id)
	for i := range testChunkRows {
		_, err := fmt.Fprintln(pw, event("2026-11-01T00:00:00Z", fmt.Sprintf(`"_id":"a%03d"`, i)))
		require.NoError(t, err)
	}
	require.Equal(t, testChunkRows, <-b.chunks, "the first chunk is committed before the delete")
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodDelete, path: "/dataSets/" + id}).status)
	go func() {
		defer pw.Close()
		for i := range 2 * testChunkRows {
			if _, err := fmt.Fprintln(pw, event("2026-11-01T00:00:00Z", fmt.Sprintf(`"_id":"b%03d"`, i))); err != nil {
				return
			}
		}
	}()
	resp := <-done
	p := requireProblem(t, resp, http.StatusConflict, "id")
	require.Equal(t, "dataset-deleted", p.Type)
	require.Contains(t, p.Detail, fmt.Sprintf("%d rows of the body were stored", testChunkRows))
	require.EqualValues(t, testChunkRows, resp.json(t)["accepted"])
	require.Equal(t, testChunkRows, b.storedRows(t, id), "nothing is committed after the delete answered")
}

// Finding 9: a JSON array body missing its closing bracket was taken as whole.
func TestJSONArrayBodyMustBeWhole(t *testing.T) {
	t.Parallel()
	ev := func(i int) string { return event("2026-11-01T00:00:00Z", fmt.Sprintf(`"_id":"e%03d"`, i)) }
	elements := func(n int) string {
		out := make([]string, n)
		for i := range out {
			out[i] = ev(i)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name, body string
		status     int
		committed  int // the rows the answer reports and the store holds
	}{
		{"Closed", "[" + elements(2) + "]\n", http.StatusOK, 2},
		{"Unclosed", "[" + elements(2), http.StatusBadRequest, 2},
		{"UnclosedAfterAChunk", "[" + elements(testChunkRows+10), http.StatusBadRequest, testChunkRows + 10},
		{"BrokenElement", "[" + ev(0) + `,{"timestamp":`, http.StatusBadRequest, 1},
		{"TrailingData", "[" + ev(0) + "] [" + ev(1) + "]", http.StatusBadRequest, 1},
		{"NotAnArray", `{"timestamp":"2026-11-01T00:00:00Z"}`, http.StatusBadRequest, 0},
		{"Empty", "", http.StatusBadRequest, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			id := b.createDataset(t, datasetOpts{})
			resp := b.ingestRaw(t, id, "application/json", tc.body)
			require.Equal(t, tc.status, resp.status, "body: %s", resp.body)
			if tc.status != http.StatusOK {
				p := requireProblem(t, resp, tc.status, "body")
				require.Equal(t, "malformed-json", p.Type)
			}
			if tc.committed > 0 {
				require.EqualValues(t, tc.committed, resp.json(t)["accepted"], "the answer says what was stored")
			}
			require.Equal(t, tc.committed, b.storedRows(t, id))
		})
	}
}

// failingRows is a row service whose ingestion stores some rows and then fails, as a database going away would.
type failingRows struct {
	catalog.RowService
	committed int
	err       error
}

func (f failingRows) BeginIngest(context.Context, *catalog.Caller, string, catalog.IngestOptions) (catalog.RowWriter, error) {
	return f, nil
}

// Rules makes every event without a timestamp a refused one.
func (f failingRows) Rules() catalog.RowContext {
	return catalog.RowContext{Dataset: &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.TimeSeries}}}
}

func (f failingRows) Write(_ context.Context, rows iter.Seq[catalog.RowInput], res *catalog.IngestResult) error {
	for range rows {
	}
	res.Accepted += f.committed
	return f.err
}

// Finding 6: an ingestion that failed after committing chunks answered a bare 500.
func TestIngestionFailureReportsWhatWasCommitted(t *testing.T) {
	t.Parallel()
	b := setupStub(t, httpapi.Config{Rows: failingRows{committed: 5000, err: errors.New("connection reset")}})
	resp := b.ingestRaw(t, "0123456789abcdef01234567", "application/x-ndjson", "{}\n")
	require.Equal(t, http.StatusInternalServerError, resp.status)
	p := resp.problem(t)
	require.Equal(t, "internal", p.Type)
	require.Contains(t, p.Detail, "5000 rows of the body were stored")
	doc := resp.json(t)
	require.EqualValues(t, 5000, doc["accepted"])
	require.EqualValues(t, 1, doc["rejected"])
	require.Len(t, doc["errors"], 1)
	require.NotContains(t, string(resp.body), "connection reset", "nothing internal leaks")
}

// failingDatasets is a dataset service whose listing fails with err.
type failingDatasets struct {
	catalog.DatasetService
	err error
}

func (f failingDatasets) FindDatasets(context.Context, *catalog.Caller, catalog.DatasetFilter) ([]*catalog.Dataset, error) {
	return nil, f.err
}

// The net under the rules: a data exception the database raises is the request's fault, a 400, never a 500.
func TestDataExceptionIsABadRequest(t *testing.T) {
	t.Parallel()
	for code, status := range map[string]int{"22021": http.StatusBadRequest, "22003": http.StatusBadRequest, "22P05": http.StatusBadRequest, "53300": http.StatusInternalServerError} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("list datasets: %w", &pgconn.PgError{Code: code, Message: "value refused"})
			b := setupStub(t, httpapi.Config{Datasets: failingDatasets{err: err}})
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets"})
			require.Equal(t, status, resp.status, "body: %s", resp.body)
		})
	}
}

// hostileValue is one value an attacker puts in every place a route takes input, as URL text and as JSON.
type hostileValue struct {
	name string
	url  string // percent-encoded, for a path segment or a query value
	json string // JSON text
}

var hostileValues = []hostileValue{
	{"NUL", "%00", `"a\u0000b"`},
	{"InvalidUTF8", "%FF%FE", "\"a\xff\xfeb\""},
	{"LoneSurrogate", "%ED%A0%80", `"\ud800"`},
	{"NULKey", "%00%00", `{"\u0000":1}`},
	{"Huge", "1e400", `1e400`},
	{"Overflow", "1e200000", `1e200000`},
	{"Tiny", "1e-200000", `-1e-200000`},
	{"OverPreciseInt", "9007199254740993", `9007199254740993`},
	{"OverPreciseDecimal", "0.1000000000000000000001", `0.1000000000000000000001`},
	{"Escapes", "%25%2F%252F", `"%2F\\/"`},
}

// TestEveryRouteSurvivesHostileValues sends each hostile value in every path parameter, query parameter and body
// field of every route: nothing may answer 5xx, and the tenant's dataset must still read afterwards.
func TestEveryRouteSurvivesHostileValues(t *testing.T) {
	t.Parallel()
	b := setupInput(t)
	id := b.createDataset(t, datasetOpts{})
	b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"r1"`)))
	const ts = `"2026-11-01T00:00:00Z"`
	// Each place holds $V where the value goes; bodies are JSON, and $N makes each created name unique.
	type place struct{ method, path, body, contentType string }
	places := []place{}
	for _, q := range []string{"limit", "start", "orderBy", "properties", "name", "tags"} {
		places = append(places, place{method: http.MethodGet, path: "/dataSets?" + q + "=$V"})
	}
	places = append(places, place{method: http.MethodGet, path: "/dataSets?tags=team:$V"}, place{method: http.MethodGet, path: "/dataSets?$V=1"})
	for _, body := range []string{
		`{"name":$V}`, `{"name":"n$N","description":$V}`, `{"name":"n$N","tags":$V}`, `{"name":"n$N","tags":{"t":[$V]}}`,
		`{"name":"n$N","tags":{"t":$V}}`, `{"name":"n$N","classification":{"dataBehavior":$V}}`, `{"name":"n$N","classification":$V}`,
		`{"name":"n$N","schemaRef":$V}`, `{"name":"n$N","schemaRef":{"id":$V,"contentType":"application/vnd.adobe.xed+json"}}`,
		`{"name":"n$N","schemaRef":{"n":[{"deep":$V}]}}`, `{$V:1}`,
	} {
		places = append(places, place{method: http.MethodPost, path: "/dataSets", body: body})
	}
	for _, route := range []string{"/dataSets/$V", "/ttl/$V", "/ttl/$V/preview", "/dataSets/$V/rows", "/retention/runs/$V"} {
		places = append(places, place{method: http.MethodGet, path: route})
	}
	places = append(places,
		place{method: http.MethodGet, path: "/dataSets/" + id + "?properties=$V"},
		place{method: http.MethodDelete, path: "/dataSets/$V"},
		place{method: http.MethodPatch, path: "/v2/dataSets/$V", body: `{"description":"d"}`},
		place{method: http.MethodPatch, path: "/dataSets/$V", body: `{"description":"d"}`},
		place{method: http.MethodPut, path: "/dataSets/$V", body: `{"name":"n$N"}`},
		place{method: http.MethodGet, path: "/ttl/" + id + "/preview?ttlValue=$V"},
		place{method: http.MethodGet, path: "/ttl/" + id + "/preview?store=$V"},
		place{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/$V"},
		place{method: http.MethodDelete, path: "/dataSets/$V/rows/r1"},
		place{method: http.MethodPost, path: "/dataSets/$V/rows", body: `{"timestamp":` + ts + `}`, contentType: "application/x-ndjson"},
	)
	for _, body := range []string{
		`{"description":$V}`, `{"tags":$V}`, `{"tags":{"t":[$V]}}`, `{"tags":{$V:["x"]}}`, `{"extensions":$V}`,
		`{"extensions":{"custom":$V}}`, `{"extensions":{"custom":{"k":[1,{"deep":$V}]}}}`,
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":$V}}}}`, `{"extensions":{"adobe_lakeHouse":{"note":$V}}}`,
		`{"name":$V}`, `{"classification":{"managedBy":$V}}`, `{$V:1}`,
		`{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"rowOverrides":$V}}}}`,
	} {
		places = append(places, place{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: body})
	}
	for _, body := range []string{
		`{"name":$V}`, `{"name":"n$N","description":$V}`, `{"name":"n$N","tags":$V}`, `{"name":"n$N","extensions":$V}`,
		`{"name":"n$N","extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":$V,"rowOverrides":$V}}}}`, `{"name":"n$N",$V:1}`,
	} {
		for _, method := range []string{http.MethodPatch, http.MethodPut} {
			places = append(places, place{method: method, path: "/dataSets/" + id, body: body})
		}
	}
	for _, q := range []string{"start", "end", "limit", "store", "cursor"} {
		places = append(places, place{method: http.MethodGet, path: "/dataSets/" + id + "/rows?" + q + "=$V"})
	}
	for _, line := range []string{
		`{"timestamp":` + ts + `,"_id":$V}`, `{"timestamp":$V}`, `{"timestamp":` + ts + `,"_ttl":$V}`,
		`{"timestamp":` + ts + `,"_expiresAt":$V}`, `{"timestamp":` + ts + `,"field":$V}`, `{"timestamp":` + ts + `,"a":{"b":[$V]}}`,
		`{"timestamp":` + ts + `,$V:1}`, `$V`,
	} {
		for _, ct := range []string{"application/x-ndjson", "application/json"} {
			body := line
			if ct == "application/json" {
				body = "[" + line + "]"
			}
			places = append(places, place{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: body, contentType: ct})
		}
	}
	for _, body := range []string{`{"datasetIds":$V}`, `{"datasetIds":[$V]}`, `{"dryRun":$V}`, `{"dryRun":true,"store":$V}`, `{"dryRun":true,$V:1}`} {
		places = append(places, place{method: http.MethodPost, path: "/retention/runs", body: body})
	}
	for _, q := range []string{"limit", "start"} {
		places = append(places, place{method: http.MethodGet, path: "/retention/runs?" + q + "=$V"})
	}
	for _, route := range []string{"/audit/events", "/audit/export", "/data/foundation/audit/events"} {
		for _, q := range []string{"property=assetId==$V", "property=timestamp>$V", "property=$V", "property=action==Update,$V", "orderBy=$V", "limit=$V", "start=$V", "queryId=$V", "format=$V"} {
			places = append(places, place{method: http.MethodGet, path: route + "?" + q})
		}
	}
	places = append(places, place{method: http.MethodGet, path: "/audit/verify?x=$V"}, place{method: http.MethodGet, path: "/data/foundation/catalog/dataSets/$V"})

	n := 0
	for _, v := range hostileValues {
		t.Run(v.name, func(t *testing.T) {
			var failed []string
			for _, p := range places {
				n++
				req := request{method: p.method, path: strings.ReplaceAll(strings.ReplaceAll(p.path, "$V", v.url), "$N", fmt.Sprint(n))}
				if p.body != "" {
					req.body = strings.ReplaceAll(strings.ReplaceAll(p.body, "$V", v.json), "$N", fmt.Sprint(n))
				}
				if p.contentType != "" {
					req.headers = map[string]string{"Content-Type": p.contentType}
				}
				if resp := b.do(t, req); resp.status >= 500 {
					failed = append(failed, fmt.Sprintf("%s %s %v: %d %s", req.method, req.path, req.body, resp.status, resp.body))
				}
			}
			require.Empty(t, failed)
		})
	}
	t.Logf("%d requests, %d places × %d values", n, len(places), len(hostileValues))
	for _, path := range []string{"/dataSets", "/dataSets/" + id, "/dataSets/" + id + "/rows", "/audit/events"} {
		resp := b.do(t, request{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusOK, resp.status, "%s after the attack: %s", path, resp.body)
	}
	var stored json.RawMessage
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT jsonb_agg(extensions) FROM datasets WHERE org_id = $1`, b.org).Scan(&stored))
	require.NotContains(t, string(stored), `\u0000`)
}

// FuzzIngestRows sends random and mutated ingestion bodies, NDJSON or a JSON array, to a real dataset: no body may
// get a 5xx, and the store never gains more rows than an answer says it accepted.
func FuzzIngestRows(f *testing.F) {
	const ts = `"timestamp":"2026-11-01T00:00:00Z"`
	for _, seed := range []string{
		`{` + ts + `,"_id":"a","n":1}`, `{` + ts + `,"page":"a\u0000b"}`, `{` + ts + `,"n":1e200000}`, `{` + ts + `,"n":1e400}`,
		"{" + ts + ",\"_id\":\"\xff\"}\n{" + ts + ",\"_id\":\"\xfe\"}", `{` + ts + `,"_id":"\ud800"}`, `{` + ts + `,"k\u0000":1}`,
		`{` + ts + `,"i":9007199254740993,"dec":0.1000000000000000000001}`, "\xef\xbb\xbf{" + ts + "}\r\n{" + ts + "}\r\n",
		`{` + ts + `,"_ttl":1e200000}`, `{"timestamp":"\u0000"}`, `[`, `{`, ``, `{` + ts + `}` + "\n" + `{` + ts + `,"a":[[[[1e-9999]]]]}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte("["+strings.ReplaceAll(seed, "\n", ",")+"]"), true)
	}
	b := setup(f)
	id := b.createDataset(f, datasetOpts{name: "fuzzed-rows"})
	f.Fuzz(func(t *testing.T, body []byte, array bool) {
		contentType := "application/x-ndjson"
		if array {
			contentType = "application/json"
		}
		before := b.storedRows(t, id)
		resp := b.ingestRaw(t, id, contentType, string(body))
		require.Less(t, resp.status, 500, "body %q answered %s", body, resp.body)
		accepted := 0
		if resp.status == http.StatusOK || resp.header.Get("Content-Type") == "application/problem+json" {
			var answer struct {
				Accepted int `json:"accepted"`
			}
			require.NoError(t, json.Unmarshal(resp.body, &answer), "body: %s", resp.body)
			accepted = answer.Accepted
		}
		require.LessOrEqual(t, b.storedRows(t, id)-before, accepted, "body %q stored rows its answer did not count", body)
	})
}

// A client's X-Request-ID becomes the request id every audit event of the request records: one that is not text a
// column holds once failed the audited change with a 500 (SQLSTATE 22021), and a long one bloated every event.
func TestRequestIDHeaderIsTakenOnlyWhenSound(t *testing.T) {
	t.Parallel()
	b := setupInput(t)
	id := b.createDataset(t, datasetOpts{})
	for name, header := range map[string]string{"InvalidUTF8": "req-\xff\xfe", "TooLong": strings.Repeat("r", 129), "Control": "a\tb"} {
		t.Run(name, func(t *testing.T) {
			resp := b.patch(t, id, `{"description":"`+name+`"}`, map[string]string{"X-Request-ID": header})
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			got := resp.header.Get("X-Request-ID")
			require.NotEqual(t, header, got)
			require.Regexp(t, `^[0-9a-f-]{36}$`, got, "a fresh id replaces it")
		})
	}
	resp := b.patch(t, id, `{"description":"kept"}`, map[string]string{"X-Request-ID": "client-req-42"})
	require.Equal(t, http.StatusOK, resp.status)
	require.Equal(t, "client-req-42", resp.header.Get("X-Request-ID"), "a sound id is the client's to choose")
}
