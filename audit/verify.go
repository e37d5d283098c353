package audit

import (
	"fmt"
	"time"
)

// Reasons a chain breaks, as Break.Reason names them.
const (
	BreakHash     = "hash-mismatch"      // the event's content does not match its hash: it was edited
	BreakLink     = "prev-hash-mismatch" // its prevHash is not the previous event's hash: an event before it was removed, replaced or inserted
	BreakSeq      = "seq-gap"            // its seq is not the one after the previous event's: events were removed or inserted
	BreakUnsealed = "unchained"          // it carries no hash although it is after the anchor
	BreakTail     = "missing-tail"       // the events end before the chain's head: the newest ones were removed
	BreakHead     = "head-mismatch"      // the last event is not the head the chain records
	BreakExtra    = "beyond-head"        // events follow the chain's recorded head: they were inserted
	BreakNoHead   = "no-head"            // the org has events but no chain head
)

// ChainPoint is a position in an org's chain: a seq and the hash of the event there.
type ChainPoint struct {
	Seq  int64
	Hash string
}

// Break is where verification first found the chain broken.
type Break struct {
	Seq       int64 // the seq of the event found broken, or expected but missing
	ID        string
	Sandbox   string
	Timestamp *time.Time
	Reason    string // one of the Break* constants
	Detail    string
}

// Verification is the result of walking an org's chain.
type Verification struct {
	Org         string
	Valid       bool
	Events      int64 // events walked: those after the anchor
	Head        ChainPoint
	Anchor      ChainPoint
	FirstBroken *Break
	// Sandbox, when set, is the sandbox the result speaks for (Verifier.ScopeTo): Events and Head are of its events
	// alone, and FirstBroken names another sandbox's event only by its seq and reason.
	Sandbox string
}

// Verifier walks one org's chain: feed it the org's events after the anchor in seq order, then call Finish. It keeps
// walking past a break, relinking on the stored hash, so Events counts the whole chain while FirstBroken names the
// first break.
type Verifier struct {
	v        Verification
	hasHead  bool
	nextSeq  int64
	prevHash string

	// sandboxEvents and sandboxHead are the scope's count and newest event (ScopeTo).
	sandboxEvents int64
	sandboxHead   ChainPoint
}

// ScopeTo makes the result speak for one sandbox of the org, for a caller that may see that sandbox's events and no
// other's: Events counts its events and Head is the newest of them, and a break at another sandbox's event, or in
// the chain's end, is reported by its seq and reason with a detail that names nothing of the other sandbox. The
// walk still covers the whole chain, since the chain is the org's: a break anywhere makes the result invalid.
func (w *Verifier) ScopeTo(sandbox string) { w.v.Sandbox = sandbox }

// NewVerifier starts a walk of org's chain, whose recorded head and anchor are head and anchor; head is nil when the
// org has no chain row.
func NewVerifier(org string, head *ChainPoint, anchor ChainPoint) *Verifier {
	w := &Verifier{v: Verification{Org: org, Anchor: anchor}, nextSeq: anchor.Seq + 1, prevHash: anchor.Hash}
	if head != nil {
		w.hasHead, w.v.Head = true, *head
	}
	return w
}

// Add checks the next event of the walk.
func (w *Verifier) Add(e *Event) error {
	w.v.Events++
	if w.v.Sandbox != "" && e.Sandbox == w.v.Sandbox {
		w.sandboxEvents++
		w.sandboxHead = ChainPoint{Seq: e.Seq, Hash: e.Hash}
	}
	if !w.hasHead {
		w.breakAt(e, BreakNoHead, "the org has events but no chain head")
		return nil
	}
	if e.Seq > w.v.Head.Seq {
		w.breakAt(e, BreakExtra, fmt.Sprintf("the chain's head is seq %d, this event is seq %d", w.v.Head.Seq, e.Seq))
	}
	switch {
	case e.Seq != w.nextSeq:
		w.breakAt(e, BreakSeq, fmt.Sprintf("expected seq %d, found %d", w.nextSeq, e.Seq))
	case e.Hash == "":
		w.breakAt(e, BreakUnsealed, "the event carries no hash")
	case e.PrevHash != w.prevHash:
		w.breakAt(e, BreakLink, fmt.Sprintf("prevHash %s is not the previous event's hash %s", short(e.PrevHash), short(w.prevHash)))
	default:
		h, err := e.ComputeHash()
		if err != nil {
			return err
		}
		if h != e.Hash {
			w.breakAt(e, BreakHash, fmt.Sprintf("the content hashes to %s, the event says %s", short(h), short(e.Hash)))
		}
	}
	w.nextSeq, w.prevHash = e.Seq+1, e.Hash
	return nil
}

// Finish checks the end of the walk against the head and returns the result.
func (w *Verifier) Finish() *Verification {
	if w.hasHead {
		last := w.nextSeq - 1
		switch {
		case last < w.v.Head.Seq:
			w.breakAtSeq(last+1, BreakTail, fmt.Sprintf("the chain's head is seq %d, the events end at seq %d", w.v.Head.Seq, last))
		case last == w.v.Head.Seq && w.prevHash != w.v.Head.Hash:
			w.breakAtSeq(last, BreakHead, fmt.Sprintf("the chain's head hash is %s, the last event's hash is %s", short(w.v.Head.Hash), short(w.prevHash)))
		}
	}
	w.v.Valid = w.v.FirstBroken == nil
	if w.v.Sandbox != "" {
		w.v.Events, w.v.Head = w.sandboxEvents, w.sandboxHead
		if b := w.v.FirstBroken; b != nil && b.Sandbox != w.v.Sandbox {
			w.v.FirstBroken = &Break{Seq: b.Seq, Reason: b.Reason, Detail: fmt.Sprintf(
				"the org's chain breaks at an event outside sandbox %s (%s); verifying from the org's other sandboxes finds it", w.v.Sandbox, b.Reason)}
		}
	}
	return &w.v
}

func (w *Verifier) breakAt(e *Event, reason, detail string) {
	if w.v.FirstBroken != nil {
		return
	}
	ts := e.Timestamp
	w.v.FirstBroken = &Break{Seq: e.Seq, ID: e.ID, Sandbox: e.Sandbox, Timestamp: &ts, Reason: reason, Detail: detail}
}

func (w *Verifier) breakAtSeq(seq int64, reason, detail string) {
	if w.v.FirstBroken == nil {
		w.v.FirstBroken = &Break{Seq: seq, Reason: reason, Detail: detail}
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	if h == "" {
		return "(none)"
	}
	return h
}
