package retention

import "time"

// The one definition of when a row is expired, and the reference the SQL is held to. Reads, previews and runs
// evaluate it in SQL, written once in postgres/expiry.go: each builder there names the function of this file it
// mirrors, term for term, and the property test beside it (postgres/expiry_test.go) holds the two equal on
// generated scenarios. A change to the rule starts here, then its twin there.
//
// A store's TTL has a history: each setting was in force from From until Until (nil: still in force). Under a
// setting with a TTL, a row's expiry is its own override if it has one, else its event time plus the TTL (calendar
// arithmetic in UTC, as Postgres adds an interval); the event time is the row's clock start, which a record dataset
// takes from the row's last write instead (Clock). A row is expired at now when, under some setting in force after
// the row was ingested, its expiry came at or before the end of that setting's time (or now, for the current one).
// So lengthening or disabling a TTL never brings back a row that had already expired, rows ingested after a change
// follow only the new value, and a null TTL keeps every row of the store, overrides included, while it is in force.
//
// The rest of the file serves speed, never the verdict: a row's placed expiry (Placed) and what earlier settings
// could have expired (Earlier, SettingAlone) let most rows be judged by one stored column, and the event-time bounds
// (ExpiredThrough, LiveAfter, LastExpiredEvent, PlacedEvents) only narrow the rows a caller reads.

// Clock is what a dataset's TTLs count from. Every other term of the rule is the same for both clocks: a row's
// clock start (Row.Timestamp) is fixed when the row is written, and a write of the same _id replaces the row, so a
// record's clock restarts with each write as Cosmos DB's and Fauna's do.
type Clock uint8

const (
	// EventTime counts from the row's event time (its timestamp): time-series datasets.
	EventTime Clock = iota
	// LastWrite counts from the row's last write, the ingestion time of the latest version of its _id: record
	// datasets.
	LastWrite
)

// Start returns the time a row's TTL counts from under the clock, given its event time and its ingestion time.
func (c Clock) Start(event, ingested time.Time) time.Time {
	if c == LastWrite {
		return ingested
	}
	return event
}

// Setting is one TTL setting of a store and when it was in force.
type Setting struct {
	TTL   *Period    // nil: expiry disabled
	From  time.Time  // when it took effect
	Until *time.Time // when it was replaced; nil for the current setting
}

// Row is what the expiry rule reads of a row.
type Row struct {
	Timestamp  time.Time  // the row's clock start (Clock.Start), which TTLs count from: its event time, or its last write
	IngestedAt time.Time  // when the service stored it
	OwnExpiry  *time.Time // the row's own expiry (_expiresAt, or clock start + _ttl)
	Never      bool       // _ttl: -1, the row never expires
}

// Expiry returns the row's expiry under a TTL: its own override if it has one, else clock start + ttl.
func (r Row) Expiry(ttl Period) time.Time {
	if r.OwnExpiry != nil {
		return r.OwnExpiry.UTC()
	}
	return ttl.AddTo(r.Timestamp)
}

// ExpiredUnder reports whether the row is expired at `at` under a TTL in force since before it arrived: unless it
// never expires, its expiry has come.
func (r Row) ExpiredUnder(ttl Period, at time.Time) bool {
	return !r.Never && !r.Expiry(ttl).After(at)
}

// Placed returns the row's placed expiry under the TTL it is stored under: its expiry, or nil (stored as
// 'infinity') when the TTL is null or the row never expires. Stores keep rows ordered by it, and a row that only
// the setting it is stored under can have expired (SettingAlone) is expired exactly when its placed expiry has come.
func (r Row) Placed(ttl *Period) *time.Time {
	if ttl == nil || r.Never {
		return nil
	}
	e := r.Expiry(*ttl)
	return &e
}

// Expired reports whether the row is expired at now under the store's settings history.
func Expired(r Row, history []Setting, now time.Time) bool {
	if r.Never {
		return false
	}
	for _, s := range history {
		if s.TTL == nil {
			continue
		}
		end := now
		if s.Until != nil && s.Until.Before(now) {
			end = *s.Until
		}
		if s.Until != nil && !s.Until.After(r.IngestedAt) {
			continue // replaced before the row arrived: it never applied to the row
		}
		if r.ExpiredUnder(*s.TTL, end) {
			return true
		}
	}
	return false
}

// Deletable reports whether a run at now may delete the row: it is expired, and it was ingested at least grace ago
// (the data lake keeps new data as a processing backup; the profile store has no grace).
func Deletable(r Row, history []Setting, now time.Time, grace Period) bool {
	return Expired(r, history, now) && !grace.AddTo(r.IngestedAt).After(now)
}

