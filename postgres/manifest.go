package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// This file holds the deletion manifests (issue #32.3): for a dataset and store whose deletionManifest is on, each
// removal of its rows writes their _ids to deletion_manifests in the statement, or at least the transaction, that
// removes them, so that a manifest lists exactly the rows removed however a run is interrupted. A partition drop is
// the exception: it records in its transaction a pending listing of the detached table's rows (recordPending), whose
// _ids that table keeps unchanged and out of the store until the release lists them and then drops it
// (releaseListed); a reader of a run's manifest and the org move list the pending listings they read first
// (flushRunPending, flushOrgPending). A dataset and store with the manifest off cost no statement: the flag is read
// by a statement each removal sends anyway (deletableRows, walkDatasets, droppableCounts) or, for a delete by _id,
// inside the delete's own statement.

// The kinds of removal a manifest is kept for (deletion_manifests.removal_kind).
const (
	removalRun       = "run"        // a retention run; the removal id is the run's
	removalRowDelete = "row-delete" // DELETE /dataSets/{id}/rows/{_id}; the removal id is its Delete event's
	removalWorkOrder = "work-order" // a record-delete work order; the removal id is the work order's
)

// removal names one removal whose manifest entries a statement writes.
type removal struct {
	kind, id string
}

// manifestColumns are the columns of deletion_manifests a removal writes. A row is a chunk of up to 1,000 entries
// of one removal, dataset, store and reason (migration 0019): a removal writes a heap tuple and an index entry per
// chunk rather than per row, and its entries' arrays go to TOAST in pages' worth. The i-th elements of row_ids,
// timestamps and expiries are one entry.
const manifestColumns = `deletion_manifests (removal_kind, removal_id, dataset_id, store, removed_at, reason, entries,
    row_ids, timestamps, expiries)`

// chunkOf numbers, for a "gone" row g, the chunk of its dataset's entries that holds it: 1,000 entries a chunk, under
// the 65,535 the readers' keyset allows (manifest_read.go). It sorts by dataset_id in the "C" collation, as
// listGoneSQL groups: bytewise comparisons and abbreviated keys, where the database's collation (C.UTF-8 or any
// other) compares through the C library, and the grouping then reuses the window's order; a drop's listing of the
// benchmark's past partition (149,184 rows) took 2.9 s against 4.8 s (EXPLAIN ANALYZE, loaded machine). chunkOfOne
// is the same for rows of one dataset, which needs no sort by dataset.
const (
	chunkOf    = `(row_number() OVER (PARTITION BY g.dataset_id COLLATE "C") - 1) / 1000`
	chunkOfOne = `(row_number() OVER () - 1) / 1000`
)

// chunked is what an INSERT INTO manifestColumns selects after the removal's kind, id, store, time and reason: a
// chunk from the entries e (dataset_id, row_id, ts, expires_at and chunk, chunkOf's number) grouped by chunk. The
// arrays of a chunk are aggregated by the one node from the same rows in the same order, so their elements pair
// up; expiries only where %s (the rows expired).
const chunked = `count(*), array_agg(e.row_id), array_agg(e.ts), CASE WHEN %s THEN array_agg(e.expires_at) END`

// chunkGroups ends a chunked SELECT.
const chunkGroups = `
    GROUP BY e.dataset_id, e.chunk`

// listedExpiry is the expiry a manifest shows for a removed row g that expired, joined with its placement setting h:
// its own expiry (_expiresAt or _ttl), else its clock plus the TTL it was stored under; NULL for a row that never
// expires (it went for another reason). A row a later, shorter TTL expired went earlier than this shows.
const listedExpiry = `CASE WHEN g.never_expires THEN NULL ELSE coalesce(g.own_expiry, g.ts + h.ttl) END`

