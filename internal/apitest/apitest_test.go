package apitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/apitest"
)

// recordingTB is a testing.TB whose Errorf is recorded instead of failing the test, to see what Handler reports.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Helper() {}

// answer is a handler answering status with body, as content type ct.
func answer(status int, ct, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

const problem = `{"type":"invalid-parameter","title":"Bad Request","status":400,"detail":"limit must be from 1 to 100","field":"limit"}`

// gateway are the headers every authenticated call carries.
var gateway = map[string]string{"Authorization": "Bearer t", "x-api-key": "k", "x-gw-ims-org-id": "ORG@AdobeOrg"}

func TestHandlerReportsWhatTheDocumentDoesNotSay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		path    string
		headers map[string]string
		service http.Handler
		opts    []apitest.Option
		want    string // in the one error reported; empty for none
	}{
		{"DocumentedAnswer", "/healthz", nil, answer(200, "application/json", `{"status":"ok"}`), nil, ""},
		{"UndocumentedField", "/healthz", nil, answer(200, "application/json", `{"status":"ok","uptime":3}`), nil, "not as documented"},
		{"UndocumentedStatus", "/healthz", nil, answer(http.StatusTeapot, "application/json", `{"status":"ok"}`), nil, "status is not supported"},
		{"WrongContentType", "/healthz", nil, answer(200, "text/html", `<p>ok</p>`), nil, "not as documented"},
		{"UndocumentedRouteServed", "/nowhere", nil, answer(200, "application/json", `{}`), nil, "no such operation"},
		{"UndocumentedRouteRefused", "/nowhere", nil, answer(404, "application/problem+json", `{}`), nil, ""},
		{"InvalidRequestAccepted", "/dataSets?limit=1000", gateway, answer(200, "application/json", `{}`), nil, "calls invalid"},
		{"InvalidRequestRefused", "/dataSets?limit=1000", gateway, answer(400, "application/problem+json", problem), nil, ""},
		{"MissingGatewayHeaderAccepted", "/dataSets", nil, answer(200, "application/json", `{}`), nil, "calls invalid"},
		{"InternalError", "/dataSets", gateway, answer(500, "application/problem+json", `{"type":"internal","title":"Internal Server Error","status":500,"detail":"Internal error."}`), nil, "is a bug"},
		{"InternalErrorAllowed", "/dataSets", gateway, answer(500, "application/problem+json", `{"type":"internal","title":"Internal Server Error","status":500,"detail":"Internal error."}`), []apitest.Option{apitest.AllowInternalErrors()}, ""},
		{"ConsoleAsset", "/ui/app.js", nil, answer(200, "text/javascript; charset=utf-8", `export {}`), nil, ""},
		{"ConsoleAssetOfAnUndocumentedType", "/ui/app.js", nil, answer(200, "application/wasm", "\x00asm"), nil, "not as documented"},
		{"UndocumentedProblemType", "/dataSets", gateway, answer(400, "application/problem+json", `{"type":"oops","title":"Bad Request","status":400,"detail":"d"}`), nil, "not as documented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			srv := httptest.NewServer(apitest.Handler(rec, tc.service, tc.opts...))
			defer srv.Close()
			req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			require.NoError(t, err)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			srv.Close() // waits for the handler, and so for its report
			if tc.want == "" {
				require.Empty(t, rec.errs)
				return
			}
			require.Len(t, rec.errs, 1, "%q", rec.errs)
			require.Contains(t, rec.errs[0], tc.want)
			require.True(t, strings.HasPrefix(rec.errs[0], "openapi: GET "+tc.path), rec.errs[0])
		})
	}
}