// CurrentTTL returns the TTL of the setting in force (nil: none, or expiry disabled), which applies to every row of
// the store.
func CurrentTTL(history []Setting) *Period {
	for _, s := range history {
		if s.Until == nil {
			return s.TTL
		}
	}
	return nil
}

// Earlier is what the settings before one could have expired, recorded with it when it starts, so that most rows
// stored under it are judged without reading the history (SettingAlone).
type Earlier struct {
	// TTLUntil is the latest end of an earlier setting with a TTL; nil when none had one.
	TTLUntil *time.Time
	// ExpiredThrough is an event time after which no row without an override had expired under an earlier setting
	// by its end (LastExpiredEvent); nil when none had a TTL, or for settings recorded before it was kept.
	ExpiredThrough *time.Time
}

// EarlierOf returns what the settings of the history, all ended by at, could have expired: the Earlier of the
// setting that starts at at.
func EarlierOf(history []Setting, at time.Time) Earlier {
	var e Earlier
	for _, s := range history {
		if s.TTL != nil && s.Until != nil && (e.TTLUntil == nil || s.Until.After(*e.TTLUntil)) {
			e.TTLUntil = s.Until
		}
	}
	if last, ok := LastExpiredEvent(history, at); ok {
		e.ExpiredThrough = &last
	}
	return e
}

// SettingAlone reports whether, of a row stored under the setting in force (its TTL ttl, what the settings before
// it could have expired earlier), no earlier setting can have expired the row: it never expires; it was ingested
// once every earlier setting with a TTL had ended; it has no override and an event time later than any an earlier
// setting could expire; or it has its own expiry and the current setting a TTL (then an earlier setting that
// expired it means the current one has too). For such a row, Expired at now is exactly "Placed(ttl) <= now".
func SettingAlone(r Row, ttl *Period, earlier Earlier) bool {
	return r.Never ||
		earlier.TTLUntil == nil || !r.IngestedAt.Before(*earlier.TTLUntil) ||
		(r.OwnExpiry == nil && earlier.ExpiredThrough != nil && r.Timestamp.After(*earlier.ExpiredThrough)) ||
		(r.OwnExpiry != nil && ttl != nil)
}

// ExpiredThrough returns an event time at or before which every row placed by the TTL alone (no override) has
// expired by at: ttl.AddTo(ts) <= at for every ts <= the result. It lies within a few days of the latest such time.
//
// It narrows an index range and nothing more: a caller that keeps or deletes rows still evaluates the forward rule
// (Expired) on each row it reads, so a bound that is a day too cautious costs a few rows of reading, never a wrong
// answer. Adding months clamps to month ends, which can put a later event time's expiry up to a day before an
// earlier one's (2024-01-30T23:00 + P1M > 2024-01-31T10:00 + P1M), hence the day of slack.
func ExpiredThrough(ttl Period, at time.Time) time.Time {
	b := ttl.SubtractFrom(at)
	for ttl.AddTo(b).Add(24 * time.Hour).After(at) {
		b = b.AddDate(0, 0, -1)
	}
	return b
}

// LiveAfter returns an event time after which no row placed by the TTL alone has expired by at: ttl.AddTo(ts) > at
// for every ts after the result. Like ExpiredThrough, it only narrows what a caller reads.
func LiveAfter(ttl Period, at time.Time) time.Time {
	b := ttl.SubtractFrom(at)
	for ttl.AddTo(b).Add(-24 * time.Hour).Before(at) {
		b = b.AddDate(0, 0, 1)
	}
	return b
}

// LastExpiredEvent returns an event time after which no row without an override is expired at `at` under the
// history, and false when no setting has a TTL, so that no such row is expired at all. Like ExpiredThrough, it only
// narrows what a caller reads.
func LastExpiredEvent(history []Setting, at time.Time) (time.Time, bool) {
	var last time.Time
	found := false
	for _, s := range history {
		if s.TTL == nil {
			continue
		}
		end := at
		if s.Until != nil && s.Until.Before(at) {
			end = *s.Until
		}
		if b := LiveAfter(*s.TTL, end); !found || b.After(last) {
			last, found = b, true
		}
	}
	return last, found
}

// PlacedEvents returns the event times that rows placed by the TTL alone can have when their placed expiry lies in
// [from, until): every such row has after < timestamp <= through. A caller counting rows from per-placement counters
// uses it to tell which counters a question about event times answers whole.
func PlacedEvents(ttl Period, from, until time.Time) (after, through time.Time) {
	return ExpiredThrough(ttl, from), LiveAfter(ttl, until)
}
