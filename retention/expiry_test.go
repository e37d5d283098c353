package retention

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bounds only narrow what callers read, so they must never cut off a row the rule would judge the other way,
// and must stay close enough to the truth to be worth using. Checked on random TTLs, evaluation times and event
// times around month ends, where clamping makes calendar arithmetic non-monotonic.
func TestExpiryBounds(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	periods := []Period{{Months: 1}, {Months: 3}, {Months: 6}, {Years: 1}, {Years: 2, Months: 1, Days: 3}, {Weeks: 5}, {Days: 30}, {Months: 13, Days: 1}}
	start := time.Date(2023, time.January, 1, 0, 0, 0, 0, time.UTC)
	for range 2000 {
		ttl := periods[rng.IntN(len(periods))]
		at := start.Add(time.Duration(rng.Int64N(int64(3 * 365 * 24 * time.Hour))))

		through := ExpiredThrough(ttl, at)
		require.Less(t, at.Sub(ttl.AddTo(through)), 6*24*time.Hour, "ExpiredThrough(%s, %s) = %s is too cautious", ttl, at, through)
		after := LiveAfter(ttl, at)
		require.Less(t, ttl.AddTo(after).Sub(at), 6*24*time.Hour, "LiveAfter(%s, %s) = %s is too cautious", ttl, at, after)
		for range 20 {
			back := time.Duration(rng.Int64N(int64(40 * 24 * time.Hour)))
			ts := through.Add(-back)
			require.False(t, ttl.AddTo(ts).After(at), "%s + %s is after %s, but ExpiredThrough gave %s", ts, ttl, at, through)
			ts = after.Add(back + time.Nanosecond)
			require.True(t, ttl.AddTo(ts).After(at), "%s + %s is not after %s, but LiveAfter gave %s", ts, ttl, at, after)
		}
	}
}

func TestExpiryBoundsAtMonthEnd(t *testing.T) {
	t.Parallel()
	ttl := Period{Months: 1}
	at := time.Date(2024, time.February, 29, 10, 0, 0, 0, time.UTC)
	// 2024-01-30T23:00 + P1M = 2024-02-29T23:00, after at, though 2024-01-31T10:00 + P1M is exactly at.
	through := ExpiredThrough(ttl, at)
	require.True(t, through.Before(time.Date(2024, time.January, 30, 23, 0, 0, 0, time.UTC)), "got %s", through)
	after := LiveAfter(ttl, at)
	require.False(t, after.Before(time.Date(2024, time.January, 31, 10, 0, 0, 0, time.UTC)), "got %s", after)
}

// No row after the bound may be expired, whatever the history and whenever the row arrived.
func TestLastExpiredEvent(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 5))
	periods := []*Period{nil, {Months: 1}, {Months: 6}, {Years: 1}, {Days: 45}, {Years: 2}}
	start := time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for range 500 {
		var history []Setting
		from := start
		for i := range 1 + rng.IntN(4) {
			if i > 0 {
				until := from.Add(time.Duration(1+rng.IntN(200)) * day)
				history[i-1].Until = &until
				from = until
			}
			history = append(history, Setting{TTL: periods[rng.IntN(len(periods))], From: from})
		}
		at := from.Add(time.Duration(rng.IntN(400)) * day)
		last, ok := LastExpiredEvent(history, at)
		for range 50 {
			r := Row{
				Timestamp:  start.Add(time.Duration(rng.Int64N(int64(3 * 365 * day)))),
				IngestedAt: start.Add(time.Duration(rng.Int64N(int64(at.Sub(start)) + 1))),
			}
			if Expired(r, history, at) {
				require.True(t, ok, "a row is expired but no setting has a TTL")
				require.False(t, r.Timestamp.After(last), "row at %s is expired at %s, after the bound %s", r.Timestamp, at, last)
			}
		}
	}
}

