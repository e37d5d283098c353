package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedRequest is one curl call printed in the TTL guide (seed 002).
type seedRequest struct {
	method  string
	url     string
	headers map[string]string
	body    string
}

var (
	shellBlock  = regexp.MustCompile("(?s)```shell\n(.*?)```")
	curlMethod  = regexp.MustCompile(`curl -X (\w+)`)
	curlURL     = regexp.MustCompile(`'(https://[^']+)'`)
	curlHeader  = regexp.MustCompile(`-[hH] '([^:']+):\s*([^']*)'`)
	curlBody    = regexp.MustCompile(`(?s)-d '(.*?)'?\s*$`) // the seed's PATCH bodies lack their closing quote
	jsonComment = regexp.MustCompile(`//[^\n]*`)
)

// seedRequests reads the curl calls of the seed, dropping only the // comments inside their JSON bodies.
func seedRequests(t *testing.T) []seedRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "shared", "seeds", "002_efe35a9dbc4ae512.txt"))
	require.NoError(t, err, "the seed sits in ../shared beside the checkout")
	var out []seedRequest
	for _, m := range shellBlock.FindAllStringSubmatch(string(raw), -1) {
		block := m[1]
		if !strings.Contains(block, "curl") {
			continue
		}
		req := seedRequest{headers: map[string]string{}}
		req.method = curlMethod.FindStringSubmatch(block)[1]
		req.url = curlURL.FindStringSubmatch(block)[1]
		for _, h := range curlHeader.FindAllStringSubmatch(block, -1) {
			req.headers[h[1]] = h[2]
		}
		if body := curlBody.FindStringSubmatch(block); body != nil {
			req.body = jsonComment.ReplaceAllString(body[1], "")
		}
		out = append(out, req)
	}
	return out
}

// TestSeedRequests replays the seed's three requests as printed, apart from the host, the credentials and the
// JSON comments, and checks the answers the seed shows.
func TestSeedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "Acme Sales Data"})
	reqs := seedRequests(t)
	require.Len(t, reqs, 3, "GET /ttl, PATCH to P3M, PATCH to P6M")

	var answers []map[string]any
	for _, sr := range reqs {
		path := strings.TrimPrefix(sr.url, "https://platform.adobe.io")
		path = strings.NewReplacer("{DATASET_ID}", id, "5ba9452f7de80408007fc52a", id).Replace(path)
		headers := map[string]string{}
		for k, v := range sr.headers {
			headers[k] = strings.NewReplacer("{ACCESS_TOKEN}", b.token, "{API_KEY}", "seed-key", "{ORG_ID}", b.org,
				"{SANDBOX_NAME}", "prod", "{SANDBOX_ID}", "seed-sandbox-id").Replace(v)
		}
		var body any
		if sr.body != "" {
			body = sr.body
		}
		resp := b.do(t, request{method: sr.method, path: path, body: body, headers: headers})
		require.Equal(t, http.StatusOK, resp.status, "%s %s: %s", sr.method, path, resp.body)
		answers = append(answers, resp.json(t)[id].(map[string]any))
	}

	require.Equal(t, "P30D", rowExpiration(t, answers[0], "adobe_lakeHouse")["minValue"])
	require.Equal(t, "P1D", rowExpiration(t, answers[0], "adobe_unifiedProfile")["minValue"])
	for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
		re := rowExpiration(t, answers[1], store)
		require.Equal(t, map[string]any{"ttlValue": "P3M", "valueStatus": "custom", "setBy": "user", "updated": re["updated"],
			"nextRun": float64(testNextRun.UnixMilli())}, re, store)
	}
	require.Equal(t, "P6M", rowExpiration(t, answers[2], "adobe_lakeHouse")["ttlValue"])
	require.Equal(t, "P3M", rowExpiration(t, answers[2], "adobe_unifiedProfile")["ttlValue"])
}
