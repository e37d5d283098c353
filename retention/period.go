package retention

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sosodev/duration"
)

// Period is a validated retention period: PnW alone, or PnY, PnM, PnD in that
// order (each optional, at least one). Values returned by ParsePeriod are
// positive and no larger than MaxPeriod; the methods assume that, so a Period
// built by hand outside those bounds gets no guarantee beyond not panicking
// on values that fit in an int.
type Period struct {
	Years, Months, Weeks, Days int64
}

// MaxPeriod is the largest accepted period, so that an expiry or cutoff can
// always be computed inside Postgres' timestamp range.
var MaxPeriod = Period{Years: 1000}

// PeriodError is returned by ParsePeriod for every rejected input, so that
// callers can echo one precise reason back to whoever wrote the period.
// Value is the input exactly as given. Rule is a human sentence naming the
// broken rule first and then what a valid period looks like, e.g. "fractions
// are not allowed; must be an ISO-8601 period of whole years, months, weeks
// or days such as P3M, P30D or P1Y".
type PeriodError struct {
	Value string
	Rule  string
}

// maxErrorValue bounds how much of a rejected input Error quotes, because
// inputs come from request bodies and would otherwise flood the logs.
const maxErrorValue = 64

// Error quotes the input and states the rule, e.g. `"P1.5M": fractions are
// not allowed; must be an ISO-8601 period ...`. Inputs longer than 64 bytes
// are cut short in the message; Value keeps them whole.
func (e *PeriodError) Error() string {
	v := e.Value
	if len(v) > maxErrorValue {
		return fmt.Sprintf("%q... (%d bytes): %s", v[:maxErrorValue], len(v), e.Rule)
	}
	return fmt.Sprintf("%q: %s", v, e.Rule)
}

// periodShape is appended to every rule so that each message alone tells the
// writer what would have been accepted.
const periodShape = "; must be an ISO-8601 period of whole years, months, weeks or days such as P3M, P30D or P1Y"

// Each rejection names a different rule so that the message points at the
// one thing to fix.
const (
	ruleEmpty         = "must not be empty" + periodShape
	ruleWhitespace    = "must not contain spaces or other whitespace" + periodShape
	ruleUppercase     = "units must be uppercase (P, Y, M, W, D)" + periodShape
	ruleSign          = "negative or signed periods are not allowed" + periodShape
	ruleStart         = "must start with P" + periodShape
	ruleNoAmount      = "P alone is empty; at least one number and unit must follow it" + periodShape
	ruleTime          = "time parts (T...) are not allowed" + periodShape
	ruleFraction      = "fractions are not allowed" + periodShape
	ruleZero          = "each number must be a positive integer; zero is not allowed" + periodShape
	ruleLeadingZero   = "numbers must not have leading zeros" + periodShape
	ruleMissingNumber = "each unit must follow a number" + periodShape
	ruleMissingUnit   = "each number must be followed by a unit Y, M, W or D" + periodShape
	ruleUnit          = "the only units are Y (years), M (months), W (weeks) and D (days)" + periodShape
	ruleOther         = "only digits 0-9 and the units Y, M, W, D may follow the P" + periodShape
	ruleDuplicate     = "each unit may appear only once" + periodShape
	ruleWeeks         = "weeks (W) cannot be combined with other units; write the days instead, e.g. P9D" + periodShape
	ruleOrder         = "units must be in the order Y, M, D" + periodShape
	ruleParser        = "is not a period the ISO-8601 duration parser agrees with" + periodShape
)

// ruleTooLarge is built from MaxPeriod rather than being a constant so that
// the message cannot drift from the ceiling actually enforced.
func ruleTooLarge() string {
	return "must not exceed " + MaxPeriod.String() + periodShape
}

// maxParseLen keeps the input handed to duration.Parse short: it builds each
// number by string concatenation, which is quadratic in the input length, and
// a request body can be megabytes. Every accepted period is far shorter
// (P1000Y is 6 bytes, and no number can exceed 6 digits), so the grammar
// still rejects anything longer, with its own precise rule.
const maxParseLen = 64

// errTooLongToParse stands in for duration.Parse's verdict on inputs it is
// not given; the grammar rejects all of them first anyway.
var errTooLongToParse = errors.New("not parsed: longer than any valid period")

