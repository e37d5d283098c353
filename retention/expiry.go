package retention

import "time"

// The one definition of when a row is expired. Reads, previews and runs all evaluate it; in SQL it is the predicate
// postgres.expiredPredicate, which this file mirrors term for term (the property tests hold the two equal).
//
// A store's TTL has a history: each setting was in force from From until Until (nil: still in force). Under a
// setting with a TTL, a row's expiry is its own override if it has one, else its event time plus the TTL (calendar
// arithmetic in UTC, as Postgres adds an interval). A row is expired at now when, under some setting in force after
// the row was ingested, its expiry came at or before the end of that setting's time (or now, for the current one).
// So lengthening or disabling a TTL never brings back a row that had already expired, rows ingested after a change
// follow only the new value, and a null TTL keeps every row of the store, overrides included, while it is in force.

// Setting is one TTL setting of a store and when it was in force.
type Setting struct {
	TTL   *Period    // nil: expiry disabled
	From  time.Time  // when it took effect
	Until *time.Time // when it was replaced; nil for the current setting
}

// Row is what the expiry rule reads of a row.
type Row struct {
	Timestamp  time.Time  // event time, which TTLs count from
	IngestedAt time.Time  // when the service stored it
	OwnExpiry  *time.Time // the row's own expiry (_expiresAt, or timestamp + _ttl)
	Never      bool       // _ttl: -1, the row never expires
}

// Expiry returns the row's expiry under a TTL: its own override if it has one, else timestamp + ttl.
func (r Row) Expiry(ttl Period) time.Time {
	if r.OwnExpiry != nil {
		return r.OwnExpiry.UTC()
	}
	return ttl.AddTo(r.Timestamp)
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
		if !r.Expiry(*s.TTL).After(end) {
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
