package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// TestParseIfMatch: every form of If-Match that RFC 9110 allows is read into the versions it names, and only those
// match the dataset's version (1.0.3 here); no header asks nothing.
func TestParseIfMatch(t *testing.T) {
	t.Parallel()
	ds := &catalog.Dataset{ID: "5ba9452f7de80408007fc52a", Version: 3}
	for _, tc := range []struct {
		name, header string
		match        bool
	}{
		{"None", "", true},
		{"Quoted", `"1.0.3"`, true},
		{"Bare", `1.0.3`, true},
		{"Weak", `W/"1.0.3"`, true},
		{"Any", `*`, true},
		{"ListHoldingIt", `"1.0.1", W/"1.0.3"`, true},
		{"ListHoldingAny", `"1.0.1", *`, true},
		{"Stale", `"1.0.2"`, false},
		{"QuotedStarIsAVersion", `"*"`, false},
		{"Blank", ` `, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := parseIfMatch(tc.header)
			require.Equal(t, tc.header == "", p == nil)
			err := p.Check(ds)
			if tc.match {
				require.NoError(t, err)
				return
			}
			var e *catalog.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, catalog.EPRECONDITION, e.Code)
			require.Equal(t, "version-mismatch", e.Type)
			require.Equal(t, "If-Match", e.Field)
			require.Equal(t, `If-Match `+tc.header+` does not match the current version "1.0.3" of dataset `+ds.ID, e.Message)
		})
	}
}
