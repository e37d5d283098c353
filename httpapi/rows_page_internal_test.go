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

// TestStoredServiceFieldsNeverShow: a row stored before ingestion refused _expired and _replacedAt, with them at its
// top, reads with the service's values only: absent on a current, unexpired row, and the service's own on a kept
// version.
func TestStoredServiceFieldsNeverShow(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	replaced := ts.Add(time.Hour)
	payload := []byte(`{"_expired": true, "_replacedAt": "2020-01-01T00:00:00Z", "memo": "live"}`)
	for _, tc := range []struct {
		name string
		row  catalog.Row
		want map[string]any
	}{
		{"Current", catalog.Row{ID: "a", Timestamp: ts, IngestedAt: ts, Payload: payload},
			map[string]any{"_id": "a", "timestamp": "2026-11-01T10:00:00Z", "_ingestedAt": "2026-11-01T10:00:00Z", "memo": "live"}},
		{"Kept", catalog.Row{ID: "a", Timestamp: ts, IngestedAt: ts, Payload: payload, ReplacedAt: &replaced},
			map[string]any{"_id": "a", "timestamp": "2026-11-01T10:00:00Z", "_ingestedAt": "2026-11-01T10:00:00Z", "memo": "live",
				"_replacedAt": "2026-11-01T11:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			require.NoError(t, writeRow(&buf, tc.row))
			var got map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &got), "%s", buf.String())
			require.Equal(t, tc.want, got)
		})
	}
}

// TestCursorRoundTrip: a cursor after a version a hold kept carries its replacement time, one after a current row
// does not, and an _id holding the separators survives either.
func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 1, 10, 0, 0, 123_000_000, time.UTC)
	replaced := ts.Add(time.Minute)
	for _, cur := range []catalog.RowCursor{
		{Timestamp: ts, ID: "plain"},
		{Timestamp: ts, ID: "a|b~c", ReplacedAt: &replaced},
		{Timestamp: ts, ID: "x~y|z"},
	} {
		got, err := decodeCursor(encodeCursor(cur))
		require.NoError(t, err)
		require.Equal(t, cur, got)
	}
}
