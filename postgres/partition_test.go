package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// fillAhead places rows at every expiry from just after now to year 9999, as the worst tenant would, on top of the
// partitions existing, and returns the partitions there are then.
func fillAhead(now time.Time, existing []partitionSpec) []partitionSpec {
	known := map[time.Time]bool{}
	for _, p := range existing {
		known[p.lower] = true
	}
	e := now.Add(time.Second)
	for e.Before(farBoundary) {
		p := placedAt(catalog.LakeHouse, &e, now, existing)
		if !p.contains(e) {
			panic("placedAt returned a partition that does not hold the expiry " + e.String())
		}
		if !known[p.lower] {
			known[p.lower] = true
			existing = append(existing, p)
		}
		e = p.upper
	}
	return existing
}

// TestPartitionCountIsBounded holds the documented bound: whatever expiries rows have, a store never has more than
// maxPartitionsAhead partitions covering the current month or later, at dates from 2020 to 2400 (the cells beyond
// the horizon line up with decades and centuries differently from year to year), and while a tenant fills every
// expiry ahead again every quarter for 12 years, the partitions made earlier being coarser, not more.
func TestPartitionCountIsBounded(t *testing.T) {
	t.Parallel()
	most := 0
	// check returns the partitions ahead of now's month: those behind it cannot hold a new row's placement.
	check := func(now time.Time, parts []partitionSpec) []partitionSpec {
		month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		var ahead []partitionSpec
		for _, p := range parts {
			if p.upper.After(month) {
				ahead = append(ahead, p)
			}
		}
		most = max(most, len(ahead))
		require.LessOrEqual(t, len(ahead), maxPartitionsAhead, "partitions ahead of %s", now)
		return ahead
	}
	for now := time.Date(2020, 1, 31, 23, 0, 0, 0, time.UTC); now.Year() < 2400; now = now.AddDate(4, 7, 0) {
		check(now, fillAhead(now, nil))
	}
	var parts []partitionSpec
	for now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC); now.Year() < 2039; now = now.AddDate(0, 3, 0) {
		parts = check(now, fillAhead(now, parts))
	}
	t.Logf("at most %d partitions ahead of the current month (bound %d)", most, maxPartitionsAhead)
}

// TestHorizonCoversBuiltinLimits: every expiry the built-in limits allow, from a timestamp at most
// catalog.MaxFutureSkew ahead, gets a partition of its own month, so that no coarse cell is ever made under them.
func TestHorizonCoversBuiltinLimits(t *testing.T) {
	t.Parallel()
	for _, now := range []time.Time{
		time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2028, 2, 29, 23, 0, 0, 0, time.UTC),
	} {
		for key, limits := range catalog.BuiltinLimits {
			latest := limits.Max.AddTo(now.Add(catalog.MaxFutureSkew))
			p := placedAt(key.Store, &latest, now, nil)
			require.Equal(t, cellPartition, p.kind)
			require.Equal(t, p.lower.AddDate(0, 1, 0), p.upper, "%v at %s: %s is placed in %s", key, now, latest, p.name())
		}
	}
}

// TestPlacement pins where rows go: the past partition from a day after their expiry, their month within the
// horizon, the coarsest free cell a tenth of its distance wide beyond it, a partition that already covers them,
// and the far partition.
func TestPlacement(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return &v
	}
	year2040 := partitionSpec{store: catalog.LakeHouse, lower: *at("2040-01-01T00:00:00Z"), upper: *at("2041-01-01T00:00:00Z")}
	for _, tc := range []struct {
		name     string
		expiry   *time.Time
		existing []partitionSpec
		want     string
	}{
		{"Never", nil, nil, "lake_rows_pfar"},
		{"AfterYear9999", new(time.Date(10000, 3, 1, 0, 0, 0, 0, time.UTC)), nil, "lake_rows_pfar"},
		{"ExpiredADayAgo", at("2026-11-23T12:00:00Z"), nil, "lake_rows_ppast"},
		{"ExpiredInTheCentury1900s", at("1900-02-01T00:00:00Z"), nil, "lake_rows_ppast"},
		{"ExpiredAnHourAgo", at("2026-11-24T11:00:00Z"), nil, "lake_rows_p202611"},
		{"NextMonth", at("2026-12-02T00:00:00Z"), nil, "lake_rows_p202612"},
		{"LastMonthOfTheHorizon", at("2036-12-31T00:00:00Z"), nil, "lake_rows_p203612"},
		{"FirstYearBeyondTheHorizon", at("2037-01-15T00:00:00Z"), nil, "lake_rows_p2037_2038"},
		{"YearBeyondTheHorizon", at("2040-06-01T00:00:00Z"), nil, "lake_rows_p2040_2041"},
		{"DecadeAHundredYearsOut", at("2133-06-01T00:00:00Z"), nil, "lake_rows_p2130_2140"},
		{"CenturyAThousandYearsOut", at("4321-06-01T00:00:00Z"), nil, "lake_rows_p4300_4400"},
		{"CoveredByAnExistingCell", at("2040-06-01T00:00:00Z"), []partitionSpec{year2040}, "lake_rows_p2040_2041"},
		{"FinerWhereACoarserCellWouldOverlap", at("2130-03-01T00:00:00Z"),
			[]partitionSpec{{store: catalog.LakeHouse, lower: *at("2131-01-01T00:00:00Z"), upper: *at("2132-01-01T00:00:00Z")}}, "lake_rows_p2130_2131"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, placedAt(catalog.LakeHouse, tc.expiry, now, tc.existing).name())
		})
	}
}