func TestPlacedEvents(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	periods := []Period{{Months: 1}, {Months: 18}, {Years: 10}, {Days: 30}, {Weeks: 3}}
	start := time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)
	for range 5000 {
		ttl := periods[rng.IntN(len(periods))]
		ts := start.Add(time.Duration(rng.Int64N(int64(3 * 365 * 24 * time.Hour))))
		placed := ttl.AddTo(ts)
		from := time.Date(placed.Year(), placed.Month(), 1, 0, 0, 0, 0, time.UTC) // a monthly partition
		after, through := PlacedEvents(ttl, from, from.AddDate(0, 1, 0))
		require.True(t, ts.After(after) && !ts.After(through), "%s + %s = %s: outside (%s, %s]", ts, ttl, placed, after, through)
	}
}

// The shortcut the stores take for most rows: a row stored under the setting in force that no earlier setting can
// have expired (SettingAlone, from what EarlierOf recorded when that setting started) is expired exactly when its
// placed expiry has come. Rows arrive whenever, imports with ingestion times from before any setting included, with
// and without overrides.
func TestSettingAloneAgreesWithExpired(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 17))
	periods := []*Period{nil, {Months: 1}, {Months: 6}, {Years: 1}, {Days: 45}, {Years: 2}}
	start := time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	alone := 0
	for range 500 {
		var history []Setting
		from := start
		var earlier Earlier
		for i := range 1 + rng.IntN(4) {
			if i > 0 {
				until := from.Add(time.Duration(1+rng.IntN(200)) * day)
				history[i-1].Until = &until
				from = until
				earlier = EarlierOf(history, from)
			}
			history = append(history, Setting{TTL: periods[rng.IntN(len(periods))], From: from})
		}
		current := history[len(history)-1].TTL
		at := from.Add(time.Duration(rng.IntN(400)) * day)
		for range 50 {
			r := Row{
				Timestamp:  start.Add(time.Duration(rng.Int64N(int64(3 * 365 * day)))),
				IngestedAt: start.Add(time.Duration(rng.Int64N(int64(at.Sub(start)) + 1))),
			}
			switch rng.IntN(4) {
			case 0:
				own := r.Timestamp.Add(time.Duration(1+rng.IntN(400)) * day)
				r.OwnExpiry = &own
			case 1:
				r.Never = true
			}
			if !SettingAlone(r, current, earlier) {
				continue
			}
			alone++
			placed := r.Placed(current)
			require.Equal(t, Expired(r, history, at), placed != nil && !placed.After(at),
				"row %+v under %+v (earlier %+v) at %s", r, history, earlier, at)
		}
	}
	require.Greater(t, alone, 10000, "the shortcut applies to most rows")
}

func TestEarlierOf(t *testing.T) {
	t.Parallel()
	d := func(day int) *time.Time { v := time.Date(2024, time.January, day, 0, 0, 0, 0, time.UTC); return &v }
	month := &Period{Months: 1}
	require.Equal(t, Earlier{}, EarlierOf([]Setting{{TTL: nil, From: *d(1), Until: d(5)}}, *d(5)), "no TTL: nothing expired")
	e := EarlierOf([]Setting{{TTL: month, From: *d(1), Until: d(5)}, {TTL: nil, From: *d(5), Until: d(9)}}, *d(9))
	require.Equal(t, d(5), e.TTLUntil, "the end of the last setting with a TTL")
	require.NotNil(t, e.ExpiredThrough)
	last, _ := LastExpiredEvent([]Setting{{TTL: month, From: *d(1), Until: d(5)}}, *d(9))
	require.Equal(t, last, *e.ExpiredThrough)
}

// A record's TTL counts from its last write, a time-series row's from its event time; the rest of the rule reads
// only the clock start.
func TestClockStart(t *testing.T) {
	t.Parallel()
	event := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	written := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, event, EventTime.Start(event, written))
	require.Equal(t, written, LastWrite.Start(event, written))
	ttl := Period{Days: 30}
	row := Row{Timestamp: LastWrite.Start(event, written), IngestedAt: written}
	history := []Setting{{TTL: &ttl, From: event}}
	require.False(t, Expired(row, history, written.AddDate(0, 0, 29)), "30 days after the write, not the event")
	require.True(t, Expired(row, history, written.AddDate(0, 0, 30)))
}
