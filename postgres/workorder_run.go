package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// WorkOrderRunner carries out work orders (jobs.WorkOrderRepository). Every step locks the order's row first and acts
// only from the state it expects, so that any replica may repeat any step: a part's rows are removed once.
type WorkOrderRunner struct {
	db       *DB
	hashKey  []byte
	passRows int64 // about how many rows a pass reads (passRows)
	// beforePassCommit, when set, is called at the end of each pass's transaction; an error rolls it back.
	beforePassCommit func() error
	// passTimeout, when positive, bounds each pass's statement instead of the time its context has left (passBudget).
	passTimeout time.Duration
}

// NewWorkOrderRunner returns the runner of the orders kept in db; hashKey keys the identity hashes of its audit
// events (catalog.IdentityHash).
func NewWorkOrderRunner(db *DB, hashKey string) *WorkOrderRunner {
	return &WorkOrderRunner{db: db, hashKey: []byte(hashKey), passRows: passRows}
}

// DueWorkOrders returns up to limit open orders, the oldest first.
func (r *WorkOrderRunner) DueWorkOrders(ctx context.Context, limit int) (_ []string, err error) {
	defer outage(&err)
	rows, err := r.db.Pool.Query(ctx, `SELECT id FROM workorders WHERE status NOT IN ('completed', 'failed') ORDER BY created_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("find open work orders: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// lockWorkOrder reads an order by id alone, in any org, and locks it for the transaction.
const lockWorkOrder = `SELECT ` + workOrderColumns + workOrderFrom + ` WHERE w.id = $1 FOR UPDATE OF w`

// lockWorkOrderIn reads order id by lockWorkOrder, locked for the transaction: each step of the runner starts so,
// then checks that the order is still at its step. A missing order is catalog.ENOTFOUND.
func lockWorkOrderIn(ctx context.Context, tx pgx.Tx, id string) (*catalog.WorkOrder, error) {
	w, err := scanWorkOrder(tx.QueryRow(ctx, lockWorkOrder, id))
	if err != nil {
		return nil, translate(err, workOrderNotFound(id))
	}
	return w, nil
}

// workOrderCaller is who the runner acts as for an order: the service, in the order's org and sandbox, its request
// id naming the order.
func workOrderCaller(w *catalog.WorkOrder) *catalog.Caller {
	return &catalog.Caller{User: serviceUser, ClientID: "retentiond", Org: w.Org, Sandbox: w.Sandbox, RequestID: "workorder:" + w.ID}
}

func (r *WorkOrderRunner) setStatus(ctx context.Context, tx pgx.Tx, id string, status catalog.WorkOrderStatus, reason string, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE workorders SET status = $2, reason = NULLIF($3, ''), updated_at = $4, updated_by = $5 WHERE id = $1`,
		id, string(status), reason, now, serviceUser)
	if err != nil {
		return fmt.Errorf("set work order %s %s: %w", id, status, err)
	}
	return nil
}

// ValidateWorkOrder resolves a received order's datasets into parts (every live dataset of the sandbox for ALL) and
// marks it validated; an order whose one dataset was deleted meanwhile fails, with that reason and its event. It
// returns the order's status after the step (the current one for an order past it).
func (r *WorkOrderRunner) ValidateWorkOrder(ctx context.Context, id string) (status catalog.WorkOrderStatus, err error) {
	defer outage(&err)
	now := r.db.now()
	err = r.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := lockWorkOrderIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if status = w.Status; status != catalog.WorkOrderReceived {
			return nil
		}
		query := `SELECT id, name FROM datasets WHERE org_id = $1 AND sandbox_name = $2 AND deleted_at IS NULL`
		args := []any{w.Org, w.Sandbox}
		if w.DatasetID != catalog.AllDatasets {
			query += ` AND id = $3`
			args = append(args, w.DatasetID)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO workorder_parts (workorder_id, dataset_id, dataset_name, status)
SELECT $`+fmt.Sprint(len(args)+1)+`, d.id, d.name, 'waiting' FROM (`+query+`) d`, append(args, id)...); err != nil {
			return fmt.Errorf("write parts of %s: %w", id, err)
		}
		var parts int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM workorder_parts WHERE workorder_id = $1`, id).Scan(&parts); err != nil {
			return fmt.Errorf("count parts of %s: %w", id, err)
		}
		if parts == 0 && w.DatasetID != catalog.AllDatasets {
			status = catalog.WorkOrderFailed
			reason := fmt.Sprintf("dataset %s was deleted before the order ran", w.DatasetID)
			return r.fail(ctx, tx, w, reason, now)
		}
		status = catalog.WorkOrderValidated
		return r.setStatus(ctx, tx, id, status, "", now)
	})
	return status, err
}

