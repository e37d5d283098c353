package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// Abort ends the org's move before its route switches: it removes the target's copy of the org (rows, audit chain,
// the move's row and fence there), then, in one transaction of the source, lifts the org's fence, closes the move
// and writes its aborted event in the org's chain. The source has held the whole org throughout, so nothing is
// lost; writes refused while fenced were answered 503 and are sent again. Run it again after a failure or kill: the
// target's part is one transaction, done or not, and the source's too. A move that is verified or switched is not
// aborted: the route points, or may point, at the target, and running the move again finishes it. Only Org, Source and Target are used.
func (m *OrgMove) Abort(ctx context.Context) (*MoveReport, error) {
	if m.Org == "" || m.Source == nil || m.Target == nil {
		return nil, &catalog.Error{Code: catalog.EINVALID, Field: "org", Message: "an abort needs the org and the source's and the target's databases"}
	}
	release, err := m.lockMove(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	rep := &MoveReport{Copied: map[string]int64{}, Removed: map[string]int64{}, CaughtUp: map[string]int64{}}
	st := &moveState{}
	err = m.Source.Pool.QueryRow(ctx, `SELECT m.id::text, m.step, coalesce(f.since, 'epoch') FROM org_moves m
		LEFT JOIN org_write_fences f ON f.org_id = m.org_id AND f.state = 'fenced'
		WHERE m.org_id = $1 AND m.role = 'source' AND m.step <> 'done'`, m.Org).Scan(&st.id, &st.step, &st.since)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &catalog.Error{Code: catalog.ENOTFOUND, Field: "org", Message: fmt.Sprintf("org %s has no move in progress on the source cell", m.Org)}
	}
	if err != nil {
		return nil, fmt.Errorf("read the move of %s: %w", m.Org, err)
	}
	rep.ID = st.id
	if st.step == stepSwitched {
		return rep, &catalog.Error{Code: catalog.ECONFLICT, Field: "org",
			Message: fmt.Sprintf("move %s of org %s has switched the route to the target: run the move again to finish it", st.id, m.Org)}
	}
	if err := m.dropTargetCopy(ctx, st.id, rep); err != nil {
		return rep, err
	}
	rep.Steps = append(rep.Steps, "dropped")
	if err := m.closeAborted(ctx, st, rep); err != nil {
		return rep, err
	}
	rep.Steps = append(rep.Steps, "aborted")
	return rep, nil
}

// lockMove takes the org's move lock, a session lock on the source: it ends with the connection, also when the
// tool is killed.
func (m *OrgMove) lockMove(ctx context.Context) (func(), error) {
	conn, err := m.Source.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to the source: %w", err)
	}
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(19, hashtext($1))`, m.Org).Scan(&locked); err != nil {
		conn.Release()
		return nil, fmt.Errorf("lock the move of %s: %w", m.Org, err)
	}
	if !locked {
		conn.Release()
		return nil, fmt.Errorf("move %s: %w", m.Org, ErrMoveRunning)
	}
	return func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(19, hashtext($1))`, m.Org)
		conn.Release()
	}, nil
}

// dropTargetCopy removes the org from the target in one transaction, when the target holds its copy: every table
// of the registry (children first; of a shared table only the org's own rows), the audit chain (audit_move_abort,
// migration 0021), the copy's fence and the move's row there.
func (m *OrgMove) dropTargetCopy(ctx context.Context, id string, rep *MoveReport) error {
	step, err := m.targetStep(ctx, id)
	if err != nil || step == "" {
		return err
	}
	if step == stepVerified {
		// The move switches the route right after this step and records the switch only on the source, after: a
		// move killed between the two leaves the route at the target, which takes the org's writes since its fence
		// is lifted. Removing its copy then would lose them.
		return &catalog.Error{Code: catalog.ECONFLICT, Field: "org",
			Message: fmt.Sprintf("move %s of org %s is verified and may have switched the route to the target: run the move again to finish it", id, m.Org)}
	}
	return m.Target.inTx(ctx, func(tx pgx.Tx) error {
		if err := removeOrgTables(ctx, tx, m.Org, rep.Removed); err != nil {
			return fmt.Errorf("the target: %w", err)
		}
		var events int64
		if err := tx.QueryRow(ctx, `SELECT audit_move_abort($1, $2)`, m.Org, id).Scan(&events); err != nil {
			return fmt.Errorf("remove the audit chain from the target: %w", err)
		}
		rep.Removed["audit_events"] = events
		if _, err := tx.Exec(ctx, `DELETE FROM org_write_fences WHERE org_id = $1 AND move_id = $2`, m.Org, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM org_moves WHERE id = $1 AND role = 'target'`, id)
		return err
	})
}

// closeAborted lifts the org's fence on the source and closes the move there (step done, with what was removed
// from the target under counts.aborted), with the aborted event, in one transaction.
func (m *OrgMove) closeAborted(ctx context.Context, st *moveState, rep *MoveReport) error {
	now := m.Source.now()
	details := map[string]any{"step": "aborted", "abortedAt": st.step, "removedFromTarget": rep.Removed}
	if !st.since.Equal(time.Unix(0, 0)) {
		details["writesRefusedMs"] = now.Sub(st.since).Milliseconds() // from the fence to the abort
	}
	return m.Source.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM org_write_fences WHERE org_id = $1 AND move_id = $2`, m.Org, st.id); err != nil {
			return fmt.Errorf("lift the fence: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE org_moves SET step = 'done', updated_at = $3,
			counts = counts || jsonb_build_object('aborted', $2::jsonb) WHERE id = $1 AND role = 'source'`,
			st.id, marshalCounts(rep.Removed), now); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, m.event(st.id, now, details))
	})
}
