package httpapi_test

import (
	"encoding/csv"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 28, finding 10: the audit export's CSV carried cells a spreadsheet runs as formulas: =1+2 from a client's
// X-Request-ID, @SUM(1+1)*cmd|' /C calc'!A0 from a renamed dataset. A cell starting with =, +, -, @, tab or CR is
// now written after a single quote, as OWASP recommends; the console downloads the API's CSV as it is.
func TestAuditCSVNeutralisesFormulas(t *testing.T) {
	t.Parallel()
	b := setupBounds(t)
	const formula = "@SUM(1+1)*cmd|' /C calc'!A0"
	id := b.createDataset(t, datasetOpts{name: "-2+3", headers: map[string]string{"X-Request-ID": "=1+2"}})
	resp := b.do(t, request{method: http.MethodPut, path: "/dataSets/" + id, body: map[string]any{"name": formula},
		headers: map[string]string{"X-Request-ID": "+cmd"}})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)

	resp = b.do(t, request{method: http.MethodGet, path: "/audit/export?format=csv"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	records, err := csv.NewReader(strings.NewReader(string(resp.body))).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 3, "a header, the Create and the Update: %s", resp.body)
	var cells []string
	for _, rec := range records {
		for _, cell := range rec {
			require.False(t, cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])), "cell %q starts a formula", cell)
			cells = append(cells, cell)
		}
	}
	require.Contains(t, cells, "'"+formula, "the renamed dataset's name, neutralised")
	require.Contains(t, cells, "'-2+3")
	require.Contains(t, cells, "'=1+2", "the client's request id, neutralised")
	require.Contains(t, cells, "'+cmd")
}
