package retention

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sosodev/duration"
	"github.com/stretchr/testify/require"
)

var acceptedPeriods = []struct {
	in   string
	want Period
	days int64
}{
	{"P3M", Period{Months: 3}, 90},
	{"P6M", Period{Months: 6}, 180},
	{"P12M", Period{Months: 12}, 360},
	{"P30D", Period{Days: 30}, 30},
	{"P1Y", Period{Years: 1}, 360},
	{"P1W", Period{Weeks: 1}, 7},
	{"P2W", Period{Weeks: 2}, 14},
	{"P1Y2M3D", Period{Years: 1, Months: 2, Days: 3}, 423},
	{"P1Y3D", Period{Years: 1, Days: 3}, 363},
	{"P2M10D", Period{Months: 2, Days: 10}, 70},
	{"P10Y", Period{Years: 10}, 3600},
	{"P13M", Period{Months: 13}, 390},
	{"P90D", Period{Days: 90}, 90},
	{"P1000Y", Period{Years: 1000}, 360000},
	{"P12000M", Period{Months: 12000}, 360000},
	{"P360000D", Period{Days: 360000}, 360000},
	{"P999Y11M30D", Period{Years: 999, Months: 11, Days: 30}, 360000},
	{"P51428W", Period{Weeks: 51428}, 359996},
}

var rejectedPeriods = []struct {
	in   string
	rule string
}{
	{"", ruleEmpty},
	{" P3M", ruleWhitespace},
	{"P3M ", ruleWhitespace},
	{"3 months", ruleWhitespace},
	{"P3M\n", ruleWhitespace},
	{"p3m", ruleUppercase},
	{"P3m", ruleUppercase},
	{"p1Y", ruleUppercase},
	{"-P1M", ruleSign},
	{"+P1M", ruleSign},
	{"P-1D", ruleSign},
	{"P+1D", ruleSign},
	{"90", ruleStart},
	{"3M", ruleStart},
	{"X", ruleStart},
	{"P", ruleNoAmount},
	{"PT", ruleTime},
	{"PT12H", ruleTime},
	{"P1DT", ruleTime},
	{"P1DT12H", ruleTime},
	{"P1.5M", ruleFraction},
	{"P,5D", ruleFraction},
	{"P0D", ruleZero},
	{"P0Y1M", ruleZero},
	{"P00M", ruleZero},
	{"P01M", ruleLeadingZero},
	{"P1Y010D", ruleLeadingZero},
	{"PD", ruleMissingNumber},
	{"P1YM", ruleMissingNumber},
	{"PW", ruleMissingNumber},
	{"P3", ruleMissingUnit},
	{"P1Y2", ruleMissingUnit},
	{"P1H", ruleUnit},
	{"P1S", ruleUnit},
	{"PP1D", ruleUnit},
	{"P1#D", ruleOther},
	{"P\u0663D", ruleOther},
	{"P1D2D", ruleDuplicate},
	{"P1W1W", ruleDuplicate},
	{"P1W2D", ruleWeeks},
	{"P1D2W", ruleWeeks},
	{"P1Y1W", ruleWeeks},
	{"P1M1Y", ruleOrder},
	{"P1D1M", ruleOrder},
	{"P1001Y", ruleTooLarge()},
	{"P12001M", ruleTooLarge()},
	{"P360001D", ruleTooLarge()},
	{"P51429W", ruleTooLarge()},
	{"P1000Y1D", ruleTooLarge()},
	{"P99999999999999999999Y", ruleTooLarge()},
	{"P9223372036854775807D", ruleTooLarge()},
	{"P" + strings.Repeat("9", 100) + "D", ruleTooLarge()},
}

func TestParsePeriodAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range acceptedPeriods {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePeriod(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.days, got.ComparableDays())
			require.Equal(t, tc.in, got.String())
		})
	}
}

func TestParsePeriodRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range rejectedPeriods {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			t.Parallel()
			got, err := ParsePeriod(tc.in)
			require.Zero(t, got)
			var perr *PeriodError
			require.ErrorAs(t, err, &perr)
			require.Equal(t, tc.in, perr.Value)
			require.Equal(t, tc.rule, perr.Rule)
		})
	}
}

// The point of the grammar is to close what sosodev/duration leaves open, so
// each of these must really get past duration.Parse for the test to mean it.
func TestParsePeriodRejectsWhatDurationParseAccepts(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"P", "PT", "P1.5M", "P1M1Y", "P1D2D", "-P1D", "P1W2D", "P0D", "P01M", "PP1D"} {
		_, err := duration.Parse(in)
		require.NoError(t, err, in)
		_, err = ParsePeriod(in)
		require.Error(t, err, in)
	}
}

