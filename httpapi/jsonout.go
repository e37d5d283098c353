package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/labstack/echo/v4"
)

// Every JSON answer is written the same way, whether by c.JSON (jsonSerializer) or built by hand (marshal,
// writeJSON): compact, with &, < and > as they are (encoding/json escapes them by default for HTML pages, which
// makes a link's query read \u0026), and ending with a newline, so that the shell prompt after curl starts on its
// own line.

// marshal is json.Marshal without the HTML escapes.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeJSON answers with body, a JSON document built by hand, and the final newline.
func writeJSON(c echo.Context, status int, body []byte) error {
	if !bytes.HasSuffix(body, []byte("\n")) {
		body = append(body, '\n')
	}
	return c.Blob(status, echo.MIMEApplicationJSON, body)
}

// jsonSerializer is Echo's JSON serializer without the HTML escapes; json.Encoder ends what it writes with a
// newline.
type jsonSerializer struct{ echo.DefaultJSONSerializer }

// Serialize writes i as JSON to the answer.
func (jsonSerializer) Serialize(c echo.Context, i any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}