// listGoneSQL is the data-modifying CTE "listed" that writes the manifest entries of the rows of the CTE "gone"
// (which returns dataset_id, setting_id, row_id, ts, own_expiry and never_expires) of the datasets @listed, in chunks
// numbered by chunk (chunkOf, or chunkOfOne for a statement of one dataset), for the removal
// @removal_kind/@removal_id of store @store at @removed_at, with the reason: 'dataset-deleted' for the datasets
// @deleted, else 'expired' with listedExpiry. The setting is joined by its dataset as well as its id (groupJoins says
// why).
func listGoneSQL(chunk string) string {
	return `,
listed AS (
    INSERT INTO ` + manifestColumns + `
    SELECT @removal_kind, @removal_id, e.dataset_id, @store, @removed_at,
           CASE WHEN e.dataset_id = ANY(@deleted::text[]) THEN 'dataset-deleted' ELSE 'expired' END,
           ` + fmt.Sprintf(chunked, `NOT e.dataset_id = ANY(@deleted::text[])`) + `
    FROM (SELECT g.dataset_id COLLATE "C" AS dataset_id, g.row_id, g.ts, ` + listedExpiry + ` AS expires_at, ` + chunk + ` AS chunk
          FROM gone g LEFT JOIN ttl_settings h ON h.dataset_id = g.dataset_id AND h.id = g.setting_id
          WHERE g.dataset_id = ANY(@listed::text[])) e` + chunkGroups + `)`
}

// listGone lists the rows of any datasets, listGoneOne those of one (listGoneSQL).
var (
	listGone    = listGoneSQL(chunkOf)
	listGoneOne = listGoneSQL(chunkOfOne)
)

// listGoneOf is the data-modifying CTE "listed" of a removal of one dataset's rows for one reason, without expiry,
// as a delete by _id or a work order writes it: the rows of "gone" (row_id, ts) of dataset $1 in store $3, in
// chunks, for removal kind %[1]s, id %[2]s at %[3]s, with reason %[4]s, when the store's deletionManifest is on: read
// inside the removing statement, so that a dataset with the manifest off pays one index probe of row_expirations and
// no statement.
const listGoneOf = `,
listed AS (
    INSERT INTO ` + manifestColumns + `
    SELECT %[1]s, %[2]s, e.dataset_id, $3, %[3]s, %[4]s, count(*), array_agg(e.row_id), array_agg(e.ts), NULL
    FROM (SELECT $1::text AS dataset_id, g.row_id, g.ts, ` + chunkOfOne + ` AS chunk
          FROM gone g
          WHERE EXISTS (SELECT 1 FROM row_expirations x WHERE x.dataset_id = $1 AND x.store = $3 AND x.deletion_manifest)) e` +
	chunkGroups + `)`

// goneListedColumns are what a "gone" CTE returns beyond dataset_id and setting_id for listGone.
const goneListedColumns = `, row_id, ts, own_expiry, never_expires`

// listArgs adds listGone's arguments to args.
func listArgs(args pgx.NamedArgs, rm removal, store catalog.Store, listed, deleted []string, now time.Time) {
	if deleted == nil {
		deleted = []string{}
	}
	args["removal_kind"], args["removal_id"], args["store"] = rm.kind, rm.id, string(store)
	args["listed"], args["deleted"], args["removed_at"] = listed, deleted, now
}

