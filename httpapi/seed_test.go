package httpapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// guideFile holds the requests and answers of Adobe's TTL guide (the seed), as the guide prints them.
var guideFile = filepath.Join("testdata", "adobe", "ttl-guide.md")

// seedRequest is one curl call printed in the TTL guide (seed 002).
type seedRequest struct {
	method  string
	url     string
	headers map[string]string
	body    string
}

var (
	guideBlock  = regexp.MustCompile("(?s)```(shell|json|JSON)\n(.*?)```")
	curlMethod  = regexp.MustCompile(`curl -X (\w+)`)
	curlURL     = regexp.MustCompile(`'(https://[^']+)'`)
	curlHeader  = regexp.MustCompile(`-[hH] '([^:']+):\s*([^']*)'`)
	curlBody    = regexp.MustCompile(`(?s)-d '(.*?)'?\s*$`) // the seed's PATCH bodies lack their closing quote
	jsonComment = regexp.MustCompile(`//[^\n]*`)
)

// seedGuide reads the curl calls of the guide, dropping only the // comments inside their JSON bodies, and the
// answer printed after each.
func seedGuide(t *testing.T) ([]seedRequest, []map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(guideFile)
	require.NoError(t, err, "the guide's requests are testdata of the repository")
	var reqs []seedRequest
	var answers []map[string]any
	for _, m := range guideBlock.FindAllStringSubmatch(string(raw), -1) {
		block := m[2]
		if m[1] != "shell" {
			var answer map[string]any
			require.NoError(t, json.Unmarshal([]byte(block), &answer), "answer %d of the guide", len(answers))
			answers = append(answers, answer)
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
		reqs = append(reqs, req)
	}
	return reqs, answers
}

// guideRowExpiration is a store's rowExpiration in an answer of the guide: the dataset keyed by its id, or (the last
// answer) its extensions alone.
func guideRowExpiration(t *testing.T, answer map[string]any, store string) map[string]any {
	t.Helper()
	if _, ok := answer["extensions"]; ok {
		return rowExpiration(t, answer, store)
	}
	require.Len(t, answer, 1, "an answer keyed by the dataset's id")
	for _, doc := range answer {
		return rowExpiration(t, doc.(map[string]any), store)
	}
	return nil
}

// TestSeedRequests replays the guide's three requests as printed, apart from the host, the credentials and the
// JSON comments, and checks the row-expiration fields of the answers the guide prints.
func TestSeedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "Acme Sales Data"})
	reqs, guide := seedGuide(t)
	require.Len(t, reqs, 3, "GET /ttl, PATCH to P3M, PATCH to P6M")
	require.Len(t, guide, 3, "one printed answer per request")

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

	// GET /ttl: the lake's minimum and both defaults are the guide's. The limits above them are the service's own
	// (README, "Limits"): the guide's example org has maxValue P12M and a profile minValue of P7D.
	for _, field := range []string{"minValue", "defaultValue"} {
		require.Equal(t, guideRowExpiration(t, guide[0], "adobe_lakeHouse")[field], rowExpiration(t, answers[0], "adobe_lakeHouse")[field], field)
	}
	require.Equal(t, guideRowExpiration(t, guide[0], "adobe_unifiedProfile")["defaultValue"], rowExpiration(t, answers[0], "adobe_unifiedProfile")["defaultValue"])
	require.Equal(t, "P1D", rowExpiration(t, answers[0], "adobe_unifiedProfile")["minValue"])

	// The PATCHes: each store's ttlValue, valueStatus and setBy are the guide's, the profile lowered with the lake
	// to P3M and left there when the lake goes up to P6M.
	for i := 1; i < 3; i++ {
		for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
			want, got := guideRowExpiration(t, guide[i], store), rowExpiration(t, answers[i], store)
			for _, field := range []string{"ttlValue", "valueStatus", "setBy"} {
				require.Equal(t, want[field], got[field], "answer %d, %s, %s", i, store, field)
			}
		}
	}
	for _, store := range []string{"adobe_lakeHouse", "adobe_unifiedProfile"} {
		re := rowExpiration(t, answers[1], store)
		want := map[string]any{"ttlValue": "P3M", "valueStatus": "custom", "setBy": "user", "updated": re["updated"],
			"nextRun":          float64(testNextRun.UnixMilli()),
			"deletionManifest": false} // off unless PATCHed (README, "Which rows went: deletion manifests")
		if store == "adobe_lakeHouse" {
			want["rowOverrides"] = "allowed" // the dataset's switch for per-row expiry (README, "Refusing per-row expiry")
		}
		require.Equal(t, want, re, store)
	}
	require.Equal(t, "P6M", rowExpiration(t, answers[2], "adobe_lakeHouse")["ttlValue"])
	require.Equal(t, "P3M", rowExpiration(t, answers[2], "adobe_unifiedProfile")["ttlValue"])
}
