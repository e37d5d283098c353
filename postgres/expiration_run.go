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

// ExpirationRunner carries out due dataset expirations for the scheduler (it implements jobs.ExpirationRepository).
// Each step is one transaction that locks the expiration and acts only from the status it expects, so that any
// replica may run any step any number of times, and a dataset is deleted once.
type ExpirationRunner struct{ db *DB }

// NewExpirationRunner returns an ExpirationRunner on db.
func NewExpirationRunner(db *DB) *ExpirationRunner { return &ExpirationRunner{db: db} }

// selectDueExpirations finds the expirations the scheduler has to act on: pending ones come due, and executing ones
// a stopped replica left half done.
const selectDueExpirations = `
SELECT id FROM dataset_expirations
WHERE status IN ('pending', 'executing') AND (status = 'executing' OR expiry <= $1)
ORDER BY expiry, id LIMIT $2`

// DueExpirations returns up to limit expirations due now, the earliest first.
func (r *ExpirationRunner) DueExpirations(ctx context.Context, limit int) (_ []string, err error) {
	defer outage(&err)
	rows, err := r.db.Pool.Query(ctx, selectDueExpirations, r.db.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("find due expirations: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find due expirations: %w", err)
	}
	return ids, nil
}

// lockExpiration reads an expiration by id alone, in any org, and locks it for the transaction.
const lockExpiration = `SELECT ` + expirationColumns + expirationFrom + ` WHERE e.id = $1 FOR UPDATE OF e`

// lockDatasetState locks the expiration's dataset and tells whether it was deleted, and when.
const lockDatasetState = `SELECT deleted_at FROM datasets WHERE id = $1 FOR UPDATE`

// serviceCaller is who the scheduler acts as for e: the service, in e's org and sandbox, its request id naming e.
func serviceCaller(e *catalog.Expiration) *catalog.Caller {
	return &catalog.Caller{User: serviceUser, ClientID: "retentiond", Org: e.Org, Sandbox: e.Sandbox, RequestID: "expiration:" + e.ID}
}

// StartExpiration takes the first step of a due expiration: it marks it executing and reports true, so that
// FinishExpiration deletes the dataset. It reports true without change for one already executing (a retry), and
// false when there is nothing to do: the expiration is not due (changed, cancelled, done), its dataset is held (it
// stays pending, unchanged: a read names the hold, and the first tick after the release queues it again), or its
// dataset was deleted by other means (the expiration ends cancelled with that reason and its audit event).
func (r *ExpirationRunner) StartExpiration(ctx context.Context, id string) (started bool, err error) {
	defer outage(&err)
	now := r.db.now()
	err = r.db.inTx(ctx, func(tx pgx.Tx) error {
		e, err := scanExpiration(tx.QueryRow(ctx, lockExpiration, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock expiration %s: %w", id, err)
		}
		if !e.Due(now) {
			return nil
		}
		if e.Status == catalog.ExpirationExecuting {
			started = true
			return nil
		}
		started, err = r.start(ctx, tx, e, now)
		return err
	})
	return started, err
}

func (r *ExpirationRunner) start(ctx context.Context, tx pgx.Tx, e *catalog.Expiration, now time.Time) (bool, error) {
	var deletedAt *time.Time
	if err := tx.QueryRow(ctx, lockDatasetState, e.DatasetID).Scan(&deletedAt); err != nil {
		return false, fmt.Errorf("lock dataset %s of expiration %s: %w", e.DatasetID, e.ID, err)
	}
	if deletedAt != nil {
		return false, cancelForDeletedDataset(ctx, tx, e, *deletedAt, now)
	}
	reason, err := heldReason(ctx, tx, e.DatasetID)
	if err != nil {
		return false, err
	}
	if reason != "" {
		return false, nil
	}
	return true, saveExpiration(ctx, tx, e.Executing(serviceUser, now))
}

// heldReason tells why the dataset must not be deleted now (its oldest active legal hold, named), or "" when it may
// be. The caller holds the dataset's row lock, which PlaceHold takes too, so no hold is placed before it commits.
func heldReason(ctx context.Context, tx pgx.Tx, datasetID string) (string, error) {
	h, err := firstActiveHold(ctx, tx, datasetID)
	if err != nil || h == nil {
		return "", err
	}
	return catalog.ErrDatasetHeld(datasetID, h, "its expiration").Message, nil
}

func cancelForDeletedDataset(ctx context.Context, tx pgx.Tx, e *catalog.Expiration, deletedAt, now time.Time) error {
	reason := fmt.Sprintf("dataset %s was deleted by other means at %s, before the expiration ran", e.DatasetID, deletedAt.UTC().Format(time.RFC3339))
	next := e.CancelledBecause(reason, serviceUser, now)
	if err := saveExpiration(ctx, tx, next); err != nil {
		return err
	}
	return writeAuditEvent(ctx, tx, expirationEvent(serviceCaller(e), next, audit.ActionCancel, now, next.AuditDetails(e)))
}

// FinishExpiration takes the second step of an executing expiration: in one transaction it deletes the dataset
// through the path DELETE /dataSets/{id} takes (its Delete event naming the expiration; its rows leave with the
// next retention run), marks the expiration completed and writes its Execute event. An expiration in any other
// status is left alone, so a second call does nothing. A dataset held since the first step (a hold placed while a
// replica was stopped between the steps) is not an error: the expiration goes back to pending, waiting for the
// release as one held before its first step does, and the call returns nil, so that its job ends rather than
// retrying on a backoff that the release would not shorten.
func (r *ExpirationRunner) FinishExpiration(ctx context.Context, id string) (err error) {
	defer outage(&err)
	now := r.db.now()
	return r.db.inTx(ctx, func(tx pgx.Tx) error {
		e, err := scanExpiration(tx.QueryRow(ctx, lockExpiration, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock expiration %s: %w", id, err)
		}
		if e.Status != catalog.ExpirationExecuting {
			return nil
		}
		return finish(ctx, tx, e, now)
	})
}

func finish(ctx context.Context, tx pgx.Tx, e *catalog.Expiration, now time.Time) error {
	c := serviceCaller(e)
	ds, err := findDataset(ctx, tx, c, e.DatasetID, true)
	if catalog.ErrorCode(err) == catalog.ENOTFOUND {
		var deletedAt time.Time
		if err := tx.QueryRow(ctx, lockDatasetState, e.DatasetID).Scan(&deletedAt); err != nil {
			return fmt.Errorf("read deletion of dataset %s: %w", e.DatasetID, err)
		}
		return cancelForDeletedDataset(ctx, tx, e, deletedAt, now)
	}
	if err != nil {
		return err
	}
	reason, err := heldReason(ctx, tx, ds.ID)
	if err != nil {
		return err
	}
	if reason != "" {
		return saveExpiration(ctx, tx, e.Held(reason, serviceUser, now))
	}
	details := map[string]any{"expirationId": e.ID, "expiry": e.Expiry.Format(time.RFC3339Nano)}
	if err := deleteDataset(ctx, tx, c, ds, now, details); err != nil {
		return err
	}
	next := e.Completed(serviceUser, now)
	if err := saveExpiration(ctx, tx, next); err != nil {
		return err
	}
	d := next.AuditDetails(e)
	d["executingAt"], d["completedAt"] = e.ExecutingAt.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)
	return writeAuditEvent(ctx, tx, expirationEvent(c, next, audit.ActionExecute, now, d))
}
