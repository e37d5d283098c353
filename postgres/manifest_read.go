package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// ManifestService reads deletion manifests (manifest.go) for the API.
type ManifestService struct {
	db *DB
}

// NewManifestService returns a ManifestService on db.
func NewManifestService(db *DB) *ManifestService {
	return &ManifestService{db: db}
}

// manifestCounts are, in one statement and so one snapshot, a removal's listed entries and the last of them,
// beside the count its audit event reports (%s, a subquery that also restricts the removal to the caller).
const manifestCounts = `
SELECT removed.n, count(m.id), coalesce(max(m.id), 0)
FROM (%s) removed
LEFT JOIN deletion_manifests m ON m.removal_kind = @kind AND m.removal_id = @id::text AND m.dataset_id = @dataset
GROUP BY removed.n`

// runRemoved is a run part's removed rows, from the ledger its Expire event is written from, for a caller who sees
// that part (retention_run_datasets is per org and sandbox); a dry run removed nothing, so it has no manifest.
const runRemoved = `SELECT (SELECT coalesce(sum(x.rows_deleted), 0)::bigint FROM retention_deletions x
        WHERE x.run_id = rd.run_id AND x.dataset_id = rd.dataset_id) AS n
    FROM retention_run_datasets rd JOIN retention_runs r ON r.id = rd.run_id
    WHERE rd.run_id = @uuid::uuid AND rd.dataset_id = @dataset AND rd.org_id = @org AND rd.sandbox_name = @sandbox
      AND NOT r.dry_run`

// rowDeleteRemoved is a delete by _id's removed rows, from its Delete event (details.rowsDeleted).
const rowDeleteRemoved = `SELECT (e.details->>'rowsDeleted')::bigint AS n FROM audit_events e
    WHERE e.id = @uuid::uuid AND e.asset_id = @dataset AND e.org_id = @org AND e.sandbox_name = @sandbox
      AND e.action = 'Delete' AND e.details ? 'rowId'`

// workOrderRemoved is a work order's removed rows of a dataset, from its completed part (written in the transaction
// of its Delete event, whose rowsDeleted it equals), for a caller of the order's org and sandbox.
const workOrderRemoved = `SELECT (p.lake_rows + p.profile_rows)::bigint AS n
    FROM workorder_parts p JOIN workorders w ON w.id = p.workorder_id
    WHERE p.workorder_id = @id::text AND p.dataset_id = @dataset AND w.org_id = @org AND w.sandbox_name = @sandbox
      AND p.status = 'completed'`

// OpenManifest implements catalog.ManifestService.
func (s *ManifestService) OpenManifest(ctx context.Context, c *catalog.Caller, r catalog.Removal) (_ *catalog.Manifest, err error) {
	defer outage(&err)
	removed := map[string]string{catalog.RemovalRun: runRemoved, catalog.RemovalRowDelete: rowDeleteRemoved,
		catalog.RemovalWorkOrder: workOrderRemoved}[r.Kind]
	field := map[string]string{catalog.RemovalRun: "runId", catalog.RemovalRowDelete: "eventId",
		catalog.RemovalWorkOrder: "WORKORDER_ID"}[r.Kind]
	if removed == "" {
		return nil, fmt.Errorf("no manifest for removals of kind %q", r.Kind)
	}
	if !validRemovalID(r) {
		return nil, catalog.Invalid("invalid-parameter", field, "%s %q must be %s", field, catalog.Clip(r.ID), removalIDShape(r.Kind))
	}
	m := &catalog.Manifest{Removal: r}
	args := pgx.StrictNamedArgs{"kind": r.Kind, "id": r.ID, "uuid": r.ID, "dataset": r.DatasetID, "org": c.Org, "sandbox": c.Sandbox}
	if r.Kind == catalog.RemovalWorkOrder {
		delete(args, "uuid") // its id is text (DI-…), compared as @id
	}
	err = s.db.Pool.QueryRow(ctx, fmt.Sprintf(manifestCounts, removed), args).Scan(&m.Removed, &m.Listed, &m.Through)
	if err != nil {
		return nil, translate(err, fmt.Sprintf("no %s %s removed rows of dataset %s", r.Kind, r.ID, r.DatasetID))
	}
	return m, nil
}

// validRemovalID tells whether a removal's id has its kind's shape: a run's and a Delete event's are UUIDs, a work
// order's DI- and a UUID.
func validRemovalID(r catalog.Removal) bool {
	if r.Kind == catalog.RemovalWorkOrder {
		id, ok := strings.CutPrefix(r.ID, "DI-")
		return ok && isUUID(id)
	}
	return isUUID(r.ID)
}

// removalIDShape says, for a refusal, what validRemovalID wants of a kind's id.
func removalIDShape(kind string) string {
	if kind == catalog.RemovalWorkOrder {
		return "DI- followed by a UUID"
	}
	return "a UUID"
}

// ManifestPage implements catalog.ManifestService.
func (s *ManifestService) ManifestPage(ctx context.Context, m *catalog.Manifest, after int64, limit int) (_ []catalog.ManifestEntry, err error) {
	defer outage(&err)
	rows, err := s.db.Pool.Query(ctx, `
SELECT id, row_id, store, ts, expires_at, reason FROM deletion_manifests
WHERE removal_kind = $1 AND removal_id = $2 AND dataset_id = $3 AND id > $4 AND id <= $5
ORDER BY id LIMIT $6`, m.Kind, m.ID, m.DatasetID, after, m.Through, limit)
	if err != nil {
		return nil, fmt.Errorf("read manifest of %s %s: %w", m.Kind, m.ID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.ManifestEntry, error) {
		var e catalog.ManifestEntry
		var store string
		err := row.Scan(&e.Seq, &e.ID, &store, &e.Timestamp, &e.ExpiresAt, &e.Reason)
		e.Store = catalog.Store(store)
		return e, err
	})
}
