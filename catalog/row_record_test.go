package catalog_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// A record's TTL counts from its write: the event reader dates each record line by the ingestion (or an import's
// _ingestedAt), requires its _id and counts its _ttl from that write.
func TestParseRecordRow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ds := &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.Record, ManagedBy: catalog.Customer}}
	rc := catalog.RowContext{Dataset: ds, Lake: catalog.BuiltinLimits[ds.PolicyKey(catalog.LakeHouse)], Now: now}
	require.Equal(t, retention.LastWrite, ds.Clock())

	t.Run("DatedByItsWrite", func(t *testing.T) {
		t.Parallel()
		in, err := rc.ParseRow([]byte(`{"_id":"m1","tier":"gold","_ttl":"P7D"}`))
		require.NoError(t, err)
		require.Equal(t, now, in.Timestamp)
		require.Equal(t, now, *in.IngestedAt)
		require.Equal(t, now.AddDate(0, 0, 7), *in.OwnExpiry)
		require.JSONEq(t, `{"tier":"gold"}`, string(in.Payload))
	})

	t.Run("ImportKeepsItsWriteTime", func(t *testing.T) {
		t.Parallel()
		imp := rc
		imp.AllowIngestedAt = true
		in, err := imp.ParseRow([]byte(`{"_id":"m1","_ingestedAt":"2025-01-02T03:04:05Z","_ttl":"P1D"}`))
		require.NoError(t, err)
		written := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
		require.Equal(t, written, in.Timestamp)
		require.Equal(t, written.AddDate(0, 0, 1), *in.OwnExpiry)
	})

	for _, tc := range []struct {
		name, line, field, reason string
	}{
		{"NoID", `{"tier":"gold"}`, "_id", "_id is required in a record dataset"},
		{"NullID", `{"_id":null}`, "_id", "_id is required in a record dataset"},
		{"Timestamp", `{"_id":"m1","timestamp":"2026-11-01T00:00:00Z"}`, "timestamp", "set by the service"},
		{"OverrideBelowMin", `{"_id":"m1","_expiresAt":"2026-11-24T13:00:00Z"}`, "_expiresAt", "the row's write + minValue P1D"},
		{"OverrideAboveMax", `{"_id":"m1","_ttl":"P11Y"}`, "_ttl", "the row's write + maxValue P10Y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := rc.ParseRow([]byte(tc.line))
			var ce *catalog.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
			require.Contains(t, ce.Message, tc.reason)
		})
	}
}

// A row's own expiry carries the field that set it, which the store records beside the instant: the same instant
// comes from a _ttl or an _expiresAt, and only the field tells an explanation which. _ttl: -1 is Never, no own expiry.
func TestParseRowNamesTheFieldOfItsOwnExpiry(t *testing.T) {
	t.Parallel()
	ds := &catalog.Dataset{Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}}
	rc := catalog.RowContext{Dataset: ds, Lake: catalog.Limits{Min: retention.Period{Days: 1}}}
	expiry := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, line string
		field      catalog.OverrideField
		own        *time.Time
	}{
		{"TTL", `{"timestamp":"2026-01-01T00:00:00Z","_ttl":"P89D"}`, catalog.OverrideTTL, &expiry},
		{"ExpiresAt", `{"timestamp":"2026-01-01T00:00:00Z","_expiresAt":"2026-03-31T00:00:00Z"}`, catalog.OverrideExpiresAt, &expiry},
		{"Never", `{"timestamp":"2026-01-01T00:00:00Z","_ttl":-1}`, catalog.NoOverrideField, nil},
		{"None", `{"timestamp":"2026-01-01T00:00:00Z"}`, catalog.NoOverrideField, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, err := rc.ParseRow([]byte(tc.line))
			require.NoError(t, err)
			require.Equal(t, tc.field, in.OwnExpiryField)
			require.Equal(t, tc.own, in.OwnExpiry)
		})
	}
	require.Equal(t, "_ttl", catalog.OverrideTTL.String())
	require.Equal(t, "_expiresAt", catalog.OverrideExpiresAt.String())
	require.Empty(t, catalog.NoOverrideField.String())
}