func (r *WorkOrderRunner) fail(ctx context.Context, tx pgx.Tx, w *catalog.WorkOrder, reason string, now time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE workorders SET status = 'failed', reason = $2, identities = '{}', updated_at = $3,
updated_by = $4, completed_at = $3 WHERE id = $1`, w.ID, reason, now, serviceUser); err != nil {
		return fmt.Errorf("fail work order %s: %w", w.ID, err)
	}
	ev := workOrderEvent(workOrderCaller(w), w.Org, w.Sandbox, w.ID, w.DisplayName, audit.ActionExecute, now,
		map[string]any{"status": string(catalog.WorkOrderFailed), "reason": reason, "identities": w.IdentityCount})
	ev.Status = audit.StatusFailure
	return writeAuditEvent(ctx, tx, ev)
}

// SubmitWorkOrder marks a validated order submitted: its removal is under way. An order of many identities over
// enough of the rows decides to go by passes and plans them in the same transaction (planByPasses).
func (r *WorkOrderRunner) SubmitWorkOrder(ctx context.Context, id string) (err error) {
	defer outage(&err)
	now := r.db.now()
	return r.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := lockWorkOrderIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if w.Status != catalog.WorkOrderValidated {
			return nil
		}
		if err := planByPasses(ctx, tx, w, r.passRows); err != nil {
			return err
		}
		return r.setStatus(ctx, tx, id, catalog.WorkOrderSubmitted, "", now)
	})
}

// WaitingParts returns the datasets of an order's parts still to do.
func (r *WorkOrderRunner) WaitingParts(ctx context.Context, id string) (_ []string, err error) {
	defer outage(&err)
	rows, err := r.db.Pool.Query(ctx, `SELECT dataset_id FROM workorder_parts WHERE workorder_id = $1 AND status = 'waiting' ORDER BY dataset_id`, id)
	if err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", id, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// RunWorkOrderPart removes the order's rows from one dataset, in both stores, in one transaction with the part's
// counts, the order's total and the dataset's Delete event. It takes the locks of a delete by _id (DeleteRow): the
// stores' parents, the dataset's ingestion lock and its hold lock shared. A held dataset is left as it is: held
// reports true and the part stays waiting (a read names the hold). A dataset deleted since the order was validated
// ends its part skipped.
func (r *WorkOrderRunner) RunWorkOrderPart(ctx context.Context, id, datasetID string) (held bool, err error) {
	defer outage(&err)
	now := r.db.now()
	err = r.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := lockWorkOrderIn(ctx, tx, id)
		if err != nil {
			return err
		}
		var status string
		if err := tx.QueryRow(ctx, `SELECT status FROM workorder_parts WHERE workorder_id = $1 AND dataset_id = $2 FOR UPDATE`, id, datasetID).Scan(&status); err != nil {
			return fmt.Errorf("lock part %s of %s: %w", datasetID, id, err)
		}
		if status != string(catalog.PartWaiting) || !w.Status.Open() {
			return nil
		}
		ds, err := findDataset(ctx, tx, workOrderCaller(w), datasetID, false)
		if catalog.ErrorCode(err) == catalog.ENOTFOUND {
			_, err = tx.Exec(ctx, `UPDATE workorder_parts SET status = 'skipped', completed_at = $3 WHERE workorder_id = $1 AND dataset_id = $2`, id, datasetID, now)
			return err
		}
		if err != nil {
			return err
		}
		if held, err = r.lockForRemoval(ctx, tx, datasetID); err != nil || held {
			return err
		}
		return r.removePart(ctx, tx, w, ds, now)
	})
	return held, err
}

// lockForRemoval takes a removal's locks on the dataset, as DeleteRow does, and reports whether it is held.
func (r *WorkOrderRunner) lockForRemoval(ctx context.Context, tx pgx.Tx, datasetID string) (bool, error) {
	if _, err := tx.Exec(ctx, lockRows(catalog.Stores, nil)); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, datasetLockSQL, datasetID); err != nil {
		return false, err
	}
	if err := lockDatasetHoldShared(ctx, tx, datasetID); err != nil {
		return false, err
	}
	return datasetHeld(ctx, tx, datasetID)
}

// maxAuditedIdentities bounds the identity hashes and row ids a part's Delete event lists; its counts are exact.
const maxAuditedIdentities = 1000

// removePart removes the dataset's rows of the order from each store, records each removal in the order's ledger and
// completes the part from the ledger, with the rows the order's passes removed from the dataset before a hold kept
// it out of them.
func (r *WorkOrderRunner) removePart(ctx context.Context, tx pgx.Tx, w *catalog.WorkOrder, ds *catalog.Dataset, now time.Time) error {
	var keys []string
	if err := tx.QueryRow(ctx, `SELECT identities FROM workorders WHERE id = $1`, w.ID).Scan(&keys); err != nil {
		return fmt.Errorf("read identities of %s: %w", w.ID, err)
	}
	for _, store := range catalog.Stores {
		res, err := r.db.rows.deleteRowsByIdentity(ctx, tx, w.ID, ds.ID, store, keys, now)
		if err != nil {
			return err
		}
		if err := r.recordPartRemoval(ctx, tx, w.ID, ds.ID, store, res, now); err != nil {
			return err
		}
	}
	return r.completePart(ctx, tx, w, ds, now)
}

// FinishWorkOrder ends a submitted (or ingested) order whose parts are all done: completed, its identities erased
// from the service, with its Execute event. While a part waits for a held dataset it marks the order ingested with
// the hold as reason and returns it; the first tick after the release queues the order again.
func (r *WorkOrderRunner) FinishWorkOrder(ctx context.Context, id string) (status catalog.WorkOrderStatus, err error) {
	defer outage(&err)
	now := r.db.now()
	err = r.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := lockWorkOrderIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if status = w.Status; !status.Removing() {
			return nil
		}
		parts, err := workOrderParts(ctx, tx, id)
		if err != nil {
			return err
		}
		for _, p := range parts {
			if p.Status == catalog.PartWaiting {
				status = catalog.WorkOrderIngested
				return r.setStatus(ctx, tx, id, status, p.Reason, now)
			}
		}
		status = catalog.WorkOrderCompleted
		if _, err := tx.Exec(ctx, `UPDATE workorders SET status = 'completed', reason = NULL, identities = '{}', updated_at = $2,
updated_by = $3, completed_at = $2 WHERE id = $1`, id, now, serviceUser); err != nil {
			return fmt.Errorf("complete work order %s: %w", id, err)
		}
		return writeAuditEvent(ctx, tx, workOrderEvent(workOrderCaller(w), w.Org, w.Sandbox, w.ID, w.DisplayName, audit.ActionExecute, now,
			map[string]any{"status": string(status), "identities": w.IdentityCount, "rowsDeleted": w.RowsDeleted, "datasets": len(parts)}))
	})
	return status, err
}
