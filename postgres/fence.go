package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// checkWriteFence refuses, inside tx, a write of org while the org moves to another cell or after it has moved
// (migration 0018, org_write_fence). Every transaction that writes anything of an org calls it before it commits:
// writeAuditEvent (every settings change, delete, hold, expiration, row delete), copyChunk (each ingested chunk),
// CreateManualRun and PolicyService.SetLimits. It holds the org's fence lock shared until tx ends, so a mover raising the fence waits for tx to
// commit: a write acknowledged before the fence is in the copy, and one after it is refused, never lost. It costs
// one round trip and an index probe.
func checkWriteFence(ctx context.Context, tx pgx.Tx, org string) error {
	var state *string
	if err := tx.QueryRow(ctx, `SELECT org_write_fence($1)`, org).Scan(&state); err != nil {
		return fmt.Errorf("check the write fence of %s: %w", org, err)
	}
	if state == nil {
		return nil
	}
	if *state == fenceMoved {
		if moved := movedAway(ctx, tx, org); moved != nil {
			return moved
		}
	}
	return errOrgMoving(org, *state)
}

// errOrgMoving is the refusal of a fenced write: 503 with Retry-After, since the same request succeeds once the
// org's route points at its new cell.
func errOrgMoving(org, state string) error {
	msg := fmt.Sprintf("org %s is moving to another cell: writes are refused until the move ends; reads keep working; send the request again", org)
	if state == fenceMoved {
		msg = fmt.Sprintf("org %s has moved to another cell; send the request again, to be routed there", org)
	}
	return &catalog.Error{Code: catalog.EUNAVAILABLE, Type: "org-moving", Field: "x-gw-ims-org-id", Message: msg}
}

// The states of a write fence (org_write_fences.state).
const (
	fenceDraining = "draining" // writes pass; no new run lists the org
	fenceFenced   = "fenced"   // writes refused while the copy is made
	fenceMoved    = "moved"    // the org lives in another cell
)

// unfencedSQL is the condition a run's listing adds, so that no new run takes datasets of an org that is moving.
const unfencedSQL = `NOT EXISTS (SELECT 1 FROM org_write_fences f WHERE f.org_id = d.org_id)`

// movedAway is the answer to a request of an org that has moved to another cell, which this cell asks only when it
// found nothing of the org (a dataset not found; the API asks it for every not-found answer, OrgMovedAway): 503
// org-moved naming the cell the org moved to, from the finished move's record, rather than a 404 for data that
// exists there. A request the proxy routed before the switch is sent again and reaches the new cell; one sent to
// this cell directly learns where the org went. It is nil when the org did not move away.
func movedAway(ctx context.Context, q querier, org string) error {
	var id, cell string
	var at time.Time
	err := q.QueryRow(ctx, `SELECT m.id::text, m.target_cell, m.updated_at FROM org_write_fences f
		JOIN org_moves m ON m.id = f.move_id AND m.role = 'source'
		WHERE f.org_id = $1 AND f.state = 'moved'`, org).Scan(&id, &cell, &at)
	if err == nil {
		return errOrgMoved(org, cell, id, at)
	}
	return nil // not moved (or the caller's next statement reports the failure): the answer stands
}

// errOrgMoved is the refusal of a request of an org that lives in another cell since its move: 503 with
// Retry-After, since the same request sent through the proxy reaches the org's cell.
func errOrgMoved(org, cell, moveID string, at time.Time) error {
	return &catalog.Error{Code: catalog.EUNAVAILABLE, Type: "org-moved", Field: "x-gw-ims-org-id",
		Message: fmt.Sprintf("org %s has moved to cell %s (move %s, finished %s): this cell no longer holds its data; send the request through the proxy, which routes it to cell %s",
			org, cell, moveID, at.UTC().Format(time.RFC3339), cell)}
}

// OrgMovedAway returns the org-moved error when org has moved from this database's cell to another (see
// movedAway), nil otherwise or when the database cannot tell: the API asks it before answering not found.
func (db *DB) OrgMovedAway(ctx context.Context, org string) error {
	return movedAway(ctx, db.Pool, org)
}
