package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

var _ catalog.HoldService = (*DatasetService)(nil)

// holdsLockKey is the advisory lock between legal holds and the removals that span datasets: a drop batch and a
// walk range take it shared and then read the active holds; placing a hold takes it exclusive. Removals of one
// dataset's rows (a row-phase batch, a delete by _id) take the dataset's own hold lock (datasetHoldLock) instead,
// shared, which a hold on that dataset takes exclusive. So a hold waits for the removals in flight that may touch
// its dataset to commit, and every removal that starts after it sees it: once POST …/holds has answered, no row of
// the dataset is removed. A delete by _id of another dataset waits for no hold.
const holdsLockKey = 7436500008

// datasetHoldLock takes a dataset's hold lock for the rest of the transaction: exclusive for a hold placed on it
// (shared: pg_advisory_xact_lock_shared), keyed by the dataset's id.
const datasetHoldLock = `SELECT pg_advisory_xact_lock(hashtextextended('hold:' || $1, 0))`

const datasetHoldLockShared = `SELECT pg_advisory_xact_lock_shared(hashtextextended('hold:' || $1, 0))`

const holdColumns = `h.id, h.dataset_id, h.reason, h.reference, h.placed_by, h.placed_client, h.placed_at,
       h.released_by, h.released_at`

func scanHold(row pgx.Row) (*catalog.Hold, error) {
	var h catalog.Hold
	err := row.Scan(&h.ID, &h.DatasetID, &h.Reason, &h.Reference, &h.PlacedBy, &h.PlacedClient, &h.PlacedAt,
		&h.ReleasedBy, &h.ReleasedAt)
	return &h, err
}

// heldDatasets takes the holds lock shared, for the rest of the removal transaction tx, and returns the datasets
// with an active hold (never nil: an empty array matches none, where nil would be SQL NULL).
func heldDatasets(ctx context.Context, tx pgx.Tx) ([]string, error) {
	if err := lockHoldsShared(ctx, tx); err != nil {
		return nil, err
	}
	return activeHoldDatasets(ctx, tx)
}

// lockHoldsShared takes the holds lock shared for the rest of the removal transaction tx: no hold is placed until
// it ends, and a hold placed before it is visible to its next statement.
func lockHoldsShared(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, holdsLockKey); err != nil {
		return fmt.Errorf("lock holds: %w", err)
	}
	return nil
}

// heldDataset takes the dataset's hold lock shared, for the rest of the removal transaction tx, and reports whether
// the dataset has an active hold: then the transaction removes none of its rows.
func heldDataset(ctx context.Context, tx pgx.Tx, datasetID string) (bool, error) {
	if err := lockDatasetHoldShared(ctx, tx, datasetID); err != nil {
		return false, err
	}
	return datasetHeld(ctx, tx, datasetID)
}

// lockDatasetHoldShared takes the dataset's hold lock shared for the rest of the transaction tx, which removes rows
// of that dataset only: no hold is placed on it until tx ends, and one placed before is visible to tx's next
// statement. Holds on other datasets, of any org, do not wait for it.
func lockDatasetHoldShared(ctx context.Context, tx pgx.Tx, datasetID string) error {
	if _, err := tx.Exec(ctx, datasetHoldLockShared, datasetID); err != nil {
		return fmt.Errorf("lock holds of %s: %w", datasetID, err)
	}
	return nil
}