// ParsePeriod parses s under the strict grammar. It first parses with
// sosodev/duration (duration.Parse), so that nothing a standard ISO-8601
// duration parser refuses is accepted, and then enforces the grammar, because
// that parser is lenient: it accepts "P", "PT", fractions, any order,
// duplicates and "-P1D", all of which are rejected here. A period is only
// accepted when both agree on its value. Every error is a *PeriodError.
func ParsePeriod(s string) (Period, error) {
	d, errDur := (*duration.Duration)(nil), errTooLongToParse
	if len(s) <= maxParseLen {
		d, errDur = duration.Parse(s)
	}
	p, rule := parseGrammar(s)
	if rule == "" {
		rule = crossCheck(p, d, errDur)
	}
	if rule != "" {
		return Period{}, &PeriodError{Value: s, Rule: rule}
	}
	return p, nil
}

// crossCheck returns ruleParser unless duration.Parse read exactly the period
// the grammar read; it is the guard against the two parsers drifting apart.
func crossCheck(p Period, d *duration.Duration, err error) string {
	if err != nil || d == nil || d.Negative ||
		d.Hours != 0 || d.Minutes != 0 || d.Seconds != 0 ||
		d.Years != float64(p.Years) || d.Months != float64(p.Months) ||
		d.Weeks != float64(p.Weeks) || d.Days != float64(p.Days) {
		return ruleParser
	}
	return ""
}

// unitRank orders the calendar units; weeks sit outside the order because
// they may only stand alone.
var unitRank = map[byte]int{'Y': 1, 'M': 2, 'D': 3}

// parseGrammar returns the period and "" when s is in the grammar, and
// otherwise the rule it breaks. The checks over the whole string come before
// the scan so that, e.g., "P-1.5D" is reported as signed rather than as
// whichever character the scan would have tripped on first.
func parseGrammar(s string) (Period, string) {
	switch {
	case s == "":
		return Period{}, ruleEmpty
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return Period{}, ruleWhitespace
	case s[0] == '-' || s[0] == '+':
		return Period{}, ruleSign
	case s[0] == 'p':
		return Period{}, ruleUppercase
	case s[0] != 'P':
		return Period{}, ruleStart
	}
	body := s[1:]
	switch {
	case body == "":
		return Period{}, ruleNoAmount
	case strings.ContainsAny(body, "+-"):
		return Period{}, ruleSign
	case strings.ContainsAny(body, "Tt"):
		return Period{}, ruleTime
	case strings.ContainsAny(body, ".,"):
		return Period{}, ruleFraction
	}

	var (
		p        Period
		seen     = map[byte]bool{}
		lastRank int
		tooLarge bool
		// Every unit weighs at least one day, so a single number above the
		// ceiling already exceeds it; checking each number against it keeps
		// the sum below from overflowing.
		maxDays = MaxPeriod.ComparableDays()
	)
	for i := 0; i < len(body); {
		start := i
		for i < len(body) && body[i] >= '0' && body[i] <= '9' {
			i++
		}
		digits := body[start:i]
		if i == len(body) {
			return Period{}, ruleMissingUnit
		}
		unit := body[i]
		i++
		if digits == "" {
			if _, ok := unitRank[unit]; ok || unit == 'W' {
				return Period{}, ruleMissingNumber
			}
			return Period{}, foreignRule(unit)
		}
		if _, ok := unitRank[unit]; !ok && unit != 'W' {
			return Period{}, foreignRule(unit)
		}
		if strings.Trim(digits, "0") == "" {
			return Period{}, ruleZero
		}
		if digits[0] == '0' {
			return Period{}, ruleLeadingZero
		}
		if seen[unit] {
			return Period{}, ruleDuplicate
		}
		seen[unit] = true
		if unit == 'W' && len(seen) > 1 || unit != 'W' && seen['W'] {
			return Period{}, ruleWeeks
		}
		if unit != 'W' {
			if unitRank[unit] < lastRank {
				return Period{}, ruleOrder
			}
			lastRank = unitRank[unit]
		}
		// Too large is only reported once the shape is known to be right,
		// because a malformed period should be fixed first.
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n > maxDays {
			tooLarge = true
			continue
		}
		switch unit {
		case 'Y':
			p.Years = n
		case 'M':
			p.Months = n
		case 'W':
			p.Weeks = n
		case 'D':
			p.Days = n
		}
	}
	if tooLarge || p.ComparableDays() > maxDays {
		return Period{}, ruleTooLarge()
	}
	return p, ""
}

// foreignRule picks the most helpful rule for a byte that is neither a digit
// nor a unit: a lowercase unit is almost certainly a case slip.
func foreignRule(c byte) string {
	switch {
	case c == 'y' || c == 'm' || c == 'w' || c == 'd':
		return ruleUppercase
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		return ruleUnit
	default:
		return ruleOther
	}
}

