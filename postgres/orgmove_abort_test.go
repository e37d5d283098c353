package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// TestMoveAborted aborts a move cut after its catch-up (writes refused, the target holding the org): the target
// keeps nothing of the org, the source holds it as it was with its writes passing and its chain verifying with the
// abort's event, and a move after it runs to the end. A move cut after its verification or its switch is not aborted.
func TestMoveAborted(t *testing.T) {
	t.Parallel()
	cutAt := func(m *moveBundle, step string) *postgres.OrgMove {
		cut := errors.New("cut")
		move := &postgres.OrgMove{Org: m.src.caller.Org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router,
			AfterStep: func(s string) error {
				if s == step {
					return cut
				}
				return nil
			}}
		_, err := move.Run(context.Background())
		require.ErrorIs(t, err, cut)
		move.AfterStep = nil
		return move
	}

	t.Run("AfterTheCatchUp", func(t *testing.T) {
		t.Parallel()
		m := setupMove(t, 60)
		ctx := context.Background()
		org := m.src.caller.Org
		before, counts := orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
		move := cutAt(m, "copied")
		require.Equal(t, counts["lake_rows"], orgRowCounts(t, m.dst.db, org)["lake_rows"], "the target holds the copy")

		rep, err := (&postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db}).Abort(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"dropped", "aborted"}, rep.Steps)
		require.Equal(t, counts["lake_rows"], rep.Removed["lake_rows"])
		require.Equal(t, orgRowCounts(t, m.src.db, org)["audit_events"]-1, rep.Removed["audit_events"],
			"the copy's chain: every event of the source's but the abort's")
		for table, n := range orgRowCounts(t, m.dst.db, org) {
			require.Zero(t, n, "the target keeps no row of %s", table)
		}
		var fences, moves int
		require.NoError(t, m.dst.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM org_write_fences WHERE org_id = $1),
			(SELECT count(*) FROM org_moves WHERE org_id = $1)`, org).Scan(&fences, &moves))
		require.Zero(t, fences, "no fence of the org is left on the target")
		require.Zero(t, moves, "nor the move's row")
		require.Equal(t, before, orgContent(t, m.src.db, org), "the source holds the org as it was")
		require.Equal(t, "cell-a", m.router.cellOf(org))
		w := &writer{}
		w.write(m.src, m.live, 1)
		require.Len(t, w.acked, 1, "the org's writes pass again on the source")
		v, err := postgres.NewAuditService(m.src.db).Verify(ctx, org)
		require.NoError(t, err)
		require.True(t, v.Valid, "%+v", v.FirstBroken)
		var aborted map[string]any
		require.NoError(t, m.src.db.Pool.QueryRow(ctx, `SELECT details FROM audit_events
			WHERE org_id = $1 AND action = 'Move' AND details->>'step' = 'aborted'`, org).Scan(&aborted))
		require.Equal(t, "copied", aborted["abortedAt"])
		require.Contains(t, aborted, "writesRefusedMs")
		require.EqualValues(t, counts["lake_rows"], aborted["removedFromTarget"].(map[string]any)["lake_rows"])

		_, err = (&postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db}).Abort(ctx)
		require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "nothing is left to abort: %v", err)
		_, err = move.Run(ctx)
		require.NoError(t, err, "a move after the abort runs to the end")
		m.requireMoved(t, before, counts, w)
	})

	// Cut after its verification, a move may have switched the route already (the switch is recorded after it):
	// the target may take writes, so its copy stays.
	t.Run("AfterTheVerification", func(t *testing.T) {
		t.Parallel()
		m := setupMove(t, 10)
		ctx := context.Background()
		org := m.src.caller.Org
		before, counts := orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
		move := cutAt(m, "verified")
		_, err := (&postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db}).Abort(ctx)
		require.Equal(t, catalog.ECONFLICT, catalog.ErrorCode(err), "the route may point at the target: %v", err)
		require.Equal(t, counts["lake_rows"], orgRowCounts(t, m.dst.db, org)["lake_rows"], "the target keeps its copy")
		_, err = move.Run(ctx)
		require.NoError(t, err, "the move run again finishes")
		m.requireMoved(t, before, counts, &writer{})
	})

	t.Run("AfterTheSwitch", func(t *testing.T) {
		t.Parallel()
		m := setupMove(t, 10)
		ctx := context.Background()
		org := m.src.caller.Org
		before, counts := orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
		move := cutAt(m, "switched")
		_, err := (&postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db}).Abort(ctx)
		require.Equal(t, catalog.ECONFLICT, catalog.ErrorCode(err), "the route points at the target: %v", err)
		_, err = move.Run(ctx)
		require.NoError(t, err, "the move run again finishes")
		m.requireMoved(t, before, counts, &writer{})
	})
}
