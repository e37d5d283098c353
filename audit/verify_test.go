package audit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
)

// chain returns n sealed events of one org, seq 1…n.
func chain(t *testing.T, n int) []*audit.Event {
	t.Helper()
	prev := audit.GenesisHash
	out := make([]*audit.Event, n)
	for i := range out {
		ev := sampleEvent()
		ev.ID = fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1)
		ev.Timestamp = ev.Timestamp.Add(time.Duration(i) * time.Second)
		require.NoError(t, ev.Seal(int64(i+1), prev))
		prev = ev.Hash
		out[i] = ev
	}
	return out
}

func walk(t *testing.T, events []*audit.Event, head *audit.ChainPoint, anchor audit.ChainPoint) *audit.Verification {
	t.Helper()
	w := audit.NewVerifier("ORG@AdobeOrg", head, anchor)
	for _, ev := range events {
		require.NoError(t, w.Add(ev))
	}
	return w.Finish()
}

func headOf(events []*audit.Event) *audit.ChainPoint {
	last := events[len(events)-1]
	return &audit.ChainPoint{Seq: last.Seq, Hash: last.Hash}
}

var genesis = audit.ChainPoint{Hash: audit.GenesisHash}

func TestVerifier(t *testing.T) {
	t.Parallel()

	t.Run("IntactChain", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 5)
		v := walk(t, events, headOf(events), genesis)
		require.True(t, v.Valid)
		require.Nil(t, v.FirstBroken)
		require.Equal(t, int64(5), v.Events)
	})

	t.Run("EmptyChain", func(t *testing.T) {
		t.Parallel()
		v := walk(t, nil, nil, genesis)
		require.True(t, v.Valid)
		require.Zero(t, v.Events)
	})

	t.Run("EditedEventBreaksAtIt", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 5)
		head := headOf(events)
		events[2].Details = map[string]any{"ttlValue": "P1D"}
		v := walk(t, events, head, genesis)
		require.False(t, v.Valid)
		require.Equal(t, int64(3), v.FirstBroken.Seq)
		require.Equal(t, events[2].ID, v.FirstBroken.ID)
		require.Equal(t, audit.BreakHash, v.FirstBroken.Reason)
		require.Equal(t, int64(5), v.Events, "the walk goes on to count the whole chain")
	})

	t.Run("RehashedEditBreaksTheNextLink", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 5)
		head := headOf(events)
		events[1].AssetName = "renamed"
		require.NoError(t, events[1].Seal(2, events[0].Hash))
		v := walk(t, events, head, genesis)
		require.Equal(t, int64(3), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakLink, v.FirstBroken.Reason)
	})

	t.Run("RemovedEventIsAGap", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 5)
		head := headOf(events)
		v := walk(t, append(events[:2:2], events[3:]...), head, genesis)
		require.Equal(t, int64(4), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakSeq, v.FirstBroken.Reason)
	})

	t.Run("RemovedTailShowsAgainstTheHead", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 5)
		v := walk(t, events[:3], headOf(events), genesis)
		require.False(t, v.Valid)
		require.Equal(t, int64(4), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakTail, v.FirstBroken.Reason)
		require.Empty(t, v.FirstBroken.ID)
	})

	t.Run("InsertedEventBeyondTheHead", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 5)
		v := walk(t, events, headOf(events[:4]), genesis)
		require.Equal(t, int64(5), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakExtra, v.FirstBroken.Reason)
	})

	t.Run("ReplacedHeadHash", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 3)
		v := walk(t, events, &audit.ChainPoint{Seq: 3, Hash: events[1].Hash}, genesis)
		require.Equal(t, int64(3), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakHead, v.FirstBroken.Reason)
	})

	t.Run("EventsWithoutHead", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 2)
		v := walk(t, events, nil, genesis)
		require.Equal(t, audit.BreakNoHead, v.FirstBroken.Reason)
		require.Equal(t, int64(1), v.FirstBroken.Seq)
	})

	t.Run("AnchoredAfterRetention", func(t *testing.T) {
		t.Parallel()
		events := chain(t, 6)
		anchor := audit.ChainPoint{Seq: 3, Hash: events[3].PrevHash}
		require.True(t, walk(t, events[3:], headOf(events), anchor).Valid)

		v := walk(t, events[4:], headOf(events), anchor)
		require.Equal(t, int64(5), v.FirstBroken.Seq, "the first event after the anchor is missing")
		require.Equal(t, audit.BreakSeq, v.FirstBroken.Reason)

		wrong := audit.ChainPoint{Seq: 3, Hash: events[1].Hash}
		require.Equal(t, audit.BreakLink, walk(t, events[3:], headOf(events), wrong).FirstBroken.Reason)
	})
}