// String returns the canonical form, so that for every accepted s,
// ParsePeriod(s).String() == s. The zero Period is "P0D", which ParsePeriod
// rejects. A hand-built Period that mixes weeks with other units has its
// weeks written as days, since the grammar only allows weeks alone.
func (p Period) String() string {
	if p.Weeks != 0 && p.Years == 0 && p.Months == 0 && p.Days == 0 {
		return "P" + strconv.FormatInt(p.Weeks, 10) + "W"
	}
	if p.IsZero() {
		return "P0D"
	}
	var b strings.Builder
	b.WriteByte('P')
	for _, part := range []struct {
		n    int64
		unit byte
	}{{p.Years, 'Y'}, {p.Months, 'M'}, {p.Weeks*7 + p.Days, 'D'}} {
		if part.n != 0 {
			b.WriteString(strconv.FormatInt(part.n, 10))
			b.WriteByte(part.unit)
		}
	}
	return b.String()
}

// IsZero reports whether p is the zero Period, which ParsePeriod never
// returns; callers use it to tell "no retention configured" apart.
func (p Period) IsZero() bool {
	return p == Period{}
}

// ComparableDays is the length of p under the rule Postgres uses to compare
// intervals (1Y = 12M, 1M = 30D, 1W = 7D), so that Go orders periods exactly
// as SQL does: Y*360 + M*30 + W*7 + D. It is not a real number of days.
func (p Period) ComparableDays() int64 {
	return p.Years*360 + p.Months*30 + p.Weeks*7 + p.Days
}

// Compare returns -1, 0 or +1 as p is shorter than, as long as, or longer
// than q by ComparableDays; P1Y, P12M and P360D therefore compare equal.
func (p Period) Compare(q Period) int {
	return cmp.Compare(p.ComparableDays(), q.ComparableDays())
}

// SamePeriod reports whether a and b are the same setting: both nil (no TTL: rows are kept for ever), or both set
// and written alike. Unlike Compare, P1Y and P12M are not the same: a setting is what was written, and writing it
// differently is a change that starts a new entry in the TTL history.
func SamePeriod(a, b *Period) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Interval returns a Postgres interval literal that Postgres reads as exactly
// this period, e.g. "3 mons", "1 year 2 mons 3 days" or "14 days". Weeks are
// written as days because Postgres stores them as days anyway. The zero
// Period is "0 days".
func (p Period) Interval() string {
	var parts []string
	for _, part := range []struct {
		n              int64
		single, plural string
	}{{p.Years, "year", "years"}, {p.Months, "mon", "mons"}, {p.Weeks*7 + p.Days, "day", "days"}} {
		switch part.n {
		case 0:
		case 1:
			parts = append(parts, "1 "+part.single)
		default:
			parts = append(parts, strconv.FormatInt(part.n, 10)+" "+part.plural)
		}
	}
	if len(parts) == 0 {
		return "0 days"
	}
	return strings.Join(parts, " ")
}

// AddTo returns t + p computed exactly as Postgres computes
// `timestamptz + interval` in a UTC session, so an expiry computed in Go
// matches one computed in SQL: first years*12+months months, clamping the day
// to the last day of the target month (2024-01-31 + P1M = 2024-02-29), then
// weeks*7+days days, keeping the time of day. The result is in UTC.
func (p Period) AddTo(t time.Time) time.Time {
	return addCalendar(t, p.Years*12+p.Months, p.Weeks*7+p.Days)
}

// SubtractFrom returns t - p computed exactly as Postgres computes
// `timestamptz - interval` in a UTC session, which adds the negated interval:
// months first with the same end-of-month clamp, then days. It is not the
// inverse of AddTo (2024-03-31 - P1M + P1M = 2024-03-29). The result is in UTC.
func (p Period) SubtractFrom(t time.Time) time.Time {
	return addCalendar(t, -(p.Years*12 + p.Months), -(p.Weeks*7 + p.Days))
}

// addCalendar follows Postgres' timestamptz_pl_interval: time.AddDate would
// normalise 2024-01-31 + 1 month to 2024-03-02 instead of clamping.
func addCalendar(t time.Time, months, days int64) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	hh, mm, ss := t.Clock()
	total := int64(y)*12 + int64(m-1) + months
	year := total / 12
	month := total % 12
	if month < 0 {
		year--
		month += 12
	}
	// Day 0 of the following month is the last day of this one.
	last := time.Date(int(year), time.Month(month+2), 0, 0, 0, 0, 0, time.UTC).Day()
	shifted := time.Date(int(year), time.Month(month+1), min(d, last), hh, mm, ss, t.Nanosecond(), time.UTC)
	return shifted.AddDate(0, 0, int(days))
}

// MarshalText writes the period in its ISO-8601 form, so configuration and logs show "P30D", not a struct.
func (p Period) MarshalText() ([]byte, error) { return []byte(p.String()), nil }
