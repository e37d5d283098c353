package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
)

// rowsPageBundle is a database with one dataset per kind of row the tests read.
type rowsPageBundle struct {
	rows   *postgres.RowService
	caller *catalog.Caller
}

// dataset creates a dataset holding n rows r00, r01, … in that order, each with the field "pad": pad.
func (b *rowsPageBundle) dataset(t *testing.T, datasets *postgres.DatasetService, name string, n int, pad string) string {
	t.Helper()
	ctx := context.Background()
	ds, err := datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: name,
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Second)
	res, err := ingest(ctx, b.rows, b.caller, ds.ID, func(yield func([]byte) bool) {
		for i := range n {
			data := fmt.Sprintf(`{"_id":"r%02d","timestamp":%q,"pad":"%s"}`, i, now.Add(time.Duration(i-60)*time.Minute).Format(time.RFC3339), pad)
			if !yield([]byte(data)) {
				return
			}
		}
	}, catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, n, res.Accepted)
	return ds.ID
}

// TestFindRowsWithinBytes: with MaxBytes, a page ends before the row that would take its payloads' JSON past it,
// says it was cut, and always holds at least one row.
func TestFindRowsWithinBytes(t *testing.T) {
	t.Parallel()
	db := testdb.NewDB(t)
	b := &rowsPageBundle{rows: postgres.NewRowService(db, 0),
		caller: &catalog.Caller{User: "u", ClientID: "c", Org: "ROWS@AdobeOrg", Sandbox: "prod", RequestID: "r"}}
	datasets := postgres.NewDatasetService(db)
	// Payloads of 100 bytes as JSON text ({"pad": "x…"}), and payloads whose text is six times what is stored: every
	// character of their string is escaped (\u0001).
	plain := b.dataset(t, datasets, "plain", 40, strings.Repeat("x", 89))
	escaped := b.dataset(t, datasets, "escaped", 10, strings.Repeat(`\u0001`, 50))

	for _, tc := range []struct {
		name      string
		dataset   string
		limit     int
		maxBytes  int
		available int // rows in the dataset
		atLeast   int // rows the page must hold: MaxBytes may be measured a little short, never long
	}{
		{"Unbounded", plain, 30, 0, 40, 30},
		{"LimitFirst", plain, 30, 10_000, 40, 30},
		{"BytesFirst", plain, 30, 1_050, 40, 9},
		{"AlwaysOneRow", plain, 30, 10, 40, 1},
		{"LastRowsFit", plain, 50, 10_000, 40, 40},
		{"SecondFetch", plain, 1000, 100 * 39, 40, 35},
		{"EscapesPrintLarger", escaped, 100, 1_000, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			page, err := b.rows.FindRows(context.Background(), b.caller, tc.dataset,
				catalog.RowFilter{Store: catalog.LakeHouse, Limit: tc.limit, MaxBytes: tc.maxBytes})
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(page.Rows), tc.atLeast)
			total := 0
			for i, r := range page.Rows {
				require.Equal(t, fmt.Sprintf("r%02d", i), r.ID, "the page's rows in order, from the first")
				total += len(r.Payload)
			}
			if tc.maxBytes > 0 && len(page.Rows) > 1 {
				require.LessOrEqual(t, total, tc.maxBytes, "the rows' JSON")
			}
			require.Equal(t, len(page.Rows) < min(tc.limit, tc.available), page.Cut, "cut short of rows that follow")
		})
	}
}
