package httpapi

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
)

// openAPIYAML is the service's OpenAPI document, the one source of it in the repository. The tests validate every
// request they send and every answer they get against it, so it cannot drift from the routes.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON is the document as JSON, converted once: YAML is easier to write and review, JSON what tools fetch.
var openAPIJSON = sync.OnceValue(func() []byte {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIYAML)
	if err != nil {
		panic(fmt.Sprintf("httpapi/openapi.yaml does not load: %v", err))
	}
	raw, err := marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("httpapi/openapi.yaml does not render as JSON: %v", err))
	}
	return readingOrder(raw)
})

// openAPIOrder is the order of the document's top-level keys as a reader looks for them (and as openapi.yaml has
// them): what it is, then its routes, then the shared parts. The library writes them in alphabetical order, which
// starts with the longest and least telling, components.
var openAPIOrder = []string{"openapi", "info", "servers", "security", "tags", "paths", "components", "externalDocs"}

// readingOrder rewrites the top level of a JSON object with openAPIOrder's keys first, the others after them as
// they came, and a final newline.
func readingOrder(raw []byte) []byte {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		panic(fmt.Sprintf("httpapi/openapi.yaml renders as JSON that is not an object: %v", err))
	}
	keys := slices.Sorted(maps.Keys(top))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, _ := marshal(k)
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(top[k])
	}
	buf.WriteString("}\n")
	return buf.Bytes()
}

// rank is a key's place in openAPIOrder, after all of them when it is not there.
func rank(key string) int {
	if i := slices.Index(openAPIOrder, key); i >= 0 {
		return i
	}
	return len(openAPIOrder)
}

// OpenAPIDocument returns the service's OpenAPI 3.0 document as JSON, exactly as GET /openapi.json serves it. It
// panics if the embedded document does not load, which the tests catch before a build ships.
func OpenAPIDocument() []byte { return openAPIJSON() }

func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIJSON())
}
