package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
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
	raw, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("httpapi/openapi.yaml does not render as JSON: %v", err))
	}
	return raw
})

// OpenAPIDocument returns the service's OpenAPI 3.0 document as JSON, exactly as GET /openapi.json serves it. It
// panics if the embedded document does not load, which the tests catch before a build ships.
func OpenAPIDocument() []byte { return openAPIJSON() }

func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIJSON())
}