func TestPeriodErrorMessage(t *testing.T) {
	t.Parallel()

	t.Run("QuotesValueThenRule", func(t *testing.T) {
		t.Parallel()
		_, err := ParsePeriod("P1.5M")
		require.EqualError(t, err, `"P1.5M": fractions are not allowed; must be an ISO-8601 period of whole years, months, weeks or days such as P3M, P30D or P1Y`)
	})

	t.Run("CutsLongValues", func(t *testing.T) {
		t.Parallel()
		in := "P" + strings.Repeat("1", 10000) + "D"
		_, err := ParsePeriod(in)
		var perr *PeriodError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, in, perr.Value)
		require.Less(t, len(err.Error()), 300)
		require.Contains(t, err.Error(), "(10002 bytes)")
	})
}

func TestCrossCheck(t *testing.T) {
	t.Parallel()
	p := Period{Months: 3}

	t.Run("Agrees", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, crossCheck(p, &duration.Duration{Months: 3}, nil))
	})

	t.Run("ParserFailed", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, ruleParser, crossCheck(p, nil, errors.New("boom")))
	})

	t.Run("ParserReadOtherValue", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, ruleParser, crossCheck(p, &duration.Duration{Months: 3, Hours: 1}, nil))
	})
}

func TestPeriodString(t *testing.T) {
	t.Parallel()

	t.Run("ZeroIsP0D", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "P0D", Period{}.String())
	})

	t.Run("MixedWeeksBecomeDays", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "P1Y9D", Period{Years: 1, Weeks: 1, Days: 2}.String())
	})

	t.Run("MaxPeriod", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "P1000Y", MaxPeriod.String())
	})
}

func TestPeriodIsZero(t *testing.T) {
	t.Parallel()
	require.True(t, Period{}.IsZero())
	require.False(t, Period{Days: 1}.IsZero())
}

func TestPeriodCompare(t *testing.T) {
	t.Parallel()
	parse := func(s string) Period {
		p, err := ParsePeriod(s)
		require.NoError(t, err)
		return p
	}
	require.Equal(t, 0, parse("P1Y").Compare(parse("P12M")))
	require.Equal(t, 0, parse("P12M").Compare(parse("P360D")))
	require.Equal(t, 0, parse("P1M").Compare(parse("P30D")))
	require.Equal(t, 0, parse("P1W").Compare(parse("P7D")))
	require.Equal(t, 1, parse("P365D").Compare(parse("P1Y")))
	require.Equal(t, -1, parse("P1Y").Compare(parse("P365D")))
}

func TestPeriodInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Period
		want string
	}{
		{Period{Months: 3}, "3 mons"},
		{Period{Months: 1}, "1 mon"},
		{Period{Years: 1, Months: 2, Days: 3}, "1 year 2 mons 3 days"},
		{Period{Years: 10}, "10 years"},
		{Period{Weeks: 2}, "14 days"},
		{Period{Days: 1}, "1 day"},
		{Period{Years: 1000}, "1000 years"},
		{Period{}, "0 days"},
	} {
		t.Run(tc.in.String(), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.in.Interval())
		})
	}
}

