package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/jobs"
)

// weeklySunday3am is the data lake's default schedule (config.DefaultLakeSchedule).
const weeklySunday3am = "0 3 * * 0"

func TestDueSlot(t *testing.T) {
	t.Parallel()
	weekly, err := jobs.ParseSchedule(weeklySunday3am)
	require.NoError(t, err)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	cases := []struct {
		name, last, now, want string
	}{
		{"NothingDueYet", "2026-11-22T03:00:00Z", "2026-11-28T23:59:59Z", ""},
		{"DueAtTheSlot", "2026-11-22T03:00:00Z", "2026-11-29T03:00:00Z", "2026-11-29T03:00:00Z"},
		{"MissedSlotsCollapseToTheLatest", "2026-11-01T03:00:00Z", "2026-11-23T12:00:00Z", "2026-11-22T03:00:00Z"},
		{"LastIsTheSlotItself", "2026-11-29T03:00:00Z", "2026-11-29T03:00:30Z", ""},
	}
	for _, tc := range cases {
		slot, ok := weekly.DueSlot(at(tc.last), at(tc.now))
		if tc.want == "" {
			require.False(t, ok, tc.name)
			continue
		}
		require.True(t, ok, tc.name)
		require.Equal(t, at(tc.want), slot, tc.name)
	}
	require.Equal(t, 7*24*time.Hour, weekly.Period(at("2026-11-23T00:00:00Z")))
	_, err = jobs.ParseSchedule("every sunday")
	require.Error(t, err)
}
