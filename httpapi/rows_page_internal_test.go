package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// TestWriteRowMatchesRowDocument: a row spliced by writeRow is, as JSON, exactly the document rowDocument builds,
// whatever the payload holds, including the service's own keys (which must lose).
func TestWriteRowMatchesRowDocument(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 1, 10, 0, 0, 123_000_000, time.UTC)
	expiry := ts.AddDate(1, 0, 0)
	for _, tc := range []struct {
		name    string
		payload string
		expiry  *time.Time
	}{
		{"Empty", `{}`, nil},
		{"AsPostgresPrintsIt", `{"a": 1.0, "b": [1, 2, {"c": null}], "n": 12345678901234567890, "s": "é \"q\" \u0001 <tag>"}`, &expiry},
		{"NestedServiceKey", `{"ctx": {"_id": "inner", "timestamp": "x"}}`, nil},
		{"TopServiceKey", `{"_id": "theirs", "_expiresAt": "never", "k": true}`, &expiry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := catalog.Row{ID: `id-"1"`, Timestamp: ts, IngestedAt: ts.Add(time.Minute), Payload: []byte(tc.payload), Expiry: tc.expiry}
			want, err := rowDocument(r)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, writeRow(&buf, r))
			dec := json.NewDecoder(&buf)
			dec.UseNumber()
			var got map[string]any
			require.NoError(t, dec.Decode(&got), "%s", buf.String())
			require.Equal(t, want, got)
		})
	}
}
