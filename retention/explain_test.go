package retention

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Explain is derived from the rule, never beside it: on random histories and rows (overrides, _ttl: -1, imports
// from before any setting), Expired at any time holds exactly from ExpiresAt on, Deletable exactly from DeletableAt
// on, and the governing setting is one under which the row expired at ExpiresAt.
func TestExplainFollowsTheRule(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 23))
	periods := []*Period{nil, {Months: 1}, {Months: 6}, {Years: 1}, {Days: 45}, {Years: 2}}
	start := time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	governedEarlier := 0
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
		grace := Period{Days: int64(rng.IntN(40))}
		now := from.Add(time.Duration(rng.IntN(400)) * day)
		for range 20 {
			r := Row{
				Timestamp:  start.Add(time.Duration(rng.Int64N(int64(3 * 365 * day)))),
				IngestedAt: start.Add(time.Duration(rng.Int64N(int64(now.Sub(start)) + 1))),
			}
			switch rng.IntN(4) {
			case 0:
				own := r.Timestamp.Add(time.Duration(1+rng.IntN(400)) * day)
				r.OwnExpiry = &own
			case 1:
				r.Never = rng.IntN(2) == 0
			}
			e := Explain(r, history, now, grace)
			require.Equal(t, Expired(r, history, now), e.Expired)
			if e.Governing >= 0 && e.Governing < len(history)-1 {
				governedEarlier++
			}
			requireExplanationHolds(t, r, history, grace, e)
		}
	}
	require.Positive(t, governedEarlier, "some rows are expired first by an earlier setting")
}

// requireExplanationHolds checks e against the rule at the times around its instants.
func requireExplanationHolds(t *testing.T, r Row, history []Setting, grace Period, e Explanation) {
	t.Helper()
	if e.ExpiresAt == nil {
		require.Equal(t, -1, e.Governing)
		require.Nil(t, e.DeletableAt)
		for _, at := range []time.Time{r.IngestedAt, r.IngestedAt.AddDate(500, 0, 0)} {
			require.False(t, Expired(r, history, at), "row %+v expired at %s, but Explain gives no expiry", r, at)
		}
		return
	}
	require.GreaterOrEqual(t, e.Governing, 0)
	s := history[e.Governing]
	require.Equal(t, *e.ExpiresAt, r.Expiry(*s.TTL), "the governing setting sets the expiry")
	require.True(t, Expired(r, history, *e.ExpiresAt), "row %+v under %+v: expired at %s", r, history, *e.ExpiresAt)
	require.False(t, Expired(r, history, e.ExpiresAt.Add(-time.Microsecond)), "row %+v under %+v: not expired before %s", r, history, *e.ExpiresAt)
	require.True(t, Deletable(r, history, *e.DeletableAt, grace))
	require.False(t, Deletable(r, history, e.DeletableAt.Add(-time.Microsecond), grace))
}

func TestExplainSources(t *testing.T) {
	t.Parallel()
	d := func(m time.Month, day int) time.Time { return time.Date(2026, m, day, 0, 0, 0, 0, time.UTC) }
	p := func(s string) *Period { v, err := ParsePeriod(s); require.NoError(t, err); return &v }
	mar, may := d(time.March, 1), d(time.May, 1)
	history := []Setting{{TTL: p("P30D"), From: d(time.January, 1), Until: &mar}, {TTL: p("P1Y"), From: mar, Until: &may}, {TTL: nil, From: may}}
	row := Row{Timestamp: d(time.January, 10), IngestedAt: d(time.January, 10)}

	t.Run("EarlierShorterSetting", func(t *testing.T) {
		t.Parallel()
		e := Explain(row, history, d(time.June, 1), Period{Days: 30})
		require.Equal(t, 0, e.Governing)
		require.Equal(t, d(time.February, 9), *e.ExpiresAt)
		require.True(t, e.Expired)
		require.Equal(t, d(time.February, 9), *e.DeletableAt, "the grace ended on the 9th of February too")
	})
	t.Run("ArrivedAfterTheShorterSetting", func(t *testing.T) {
		t.Parallel()
		late := Row{Timestamp: d(time.January, 10), IngestedAt: d(time.March, 2)}
		e := Explain(late, history, d(time.June, 1), Period{Days: 30})
		require.Equal(t, -1, e.Governing, "P1Y ended before the row's expiry under it, and the TTL is null now")
		require.Nil(t, e.ExpiresAt)
		require.False(t, e.Expired)
	})
	t.Run("NeverExpires", func(t *testing.T) {
		t.Parallel()
		never := row
		never.Never = true
		e := Explain(never, history, d(time.June, 1), Period{})
		require.Equal(t, Explanation{Governing: -1}, e)
	})
	t.Run("GraceLaterThanExpiry", func(t *testing.T) {
		t.Parallel()
		imported := Row{Timestamp: d(time.January, 1), IngestedAt: d(time.January, 20)}
		e := Explain(imported, history[:1:1], d(time.January, 25), Period{Days: 30})
		require.Equal(t, d(time.January, 31), *e.ExpiresAt)
		require.Equal(t, d(time.February, 19), *e.DeletableAt)
	})
}
