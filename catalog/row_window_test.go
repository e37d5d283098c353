package catalog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// TestTimestampAtMostADayAhead: an event's timestamp may lie at most catalog.MaxFutureSkew after the time of
// ingestion. One line per month of timestamp over 400 years made the row store 5,000 partitions (#15); a line
// from the future is refused with its reason, and the lines around it are kept.
func TestTimestampAtMostADayAhead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	rc := catalog.RowContext{Dataset: &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.TimeSeries}},
		Lake: catalog.BuiltinLimits[catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}], Now: now}
	for _, tc := range []struct {
		name string
		ts   time.Time
		ok   bool
	}{
		{"Past", time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"Now", now, true},
		{"ADayAhead", now.Add(catalog.MaxFutureSkew), true},
		{"ASecondMore", now.Add(catalog.MaxFutureSkew + time.Second), false},
		{"CenturiesAhead", time.Date(2299, 12, 1, 0, 0, 0, 0, time.UTC), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := rc.ParseRow(fmt.Appendf(nil, `{"timestamp":%q}`, tc.ts.Format(time.RFC3339)))
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var e *catalog.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, catalog.EINVALID, e.Code)
			require.Equal(t, "timestamp", e.Field)
			require.Contains(t, e.Message, "is in the future: it may lie at most 24 hours after the time of ingestion (2026-11-25T12:00:00Z)")
		})
	}
}
