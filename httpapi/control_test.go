package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 28, finding 8: a dataset name holding ESC[2K\r…ESC]0;pwned BEL, a hold reason holding \r ESC[1A and a
// reference holding U+202E were all stored (201), and reached an operator's terminal. Every name, reason, reference,
// display name, description and tag now refuses C0 and C1 control characters and the bidirectional formatting
// characters with a 400 naming the field; a description and a hold's reason keep tab and line feed.
func TestControlCharactersInTenantTextAre400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	expiration := b.do(t, request{method: http.MethodPost, path: "/data/core/hygiene/ttl",
		body: map[string]any{"datasetId": id, "expiry": "2026-12-31", "displayName": "retire"}})
	require.Equal(t, http.StatusCreated, expiration.status, "body: %s", expiration.body)
	ttlID := expiration.json(t)["ttlId"].(string)
	other := b.createDataset(t, datasetOpts{name: "other"})
	for _, tc := range []struct {
		name, method, path string
		body               map[string]any
		field              string
	}{
		{"CreateName", http.MethodPost, "/dataSets", map[string]any{"name": "a\x1b[2K\rforged\x1b]0;pwned\a"}, "name"},
		{"CreateNameC1", http.MethodPost, "/dataSets", map[string]any{"name": "a\u009b2K"}, "name"},
		{"CreateNameBidi", http.MethodPost, "/dataSets", map[string]any{"name": "invoice\u202efdp.exe"}, "name"},
		{"CreateNameTab", http.MethodPost, "/dataSets", map[string]any{"name": "a\tb"}, "name"},
		{"CreateDescription", http.MethodPost, "/dataSets", map[string]any{"name": "n", "description": "x\x1b]0;pwned\a"}, "description"},
		{"CreateDescriptionCR", http.MethodPost, "/dataSets", map[string]any{"name": "n", "description": "x\r\x1b[1A"}, "description"},
		{"CreateTagName", http.MethodPost, "/dataSets", map[string]any{"name": "n", "tags": map[string]any{"t\x1b": []string{"v"}}}, `tags["t\x1b"]`},
		{"CreateTagValue", http.MethodPost, "/dataSets", map[string]any{"name": "n", "tags": map[string]any{"t": []string{"ok", "v\r"}}}, "tags.t[1]"},
		{"PatchV1Name", http.MethodPatch, "/dataSets/" + id, map[string]any{"name": "x\u202ey"}, "name"},
		{"PutName", http.MethodPut, "/dataSets/" + id, map[string]any{"name": "x\u0085y"}, "name"},
		{"PatchV2Description", http.MethodPatch, "/v2/dataSets/" + id, map[string]any{"description": "\r\x1b[1A"}, "description"},
		{"HoldReason", http.MethodPost, "/dataSets/" + other + "/holds", map[string]any{"reason": "r\r\x1b[1A"}, "reason"},
		{"HoldReference", http.MethodPost, "/dataSets/" + other + "/holds", map[string]any{"reason": "r", "reference": "case \u202e411"}, "reference"},
		{"ExpirationDisplayName", http.MethodPost, "/data/core/hygiene/ttl", map[string]any{"datasetId": other, "expiry": "2026-12-31", "displayName": "a\x1bb"}, "displayName"},
		{"ExpirationDescription", http.MethodPost, "/data/core/hygiene/ttl", map[string]any{"datasetId": other, "expiry": "2026-12-31", "displayName": "a", "description": "\x1b[2J"}, "description"},
		{"ExpirationUpdateDisplayName", http.MethodPut, "/data/core/hygiene/ttl/" + ttlID, map[string]any{"displayName": "\x07"}, "displayName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := requireProblem(t, b.do(t, request{method: tc.method, path: tc.path, body: tc.body}), http.StatusBadRequest, tc.field)
			require.Equal(t, "control-character", p.Type, "detail: %s", p.Detail)
			require.NotContains(t, p.Detail, "\x1b", "the refusal does not carry the character itself")
		})
	}
	t.Run("ProseKeepsTabAndLineFeed", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodPost, path: "/dataSets",
			body: map[string]any{"name": "prose", "description": "first line\n\tindented"}})
		require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
		resp = b.do(t, request{method: http.MethodPost, path: "/dataSets/" + other + "/holds",
			body: map[string]any{"reason": "litigation\n\tcase 2026-114", "reference": "case 2026-114 (عربي)"}})
		require.Equal(t, http.StatusCreated, resp.status, "body: %s", resp.body)
	})
}