func TestPeriodCalendar(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return ts
	}
	for _, tc := range []struct {
		name     string
		from     string
		period   Period
		subtract bool
		want     string
	}{
		{"AddClampsToLeapDay", "2024-01-31T00:00:00Z", Period{Months: 1}, false, "2024-02-29T00:00:00Z"},
		{"AddClampsToFeb28", "2023-01-31T00:00:00Z", Period{Months: 1}, false, "2023-02-28T00:00:00Z"},
		{"SubtractClampsToLeapDay", "2024-03-31T00:00:00Z", Period{Months: 1}, true, "2024-02-29T00:00:00Z"},
		{"AddYearFromLeapDay", "2024-02-29T00:00:00Z", Period{Years: 1}, false, "2025-02-28T00:00:00Z"},
		{"AddMonthsBeforeDays", "2024-01-31T00:00:00Z", Period{Months: 1, Days: 1}, false, "2024-03-01T00:00:00Z"},
		{"SubtractMonthsBeforeDays", "2024-03-31T00:00:00Z", Period{Months: 1, Days: 1}, true, "2024-02-28T00:00:00Z"},
		{"SubtractYear", "2024-12-31T00:00:00Z", Period{Years: 1}, true, "2023-12-31T00:00:00Z"},
		{"AddAcrossYearEnd", "2024-11-30T00:00:00Z", Period{Months: 3}, false, "2025-02-28T00:00:00Z"},
		{"SubtractAcrossYearStart", "2024-01-15T00:00:00Z", Period{Months: 13}, true, "2022-12-15T00:00:00Z"},
		{"AddWeeksAsDays", "2024-02-26T00:00:00Z", Period{Weeks: 1}, false, "2024-03-04T00:00:00Z"},
		{"KeepsTimeOfDay", "2024-01-31T13:45:30.123456Z", Period{Months: 1}, false, "2024-02-29T13:45:30.123456Z"},
		{"ConvertsToUTCFirst", "2024-01-31T23:30:00-05:00", Period{Months: 1}, false, "2024-03-01T04:30:00Z"},
		{"SubtractConvertsToUTCFirst", "2024-03-01T01:00:00+02:00", Period{Months: 1}, true, "2024-01-29T23:00:00Z"},
		{"AddMaxPeriod", "2024-02-29T00:00:00Z", MaxPeriod, false, "3024-02-29T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from := utc(tc.from)
			got := tc.period.AddTo(from)
			if tc.subtract {
				got = tc.period.SubtractFrom(from)
			}
			require.Equal(t, time.UTC, got.Location())
			require.Equal(t, tc.want, got.Format(time.RFC3339Nano))
		})
	}
}

// Month arithmetic must floor rather than truncate once the month count goes
// negative, or years before year 0 would land in the wrong month.
func TestPeriodCalendarBeforeYearZero(t *testing.T) {
	t.Parallel()
	from := time.Date(0, time.January, 31, 6, 0, 0, 0, time.UTC)
	require.Equal(t, time.Date(-1, time.November, 30, 6, 0, 0, 0, time.UTC), Period{Months: 2}.SubtractFrom(from))
}

// periodOracle is written independently of parseGrammar so that the fuzzer
// compares two readings of the grammar rather than the code with itself.
var periodOracle = regexp.MustCompile(`^P(?:([1-9][0-9]*)W|(?:([1-9][0-9]*)Y)?(?:([1-9][0-9]*)M)?(?:([1-9][0-9]*)D)?)$`)

func oracleAccepts(s string) bool {
	m := periodOracle.FindStringSubmatch(s)
	if m == nil || s == "P" {
		return false
	}
	weights := []int64{7, 360, 30, 1}
	var total int64
	for i, w := range weights {
		if m[i+1] == "" {
			continue
		}
		if len(m[i+1]) > 7 {
			return false
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return false
		}
		total += n * w
	}
	return total <= 1000*360
}

func FuzzParsePeriod(f *testing.F) {
	for _, tc := range acceptedPeriods {
		f.Add(tc.in)
	}
	for _, tc := range rejectedPeriods {
		f.Add(tc.in)
	}
	from := time.Date(2024, time.January, 31, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeriod(s)
		require.Equal(t, oracleAccepts(s), err == nil, "input %q, error %v", s, err)
		if err != nil {
			var perr *PeriodError
			require.ErrorAs(t, err, &perr)
			require.Equal(t, s, perr.Value)
			require.NotEmpty(t, perr.Rule)
			require.NotEmpty(t, err.Error())
			return
		}
		require.Equal(t, s, p.String())
		again, err := ParsePeriod(p.String())
		require.NoError(t, err)
		require.Equal(t, p, again)
		require.False(t, p.IsZero())
		require.Positive(t, p.ComparableDays())
		require.LessOrEqual(t, p.ComparableDays(), MaxPeriod.ComparableDays())
		require.NotEmpty(t, p.Interval())
		back := p.SubtractFrom(p.AddTo(from))
		require.Equal(t, time.UTC, back.Location())
	})
}

func BenchmarkParsePeriod(b *testing.B) {
	inputs := []string{"P3M", "P1Y2M3D", "P2W", "P1.5M"}
	for b.Loop() {
		for _, in := range inputs {
			_, _ = ParsePeriod(in)
		}
	}
}

func TestSamePeriod(t *testing.T) {
	t.Parallel()
	year, months := Period{Years: 1}, Period{Months: 12}
	require.True(t, SamePeriod(nil, nil), "no TTL is no TTL")
	require.True(t, SamePeriod(&year, &Period{Years: 1}), "equal values behind different pointers")
	require.False(t, SamePeriod(&year, nil))
	require.False(t, SamePeriod(nil, &year))
	require.False(t, SamePeriod(&year, &months), "P1Y and P12M compare equal but are written differently")
	require.Equal(t, 0, year.Compare(months))
}
