package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSONAnswersReadAsTheyShould: every JSON answer ends with a newline (a shell prompt after curl starts on its
// own line), links keep & as it is, stored events come back as compact as the service's own fields, and
// /openapi.json starts with what a reader looks for.
func TestJSONAnswersReadAsTheyShould(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "json-<web>&co"})
	b.ingest(t, id, ndjson(event("2026-11-01T00:00:00Z", `"_id":"a","page" :  "/promo", "nested": { "k" : [1, 2] }`),
		event("2026-11-01T00:01:00Z", `"_id":"b"`)))

	t.Run("EndWithANewline", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/dataSets", "/dataSets/" + id, "/dataSets/" + id + "/rows", "/ttl/" + id,
			"/dataSets/nope", "/retention/runs", "/openapi.json", "/healthz"} {
			resp := b.do(t, request{method: http.MethodGet, path: path})
			require.True(t, bytes.HasSuffix(resp.body, []byte("}\n")) || bytes.HasSuffix(resp.body, []byte("]\n")),
				"%s answers %d without a final newline: %q", path, resp.status, tail(resp.body))
			require.False(t, bytes.HasSuffix(resp.body, []byte("\n\n")), path)
		}
	})

	t.Run("NoHTMLEscapes", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows?limit=1"})
		require.Equal(t, http.StatusOK, resp.status)
		require.Contains(t, string(resp.body), `&limit=1"`, "the next link as a client follows it")
		require.NotContains(t, string(resp.body), `\u0026`)
		resp = b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id})
		require.Contains(t, string(resp.body), `"name":"json-<web>&co"`)
	})

	t.Run("StoredFieldsAreCompact", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows"})
		require.Equal(t, http.StatusOK, resp.status)
		require.Contains(t, string(resp.body), `"page":"/promo","nested":{"k":[1,2]}`)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(resp.body, &doc))
	})

	t.Run("OpenAPIStartsWithItsVersionAndInfo", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/openapi.json"})
		require.Equal(t, http.StatusOK, resp.status)
		require.True(t, bytes.HasPrefix(resp.body, []byte(`{"openapi":"3.`)), "%.80s", resp.body)
		require.Less(t, bytes.Index(resp.body, []byte(`"info":`)), bytes.Index(resp.body, []byte(`"paths":`)))
		require.Less(t, bytes.Index(resp.body, []byte(`"paths":`)), bytes.Index(resp.body, []byte(`"components":`)))
	})
}

// tail is the end of an answer, for a failure's message.
func tail(b []byte) []byte {
	if len(b) > 40 {
		return b[len(b)-40:]
	}
	return b
}