// recordPending records, in the drop's transaction, that the rows of the datasets listed (whose manifest is on) in
// the table detached, which a drop has just taken out of the store, are to be listed in the run's manifest
// (pending_listings, migration 0022); the rows of deleted datasets (deleted) with that reason. The drop does not list
// them itself: that read and wrote every removed row while the drop held the store's parent table. The table is no
// longer the store's, so no read sees its rows and nothing writes them, and it stays until the release lists and
// then drops it (releaseListed): the _ids the drop removed are fixed in this transaction, with its ledger rows.
func recordPending(ctx context.Context, tx pgx.Tx, sw Sweep, detached string, listed, deleted []string, now time.Time) error {
	if deleted == nil {
		deleted = []string{}
	}
	_, err := tx.Exec(ctx, `INSERT INTO pending_listings (name, removal_kind, removal_id, store, listed, deleted, removed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, detached, removalRun, sw.RunID, string(sw.Store), listed, deleted, now)
	if err != nil {
		return fmt.Errorf("record the pending listing of %s: %w", detached, err)
	}
	return nil
}

// listPending writes, in tx, the manifest entries a pending listing of detached table name holds back, and deletes
// the pending listing; with none, it does nothing. It locks the pending listing first, and so waits for any
// other transaction listing it: one that committed deleted it, and this one then finds none, so that a listing is
// written once however many readers and releases ask for it at once.
func (rs *rowStore) listPending(ctx context.Context, tx pgx.Tx, name string) error {
	var kind, id, store string
	var listed, deleted []string
	var removedAt time.Time
	err := tx.QueryRow(ctx, `SELECT removal_kind, removal_id, store, listed, deleted, removed_at FROM pending_listings
		WHERE name = $1 FOR UPDATE`, name).Scan(&kind, &id, &store, &listed, &deleted, &removedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // listed and deleted by another transaction, or never pending
	}
	if err != nil {
		return fmt.Errorf("lock the pending listing of %s: %w", name, err)
	}
	if rs.hooks.pendingLocked != nil {
		rs.hooks.pendingLocked(ctx, name)
	}
	args := pgx.NamedArgs{}
	listArgs(args, removal{kind, id}, catalog.Store(store), listed, deleted, removedAt)
	if _, err := tx.Exec(ctx, `WITH gone AS (
    SELECT r.dataset_id, r.setting_id`+goneListedColumns+` FROM `+pgx.Identifier{name}.Sanitize()+` r
    WHERE r.dataset_id = ANY(@listed::text[]))`+listGone+`
SELECT 1`, args); err != nil {
		return fmt.Errorf("list the rows of %s: %w", name, err)
	}
	_, err = tx.Exec(ctx, `DELETE FROM pending_listings WHERE name = $1`, name)
	return err
}

// flushPending writes out the pending listings the query (with args) names, each in a transaction of its own
// (listPending), so that a reader of manifests finds them listed as if the drops had listed them. The readers call
// it before they read: a run's manifest (OpenManifest), the org move's copy (flushOrgPending).
func flushPending(ctx context.Context, db *DB, query string, args ...any) error {
	rows, err := db.Pool.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("find pending listings: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("find pending listings: %w", err)
	}
	for _, name := range names {
		err := db.inTx(ctx, func(tx pgx.Tx) error {
			return db.rows.listPending(ctx, tx, name)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// flushRunPending writes out the pending listings of run runID that hold rows of the dataset.
func flushRunPending(ctx context.Context, db *DB, runID, datasetID string) error {
	return flushPending(ctx, db, `SELECT name FROM pending_listings WHERE removal_kind = 'run' AND removal_id = $1
		AND $2 = ANY(listed) ORDER BY name`, runID, datasetID)
}

// flushOrgPending writes out the pending listings that hold rows of the org's datasets: a detached table holds
// many orgs' rows, and the org move copies the org's manifests.
func flushOrgPending(ctx context.Context, db *DB, org string) error {
	return flushPending(ctx, db, `SELECT name FROM pending_listings
		WHERE listed && ARRAY(SELECT d.id FROM datasets d WHERE d.org_id = $1) ORDER BY name`, org)
}

// listing is a removal listed at a time.
type listing struct {
	removal removal
	now     time.Time
}

// listRowDelete is deleteByIDSQL's CTE that lists the rows of its "gone" in the manifest of removal $4/$5 at $6 (listGoneOf).
var listRowDelete = fmt.Sprintf(listGoneOf, `$4`, `$5`, `$6`, `'row-delete'`)

// deletedIf is the dataset alone when it was deleted, else none: listGone's @deleted for one dataset's batch.
func deletedIf(deleted bool, datasetID string) []string {
	if deleted {
		return []string{datasetID}
	}
	return []string{}
}

// noteListed notes that the rows of dataset ds leave with partition part and are to be listed, when its store keeps
// a manifest (listed), with the reason of a deleted dataset's rows.
func (d *droppable) noteListed(part, ds string, listed, deleted bool) {
	if !listed {
		return
	}
	d.listed[part] = append(d.listed[part], ds)
	if deleted {
		d.deleted[part] = append(d.deleted[part], ds)
	}
}
