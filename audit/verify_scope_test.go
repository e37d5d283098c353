package audit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
)

// sandboxed is a chain of 6 events alternating between prod (odd seqs) and dev (even seqs).
func sandboxed(t *testing.T) []*audit.Event {
	t.Helper()
	events := chain(t, 6)
	prev := audit.GenesisHash
	for i, ev := range events {
		ev.Sandbox = []string{"prod", "dev"}[i%2]
		require.NoError(t, ev.Seal(int64(i+1), prev))
		prev = ev.Hash
	}
	return events
}

func walkAs(t *testing.T, sandbox string, events []*audit.Event, head *audit.ChainPoint) *audit.Verification {
	t.Helper()
	w := audit.NewVerifier("ORG@AdobeOrg", head, genesis)
	w.ScopeTo(sandbox)
	for _, ev := range events {
		require.NoError(t, w.Add(ev))
	}
	return w.Finish()
}

// TestVerifierScopedToASandbox is part of finding 9: GET /audit/verify from sandbox dev showed prod's event id,
// sandbox and time and the org-wide count. Scoped to a sandbox, a walk still covers the org's chain, but reports
// that sandbox's events and nothing of another's but where and why the chain breaks.
func TestVerifierScopedToASandbox(t *testing.T) {
	t.Parallel()

	t.Run("IntactCountsTheSandbox", func(t *testing.T) {
		t.Parallel()
		events := sandboxed(t)
		v := walkAs(t, "dev", events, headOf(events))
		require.True(t, v.Valid)
		require.Equal(t, "dev", v.Sandbox)
		require.Equal(t, int64(3), v.Events)
		require.Equal(t, audit.ChainPoint{Seq: 6, Hash: events[5].Hash}, v.Head)
		v = walkAs(t, "prod", events, headOf(events))
		require.Equal(t, int64(3), v.Events)
		require.Equal(t, audit.ChainPoint{Seq: 5, Hash: events[4].Hash}, v.Head, "prod's newest, not the org's")
	})

	t.Run("BreakInAnotherSandbox", func(t *testing.T) {
		t.Parallel()
		events := sandboxed(t)
		events[2].Status = audit.StatusFailure // seq 3, prod
		v := walkAs(t, "dev", events, headOf(events))
		require.False(t, v.Valid, "the org's chain is broken, whichever sandbox asks")
		b := v.FirstBroken
		require.Equal(t, int64(3), b.Seq)
		require.Equal(t, audit.BreakHash, b.Reason)
		require.Empty(t, b.ID)
		require.Empty(t, b.Sandbox)
		require.Nil(t, b.Timestamp)
		require.NotContains(t, b.Detail, events[2].Hash[:12], "the detail names nothing of prod's event")
		require.Contains(t, b.Detail, "outside sandbox dev")
	})

	t.Run("BreakInTheSandbox", func(t *testing.T) {
		t.Parallel()
		events := sandboxed(t)
		events[2].Status = audit.StatusFailure
		v := walkAs(t, "prod", events, headOf(events))
		require.False(t, v.Valid)
		require.Equal(t, events[2].ID, v.FirstBroken.ID)
		require.Equal(t, "prod", v.FirstBroken.Sandbox)
		require.NotNil(t, v.FirstBroken.Timestamp)
	})

	t.Run("MissingTailIsNoSandboxsEvent", func(t *testing.T) {
		t.Parallel()
		events := sandboxed(t)
		v := walkAs(t, "prod", events[:4], headOf(events))
		require.False(t, v.Valid)
		require.Equal(t, audit.BreakTail, v.FirstBroken.Reason)
		require.NotContains(t, v.FirstBroken.Detail, "seq 6", "the org's head is not shown")
	})
}
