package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// MaxMetadataBody is the largest body a metadata call (create, patch) takes.
const MaxMetadataBody = 1 << 20

// errContentType is Adobe's wording for a missing or wrong Content-Type.
const errContentType = "A valid content-type must be specified"

// requireJSON checks that the request declares a JSON body.
func requireJSON(c echo.Context) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if ct == "" {
		return &catalog.Error{Code: catalog.EINVALID, Type: "missing-content-type", Field: "Content-Type",
			Message: errContentType + ": send Content-Type: application/json"}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != echo.MIMEApplicationJSON {
		return &catalog.Error{Code: catalog.EUNSUPPORTED, Type: "unsupported-content-type", Field: "Content-Type",
			Message: fmt.Sprintf("%s: %q is not accepted here; send Content-Type: application/json", errContentType, catalog.Clip(ct))}
	}
	return nil
}

// readJSONObject reads a JSON object body of at most MaxMetadataBody bytes. Numbers stay json.Number, so values the
// service stores as sent (extension keys) keep their exact text.
func readJSONObject(c echo.Context) (map[string]any, error) {
	return readJSONObjectMax(c, MaxMetadataBody)
}

// readJSONObjectMax is readJSONObject with another bound on the body (a work order's identities).
func readJSONObjectMax(c echo.Context, most int64) (map[string]any, error) {
	if err := requireJSON(c); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, most))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, catalog.Errorf(catalog.ETOOLARGE, "the request body is over the %d-byte limit of this call", most)
		}
		return nil, catalog.Errorf(catalog.EINVALID, "the request body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &catalog.Error{Code: catalog.EINVALID, Type: "malformed-json", Field: "body",
			Message: "the request body is not valid JSON: " + catalog.JSONErrorText(err)}
	}
	if dec.More() || !onlyWhitespaceLeft(dec) {
		return nil, &catalog.Error{Code: catalog.EINVALID, Type: "malformed-json", Field: "body",
			Message: "the request body must hold exactly one JSON value"}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &catalog.Error{Code: catalog.EINVALID, Type: "invalid-type", Field: "body",
			Message: "the request body must be a JSON object"}
	}
	// Decoding has turned bytes that are not UTF-8 into U+FFFD: refuse them rather than store a lookalike.
	if err := catalog.CheckJSONText(body, "body"); err != nil {
		return nil, err
	}
	return obj, nil
}

func onlyWhitespaceLeft(dec *json.Decoder) bool {
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}
