package retention

import "time"

// Explanation is what the expiry rule says of one row on its store's settings history, and why: the answer of
// GET /dataSets/{id}/rows/{_id}/expiry. It is derived from Expired and Deletable, not beside them: Expired at any
// time t, on this history, holds exactly when ExpiresAt is set and not after t, and Deletable exactly when
// DeletableAt is (TestExplainFollowsTheRule holds this on generated histories; the SQL twin agrees from the row's
// ingestion on, postgres's TestExplainAgreesWithRuleOnScenarios).
type Explanation struct {
	// Governing is the index in the history of the setting that expires the row first, the one ExpiresAt comes
	// from (under it, the row's own override if it has one, else its clock plus that setting's TTL); -1 when no
	// setting expires it: it never expires (_ttl: -1), or no setting with a TTL has applied to it, or none whose
	// end the row's expiry came by.
	Governing int
	// ExpiresAt is the earliest time at which the row is expired on this history; nil when it is not expired at
	// any time on it (a later TTL change may still set one). It may lie before the row's ingestion: an import or a
	// late event can arrive expired, and is expired from its ingestion on, the first time the rule judges it.
	ExpiresAt *time.Time
	// Expired is Expired(r, history, now).
	Expired bool
	// DeletableAt is the earliest time at which a run may delete the row (Deletable), the later of ExpiresAt and
	// the end of the grace after its ingestion; nil when ExpiresAt is nil.
	DeletableAt *time.Time
}

// Explain returns the explanation of the row at now, under the store's settings history and the grace of its runs.
//
// A setting expires the row at its expiry under it (Row.Expiry) when it has a TTL, was not replaced before the row
// arrived, and that expiry comes by its end (any time, for the setting in force): exactly the terms of Expired's
// loop, which holds at t when one of these expiries is at or before t. The earliest of them is the row's ExpiresAt;
// when an earlier setting's TTL was shorter, that can lie before the current setting's own expiry of the row.
func Explain(r Row, history []Setting, now time.Time, grace Period) Explanation {
	e := Explanation{Governing: -1, Expired: Expired(r, history, now)}
	if r.Never {
		return e
	}
	for i, s := range history {
		at, ok := expiresUnder(r, s)
		if ok && (e.ExpiresAt == nil || at.Before(*e.ExpiresAt)) {
			e.Governing, e.ExpiresAt = i, &at
		}
	}
	if e.ExpiresAt != nil {
		d := grace.AddTo(r.IngestedAt)
		if e.ExpiresAt.After(d) {
			d = *e.ExpiresAt
		}
		e.DeletableAt = &d
	}
	return e
}

// expiresUnder returns the time at which the setting expires the row, and false when it never does: it has no
// TTL, it was replaced before the row arrived, or it was replaced before the row's expiry under it came.
func expiresUnder(r Row, s Setting) (time.Time, bool) {
	if s.TTL == nil || (s.Until != nil && !s.Until.After(r.IngestedAt)) {
		return time.Time{}, false
	}
	at := r.Expiry(*s.TTL)
	if s.Until != nil && at.After(*s.Until) {
		return time.Time{}, false
	}
	return at, true
}
