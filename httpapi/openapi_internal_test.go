package httpapi

import (
	"context"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// loadOpenAPI loads the document GET /openapi.json serves.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "httpapi/openapi.yaml is a valid OpenAPI 3.0 document")
	return doc
}

// echoParam is a path parameter as Echo writes it (:id), to be written as OpenAPI writes it ({id}).
var echoParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// TestOpenAPIListsEveryRoute holds the document's operations equal to Echo's routes, both ways: a route added
// without its documentation, or documentation of a route that is gone, fails here.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	t.Parallel()
	s := New(Config{Holds: struct{ catalog.HoldService }{}, Explain: struct{ catalog.RowExpiryExplainer }{}, Audit: struct{ audit.Service }{},
		Expirations: struct{ catalog.ExpirationService }{}, Manifests: struct{ catalog.ManifestService }{},
		WorkOrders: struct{ catalog.WorkOrderService }{}, Registry: prometheus.NewRegistry()})
	served := map[string]bool{}
	for _, r := range s.echo.Routes() {
		if r.Method == echoRouteNotFound {
			continue
		}
		served[r.Method+" "+openAPIPath(r.Path)] = true
	}
	documented := map[string]bool{}
	for path, item := range loadOpenAPI(t).Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	require.NotEmpty(t, served)
	require.Contains(t, served, "GET /data/foundation/catalog/dataSets/{id}", "the Adobe prefix is served")
	require.Empty(t, missing(served, documented), "routes Echo serves that httpapi/openapi.yaml lacks")
	require.Empty(t, missing(documented, served), "operations httpapi/openapi.yaml documents that Echo does not serve")
}

// openAPIPath writes an Echo route's path as OpenAPI writes it: :id is {id}, and the console's wildcard /ui/* is
// /ui/{asset}, which holds as long as the console's files sit side by side (a path parameter cannot span a /).
func openAPIPath(path string) string {
	path = echoParam.ReplaceAllString(path, "{$1}")
	if prefix, ok := strings.CutSuffix(path, "/*"); ok {
		return prefix + "/{asset}"
	}
	return path
}

// echoRouteNotFound is the method Echo lists for the catch-all it adds to groups with middleware.
const echoRouteNotFound = "echo_route_not_found"

// missing returns the keys of want that have lacks, sorted.
func missing(want, have map[string]bool) []string {
	var out []string
	for k := range want {
		if !have[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIListsEveryProblemType holds the document's ProblemType enum equal to the problem types the code names
// (the scan of TestProblemTypesStyle) and the error codes of the one table, both ways.
func TestOpenAPIListsEveryProblemType(t *testing.T) {
	t.Parallel()
	inCode := map[string]bool{}
	for code := range codes {
		inCode[code] = true
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			for typ := range problemTypesIn(t, path) {
				inCode[typ] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, v := range loadOpenAPI(t).Components.Schemas["ProblemType"].Value.Enum {
		documented[v.(string)] = true
	}
	require.Contains(t, inCode, "ttl-out-of-range", "the scan finds the code's types")
	require.Empty(t, missing(inCode, documented), "problem types the code names that the ProblemType enum of httpapi/openapi.yaml lacks")
	require.Empty(t, missing(documented, inCode), "problem types httpapi/openapi.yaml lists that no code names")
}

// TestOpenAPIDocumentIsServed checks that GET /openapi.json answers the document, without authentication.
func TestOpenAPIDocumentIsServed(t *testing.T) {
	t.Parallel()
	s := New(Config{Registry: prometheus.NewRegistry()})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, string(OpenAPIDocument()), rec.Body.String())
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	require.NoError(t, err)
	require.Equal(t, "3.0.3", doc.OpenAPI)
	require.Contains(t, slices.Collect(maps.Keys(doc.Components.SecuritySchemes)), "ims")
}
