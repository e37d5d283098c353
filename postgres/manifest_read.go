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

// An entry's place in its manifest (catalog.ManifestEntry.Seq) is its chunk's id times 65,536 (<< 16) plus its
// ordinal in the chunk, from 1: increasing in the order the entries are read, and never 0, which reads from the
// start. Migration 0019 bounds a chunk to 65,535 entries.

// manifestCounts are, in one statement and so one snapshot, a removal's listed entries and the place of the last of
// them, beside the count its audit event reports (%s, a subquery that also restricts the removal to the caller),
// and whether a pending listing of the removal holds rows of the dataset, which that count includes and the entries
// not yet (a drop of a run still going on that committed since the reader listed the run's pending listings). They
// read the chunks' ids and sizes only, never their arrays.
const manifestCounts = `
SELECT removed.n, coalesce(sum(m.entries), 0)::bigint, coalesce(max((m.id << 16) | m.entries), 0),
       EXISTS (SELECT 1 FROM pending_listings p WHERE p.removal_kind = @kind AND p.removal_id = @id::text
               AND @dataset = ANY(p.listed))
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

// OpenManifest implements catalog.ManifestService. For a run, it first lists the rows of the dataset that the run's
// partition drops left to be listed (pending_listings, flushRunPending), so that the manifest always holds what the
// audit event counts, before the release as after it.
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
	args := pgx.StrictNamedArgs{"kind": r.Kind, "id": r.ID, "uuid": r.ID, "dataset": r.DatasetID, "org": c.Org, "sandbox": c.Sandbox}
	if r.Kind == catalog.RemovalWorkOrder {
		delete(args, "uuid") // its id is text (DI-…), compared as @id
	}
	for {
		if r.Kind == catalog.RemovalRun {
			// The run's partition drops left their rows to be listed by the release; list them now if it has not.
			if err := flushRunPending(ctx, s.db, r.ID, r.DatasetID); err != nil {
				return nil, err
			}
			if s.db.rows.hooks.afterManifestFlush != nil {
				s.db.rows.hooks.afterManifestFlush()
			}
		}
		m := &catalog.Manifest{Removal: r}
		var pending bool
		err = s.db.Pool.QueryRow(ctx, fmt.Sprintf(manifestCounts, removed), args).Scan(&m.Removed, &m.Listed, &m.Through, &pending)
		if err != nil {
			return nil, translate(err, fmt.Sprintf("no %s %s removed rows of dataset %s", r.Kind, r.ID, r.DatasetID))
		}
		if !pending { // else a drop committed since the listing: list it too, and count again
			return m, nil
		}
	}
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

// manifestPage reads at most $6 entries of removal $1/$2 of dataset $3 after place $4, up to place $5, in order. It
// takes at most $6 + 1 chunks (each holds an entry or more; the first may have none left) and unnests only those
// that start before $6 entries are found (entries_before: the entries left in the chunks ahead), so that a page
// costs about $6 entries and a chunk, however large the manifest.
const manifestPage = `
SELECT (c.id << 16) | u.ord, u.row_id, c.store, u.ts, u.expires_at, c.reason
FROM (SELECT k.*, sum(k.entries_left) OVER (ORDER BY k.id) - k.entries_left AS entries_before
      FROM (SELECT m.id, m.store, m.reason, m.row_ids, m.timestamps, m.expiries,
                   m.entries - CASE WHEN m.id = $4::bigint >> 16 THEN ($4::bigint & 65535)::int ELSE 0 END AS entries_left
            FROM deletion_manifests m
            WHERE m.removal_kind = $1 AND m.removal_id = $2 AND m.dataset_id = $3
              AND m.id >= $4::bigint >> 16 AND m.id <= $5::bigint >> 16
            ORDER BY m.id LIMIT $6 + 1) k) c
CROSS JOIN LATERAL unnest(c.row_ids, c.timestamps, c.expiries) WITH ORDINALITY AS u (row_id, ts, expires_at, ord)
WHERE c.entries_before < $6 AND (c.id << 16) | u.ord > $4::bigint AND (c.id << 16) | u.ord <= $5::bigint
ORDER BY c.id, u.ord LIMIT $6`

// ManifestPage implements catalog.ManifestService.
func (s *ManifestService) ManifestPage(ctx context.Context, m *catalog.Manifest, after int64, limit int) (_ []catalog.ManifestEntry, err error) {
	defer outage(&err)
	rows, err := s.db.Pool.Query(ctx, manifestPage, m.Kind, m.ID, m.DatasetID, after, m.Through, limit)
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