// datasetHeld reports whether the dataset has an active hold. Code that removes rows in a transaction of its own
// asks it after locking the dataset's row (as PlaceHold does), its hold lock (lockDatasetHoldShared) or the holds
// lock (lockHoldsShared), so that no hold is placed between the answer and its commit.
func datasetHeld(ctx context.Context, q querier, datasetID string) (bool, error) {
	var held bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dataset_holds WHERE dataset_id = $1 AND released_at IS NULL)`,
		datasetID).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("read holds of %s: %w", datasetID, err)
	}
	return held, nil
}

// activeHoldDatasets lists the datasets with an active hold, without the lock: for listings that a removal
// re-checks under it.
func activeHoldDatasets(ctx context.Context, q querier) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT dataset_id FROM dataset_holds WHERE released_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("read held datasets: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read held datasets: %w", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// firstActiveHold returns the dataset's oldest active hold, or nil when it has none: what a refused removal names.
func firstActiveHold(ctx context.Context, q querier, datasetID string) (*catalog.Hold, error) {
	h, err := scanHold(q.QueryRow(ctx, `SELECT `+holdColumns+` FROM dataset_holds h
		WHERE h.dataset_id = $1 AND h.released_at IS NULL ORDER BY h.placed_at, h.id LIMIT 1`, datasetID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read holds of %s: %w", datasetID, err)
	}
	return h, nil
}

// refuseIfHeld returns ErrDatasetHeld naming the dataset's oldest active hold, or nil when it has none. The caller
// holds the dataset's row lock (or the holds lock shared), so that no hold is placed between the check and its
// commit.
func refuseIfHeld(ctx context.Context, q querier, datasetID, what string) error {
	h, err := firstActiveHold(ctx, q, datasetID)
	if err != nil || h == nil {
		return err
	}
	return catalog.ErrDatasetHeld(datasetID, h, what)
}

// Held reports whether the dataset (of any org) has an active legal hold: a removal of its rows other than the
// sweep's (which asks in each of its transactions) must be refused. Code of this package that removes rows in a
// transaction of its own asks datasetHeld or refuseIfHeld there instead, after locking the dataset's row or the holds
// lock (lockHoldsShared).
func (s *DatasetService) Held(ctx context.Context, datasetID string) (_ bool, err error) {
	defer outage(&err)
	return datasetHeld(ctx, s.db.Pool, datasetID)
}

// attachHolds fills each dataset's count of active holds, in one query.
func attachHolds(ctx context.Context, q querier, datasets []*catalog.Dataset) error {
	if len(datasets) == 0 {
		return nil
	}
	byID, ids := indexByID(datasets)
	rows, err := q.Query(ctx, `SELECT dataset_id, count(*)::int FROM dataset_holds
		WHERE dataset_id = ANY($1) AND released_at IS NULL GROUP BY dataset_id`, ids)
	if err != nil {
		return fmt.Errorf("count holds: %w", err)
	}
	var id string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		byID[id].ActiveHolds = n
		return nil
	})
	if err != nil {
		return fmt.Errorf("count holds: %w", err)
	}
	return nil
}

// heldCondition filters a dataset listing by whether the dataset has an active hold.
const heldCondition = `EXISTS (SELECT 1 FROM dataset_holds k WHERE k.dataset_id = d.id AND k.released_at IS NULL)`

const insertHold = `
INSERT INTO dataset_holds (id, dataset_id, reason, reference, placed_by, placed_client, placed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

// PlaceHold implements catalog.HoldService. It locks the dataset's row, so that a delete of the dataset and the
// hold go one after the other, then the dataset's hold lock and the holds lock exclusive, so that it commits only
// once the removals in flight that may touch the dataset have: the deletes by _id and row-phase batches of this
// dataset, and the drops and walks, which span datasets. Both are taken before the audit event, which waits for
// the org's chain: a hold waiting for its own org's other writes holds up no removal of another dataset's rows
// by _id (16 connections of one org placing and releasing holds took another org's deletes from 3 to 47 ms when
// it held one lock of every org while it waited).
func (s *DatasetService) PlaceHold(ctx context.Context, c *catalog.Caller, datasetID string, create catalog.HoldCreate) (_ *catalog.Hold, err error) {
	defer outage(&err)
	h := &catalog.Hold{ID: catalog.NewDatasetID(), DatasetID: datasetID, Reason: create.Reason,
		Reference: create.Reference, PlacedBy: c.User, PlacedClient: c.ClientID}
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, true)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, datasetHoldLock, datasetID); err != nil {
			return fmt.Errorf("lock holds of %s: %w", datasetID, err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, holdsLockKey); err != nil {
			return fmt.Errorf("lock holds: %w", err)
		}
		var active int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM dataset_holds WHERE dataset_id = $1 AND released_at IS NULL`,
			datasetID).Scan(&active); err != nil {
			return fmt.Errorf("count holds of %s: %w", datasetID, err)
		}
		if active >= catalog.MaxActiveHolds {
			return &catalog.Error{Code: catalog.ECONFLICT, Type: "too-many-holds", Field: "id", Message: fmt.Sprintf(
				"dataset %s has %d active holds, the most it may have; release one first", datasetID, active)}
		}
		h.PlacedAt = s.db.now()
		if _, err := tx.Exec(ctx, insertHold, h.ID, h.DatasetID, h.Reason, h.Reference, h.PlacedBy, h.PlacedClient,
			h.PlacedAt); err != nil {
			return fmt.Errorf("insert hold on %s: %w", datasetID, err)
		}
		return writeAuditEvent(ctx, tx, datasetEvent(c, ds, audit.ActionHold, h.PlacedAt, holdDetails(h, active+1)))
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// holdDetails is what a Hold or Release event records: the hold, and how many the dataset has active after it.
func holdDetails(h *catalog.Hold, activeAfter int) map[string]any {
	d := map[string]any{"holdId": h.ID, "reason": h.Reason, "reference": h.Reference,
		"placedBy": h.PlacedBy, "placedAt": h.PlacedAt.UTC().Format(time.RFC3339Nano), "activeHolds": activeAfter}
	if h.ReleasedAt != nil {
		d["releasedAt"] = h.ReleasedAt.UTC().Format(time.RFC3339Nano)
	}
	return d
}

// FindHolds implements catalog.HoldService.
func (s *DatasetService) FindHolds(ctx context.Context, c *catalog.Caller, datasetID string) (_ []*catalog.Hold, err error) {
	defer outage(&err)
	var holds []*catalog.Hold
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := findDataset(ctx, tx, c, datasetID, false); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+holdColumns+` FROM dataset_holds h
			WHERE h.dataset_id = $1 AND h.released_at IS NULL ORDER BY h.placed_at, h.id`, datasetID)
		if err != nil {
			return fmt.Errorf("read holds of %s: %w", datasetID, err)
		}
		holds, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Hold, error) { return scanHold(row) })
		return err
	})
	return holds, err
}

// FindHold implements catalog.HoldService.
func (s *DatasetService) FindHold(ctx context.Context, c *catalog.Caller, datasetID, holdID string) (_ *catalog.Hold, err error) {
	defer outage(&err)
	var h *catalog.Hold
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := findDataset(ctx, tx, c, datasetID, false); err != nil {
			return err
		}
		h, err = scanHold(tx.QueryRow(ctx, `SELECT `+holdColumns+` FROM dataset_holds h
			WHERE h.id = $1 AND h.dataset_id = $2`, holdID, datasetID))
		return translate(err, holdNotFound(datasetID, holdID))
	})
	return h, err
}

func holdNotFound(datasetID, holdID string) string {
	return fmt.Sprintf("hold %s of dataset %s was not found", holdID, datasetID)
}

const releaseHold = `
UPDATE dataset_holds h SET released_by = $3, released_at = $4
WHERE h.id = $1 AND h.dataset_id = $2 AND h.released_at IS NULL
RETURNING ` + holdColumns

// ReleaseHold implements catalog.HoldService. It locks the dataset's row as PlaceHold does; a release needs no
// holds lock, since a removal that read the hold before it simply removed nothing of the dataset, and the next
// run does.
func (s *DatasetService) ReleaseHold(ctx context.Context, c *catalog.Caller, datasetID, holdID string) (_ *catalog.Hold, err error) {
	defer outage(&err)
	var h *catalog.Hold
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, true)
		if err != nil {
			return err
		}
		now := s.db.now()
		h, err = scanHold(tx.QueryRow(ctx, releaseHold, holdID, datasetID, c.User, now))
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.Errorf(catalog.ENOTFOUND, "hold %s of dataset %s was not found or was released already", holdID, datasetID)
		}
		if err != nil {
			return fmt.Errorf("release hold %s: %w", holdID, err)
		}
		var active int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM dataset_holds WHERE dataset_id = $1 AND released_at IS NULL`,
			datasetID).Scan(&active); err != nil {
			return fmt.Errorf("count holds of %s: %w", datasetID, err)
		}
		return writeAuditEvent(ctx, tx, datasetEvent(c, ds, audit.ActionRelease, now, holdDetails(h, active)))
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}
