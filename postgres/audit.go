package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
)

const insertAuditEvent = `
INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name,
                          action, status, user_id, client_id, details)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// writeAuditEvent inserts ev inside tx: the caller's change and its event commit or fail together.
func writeAuditEvent(ctx context.Context, tx pgx.Tx, ev *audit.Event) error {
	if ev.ID == "" {
		ev.ID = audit.NewID()
	}
	if ev.Details == nil {
		ev.Details = map[string]any{}
	}
	_, err := tx.Exec(ctx, insertAuditEvent, ev.ID, ev.Org, ev.Sandbox, ev.Timestamp, ev.RequestID, ev.AssetType,
		ev.AssetID, ev.AssetName, ev.Action, ev.Status, ev.User, ev.ClientID, ev.Details)
	if err != nil {
		return fmt.Errorf("write %s audit event of %s: %w", ev.Action, ev.AssetID, err)
	}
	return nil
}
