package postgres

import (
	"context"
	"fmt"

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

// movedAway is the refusal of a request for a dataset of an org that has moved to another cell (a request the proxy
// sent before the switch, or a stale route): 503, so that the client sends it again to the new cell, rather than a
// 404 for a dataset that exists there. It is asked only when the dataset was not found.
func movedAway(ctx context.Context, q querier, org string) error {
	var moved bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM org_write_fences WHERE org_id = $1 AND state = 'moved')`, org).Scan(&moved)
	if err == nil && moved {
		return errOrgMoving(org, fenceMoved)
	}
	return nil // the not-found answer stands (or the caller's next statement reports the failure)
}
