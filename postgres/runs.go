package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// RunRepository keeps retention runs, their per-dataset parts and the ledger of what they removed.
type RunRepository struct{ db *DB }

// NewRunRepository returns a RunRepository on db.
func NewRunRepository(db *DB) *RunRepository { return &RunRepository{db: db} }

// Now returns the store's clock reading, so the scheduler and the runs share one clock.
func (s *RunRepository) Now() time.Time { return s.db.now() }

// LastSlot returns the last slot the store's schedule ran. A fresh installation starts its schedule at now, so it
// has no missed slot to catch up.
func (s *RunRepository) LastSlot(ctx context.Context, store catalog.Store, now time.Time) (time.Time, error) {
	var last time.Time
	err := s.db.Pool.QueryRow(ctx, `
WITH ins AS (INSERT INTO retention_schedule (store, last_slot) VALUES ($1, $2) ON CONFLICT (store) DO NOTHING RETURNING last_slot)
SELECT last_slot FROM ins UNION ALL SELECT last_slot FROM retention_schedule WHERE store = $1 LIMIT 1`, string(store), now).Scan(&last)
	if err != nil {
		return time.Time{}, fmt.Errorf("read schedule state of %s: %w", store, err)
	}
	return last, nil
}

// CreateScheduledRun creates the run of a slot unless one exists, and advances the schedule. The unique slot key makes
// this safe when replicas, restarts or clocks a few seconds apart try the same slot. While an earlier run of the store
// is still in progress the slot waits (a run never overlaps the previous one), and is created by a later tick.
// Returns the run id ("" when the slot waits) and whether this call created it.
func (s *RunRepository) CreateScheduledRun(ctx context.Context, store catalog.Store, slot time.Time, grace retention.Period) (string, bool, error) {
	now := s.db.now()
	id := uuid.NewString()
	created, waiting := false, false
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		// Serialize the store's scheduling, so the in-progress check and the insert see one state.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('schedule:' || $1, 0))`, string(store)); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM retention_runs WHERE store = $1 AND trigger = 'schedule'
			AND status IN ('pending', 'running') AND scheduled_for < $2)`, string(store), slot).Scan(&waiting)
		if err != nil || waiting {
			return err
		}
		tag, err := tx.Exec(ctx, `
INSERT INTO retention_runs (id, store, trigger, scheduled_for, status, evaluated_at, grace, created_at)
VALUES ($1, $2, 'schedule', $3, 'pending', $4, $5::interval, $4)
ON CONFLICT (store, scheduled_for) WHERE scheduled_for IS NOT NULL DO NOTHING`, id, string(store), slot, now, grace.Interval())
		if err != nil {
			return err
		}
		created = tag.RowsAffected() == 1
		_, err = tx.Exec(ctx, `UPDATE retention_schedule SET last_slot = GREATEST(last_slot, $2) WHERE store = $1`, string(store), slot)
		return err
	})
	if err != nil {
		return "", false, fmt.Errorf("create run of %s slot %s: %w", store, slot.Format(time.RFC3339), err)
	}
	if waiting {
		return "", false, nil
	}
	if !created {
		err = s.db.Pool.QueryRow(ctx, `SELECT id FROM retention_runs WHERE store = $1 AND scheduled_for = $2`, string(store), slot).Scan(&id)
	}
	return id, created, err
}

// activeRunSQL finds a run in progress over the same store that covers any dataset of the request: a scheduled run
// covers every dataset; a manual one its org and sandbox, or its listed datasets.
const activeRunSQL = `
SELECT id FROM retention_runs
WHERE store = $1 AND status IN ('pending', 'running')
  AND (trigger = 'schedule'
       OR (org_id = $2 AND sandbox_name = $3
           AND (dataset_ids IS NULL OR $4::text[] IS NULL OR dataset_ids && $4::text[])))
ORDER BY created_at LIMIT 1`

// CreateManualRun creates a manual run in the caller's scope, refusing with ECONFLICT when a run in progress already
// covers any of the same datasets.
func (s *RunRepository) CreateManualRun(ctx context.Context, c *catalog.Caller, req catalog.RunRequest, grace retention.Period) (_ string, err error) {
	defer outage(&err)
	now := s.db.now()
	id := uuid.NewString()
	var ids any
	if len(req.DatasetIDs) > 0 {
		ids = req.DatasetIDs
	}
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		// Serialize run creation, so two requests at once cannot both see no run in progress.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7436500003)`); err != nil {
			return err
		}
		if err := checkWriteFence(ctx, tx, c.Org); err != nil {
			return err
		}
		for _, dsID := range req.DatasetIDs {
			if _, err := findDataset(ctx, tx, c, dsID, false); err != nil {
				return err
			}
		}
		var active string
		err := tx.QueryRow(ctx, activeRunSQL, string(req.Store), c.Org, c.Sandbox, ids).Scan(&active)
		if err == nil {
			return &catalog.Error{Code: catalog.ECONFLICT, Type: "run-in-progress", Field: "datasetIds",
				Message: fmt.Sprintf("run %s is in progress over the same datasets; wait for it to end (GET /retention/runs/%s)", active, active)}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, `
INSERT INTO retention_runs (id, store, trigger, org_id, sandbox_name, dataset_ids, dry_run, status, evaluated_at, grace, created_at)
VALUES ($1, $2, 'manual', $3, $4, $5, $6, 'pending', $7, $8::interval, $7)`,
			id, string(req.Store), c.Org, c.Sandbox, ids, req.DryRun, now, grace.Interval())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("start run: %w", err)
	}
	return id, nil
}

// PrepareRun lists the run's datasets on its first call (every dataset of the store with rows, or with its rows
// left over after a deletion, within the run's scope) and marks it running; later calls return what is left. It is
// idempotent, so a job retried after a crash picks up where the run stopped.
func (s *RunRepository) PrepareRun(ctx context.Context, runID string) (*catalog.Plan, error) {
	plan := &catalog.Plan{RunID: runID}
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		var status, store string
		var org, sandbox *string
		var ids []string
		g := &plan.Grace
		err := tx.QueryRow(ctx, `SELECT status, store, org_id, sandbox_name, dataset_ids, dry_run, evaluated_at,
			date_part('year', grace)::bigint, date_part('month', grace)::bigint, date_part('day', grace)::bigint
			FROM retention_runs WHERE id = $1 FOR UPDATE`, runID).
			Scan(&status, &store, &org, &sandbox, &ids, &plan.DryRun, &plan.At, &g.Years, &g.Months, &g.Days)
		if err != nil {
			return translate(err, "run "+runID+" was not found")
		}
		plan.Store = catalog.Store(store)
		if status == catalog.StatusPending {
			if err := listRunDatasets(ctx, tx, runID, store, org, sandbox, ids, s.db.now()); err != nil {
				return err
			}
		}
		if org != nil {
			plan.Scope = map[string]bool{}
			if err := scopeDatasets(ctx, tx, runID, plan.Scope); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT dataset_id FROM retention_run_datasets WHERE run_id = $1 AND status IN ('pending', 'running') ORDER BY dataset_id`, runID)
		if err != nil {
			return err
		}
		plan.Pending, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prepare run %s: %w", runID, err)
	}
	return plan, nil
}

func scopeDatasets(ctx context.Context, tx pgx.Tx, runID string, into map[string]bool) error {
	rows, err := tx.Query(ctx, `SELECT dataset_id FROM retention_run_datasets WHERE run_id = $1`, runID)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, id := range ids {
		into[id] = true
	}
	return err
}

func listRunDatasets(ctx context.Context, tx pgx.Tx, runID, store string, org, sandbox *string, ids []string, now time.Time) error {
	var idFilter any
	if len(ids) > 0 {
		idFilter = ids
	}
	tag, err := tx.Exec(ctx, `
INSERT INTO retention_run_datasets (run_id, dataset_id, org_id, sandbox_name, status, ttl_value)
SELECT $1, d.id, d.org_id, d.sandbox_name, 'pending', re.ttl_value
FROM datasets d
LEFT JOIN row_expirations re ON re.dataset_id = d.id AND re.store = $2
WHERE ($3::text IS NULL OR (d.org_id = $3 AND d.sandbox_name = $4))
  AND ($5::text[] IS NULL OR d.id = ANY($5::text[]))
  AND `+unfencedSQL+`
  AND EXISTS (SELECT 1 FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
              WHERE st.dataset_id = d.id AND p.store = $2 AND st.row_count > 0)
ON CONFLICT DO NOTHING`, runID, store, org, sandbox, idFilter)
	if err != nil {
		return fmt.Errorf("list datasets of run %s: %w", runID, err)
	}
	_, err = tx.Exec(ctx, `UPDATE retention_runs SET status = 'running', started_at = $2, datasets_total = $3 WHERE id = $1`,
		runID, now, tag.RowsAffected())
	return err
}

// MarkDatasetStarted records when a dataset's part began.
func (s *RunRepository) MarkDatasetStarted(ctx context.Context, runID, datasetID string) error {
	_, err := s.db.Pool.Exec(ctx, `UPDATE retention_run_datasets SET status = 'running', started_at = COALESCE(started_at, $3)
		WHERE run_id = $1 AND dataset_id = $2 AND status = 'pending'`, runID, datasetID, s.db.now())
	return err
}

// FinishDataset ends a dataset's part of a run in one transaction: its status, its Expire audit event built from the
// ledger (so counts are exact across interruptions), its lastCompleted, and the run's progress and final status.
// Calling it again for a part already finished does nothing.
func (s *RunRepository) FinishDataset(ctx context.Context, runID, datasetID string, out catalog.Outcome) (*catalog.Finished, error) {
	now := s.db.now()
	var fin *catalog.Finished
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		part, err := finishPart(ctx, tx, runID, datasetID, out, now)
		if err != nil {
			return err
		}
		fin = &catalog.Finished{Parts: part}
		fin.Run, err = finishRunIfDone(ctx, tx, runID, now)
		return err
	})
	return fin, err
}

// FinishDatasets ends, successfully and in one transaction, the parts of datasets that had nothing left to do after
// the run's drops and boundary pass: one commit for all of them rather than one each, and a statement for each step
// over all of them rather than one for each dataset, whose cost grew with the datasets of a run.
func (s *RunRepository) FinishDatasets(ctx context.Context, runID string, datasetIDs []string) (*catalog.Finished, error) {
	now := s.db.now()
	var fin *catalog.Finished
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		parts, err := lockOpenParts(ctx, tx, runID, datasetIDs)
		if err != nil {
			return err
		}
		if err := markParts(ctx, tx, runID, parts, catalog.StatusSucceeded, "", nil, now); err != nil {
			return err
		}
		if err := recordExpires(ctx, tx, runID, parts, catalog.StatusSucceeded, "", now); err != nil {
			return err
		}
		fin = &catalog.Finished{Parts: partEnds(parts, catalog.StatusSucceeded, "", now)}
		fin.Run, err = finishRunIfDone(ctx, tx, runID, now)
		return err
	})
	return fin, err
}

// partEnds reports how the parts ended, with what the ledger says each removed.
func partEnds(parts []openPart, status, errText string, now time.Time) []catalog.PartEnd {
	ends := make([]catalog.PartEnd, 0, len(parts))
	for _, p := range parts {
		end := catalog.PartEnd{DatasetID: p.datasetID, Status: status, Error: errText, Rows: p.rows, PartitionsDropped: p.dropped}
		if p.started != nil {
			end.Duration = now.Sub(*p.started)
		}
		end.Status = p.partStatus(status)
		ends = append(ends, end)
	}
	return ends
}

// openPart is a dataset's part of a run that is still pending or running, with what the ledger says it removed.
type openPart struct {
	datasetID string
	finishedPart
}

// lockOpenParts locks the parts of the datasets that are still open, in org order: each org's Expire events lock
// its audit chain until commit, and a fixed order keeps two runs finishing datasets of the same orgs from
// deadlocking. Each part reads its own ledger rows by index (LATERAL): joined to the ledger aggregated for all the
// datasets at once, the planner chose a nested loop that aggregated it again for every part, and finishing a run of
// 5,000 datasets took 4.2 s in this statement (8.6 s under EXPLAIN ANALYZE, 0.25 s so; docs/benchmarks.md).
func lockOpenParts(ctx context.Context, tx pgx.Tx, runID string, datasetIDs []string) ([]openPart, error) {
	rows, err := tx.Query(ctx, `
SELECT rd.dataset_id, rd.org_id, rd.sandbox_name, rd.ttl_value, rd.started_at, r.store, r.dry_run, r.evaluated_at,
       COALESCE(d.name, ''), COALESCE(l.rows, 0)::bigint, COALESCE(l.dropped, 0)::int,
       EXISTS (SELECT 1 FROM dataset_holds k WHERE k.dataset_id = rd.dataset_id AND k.released_at IS NULL)
FROM retention_run_datasets rd JOIN retention_runs r ON r.id = rd.run_id LEFT JOIN datasets d ON d.id = rd.dataset_id
LEFT JOIN LATERAL (SELECT sum(rows_deleted) AS rows, count(*) FILTER (WHERE dropped) AS dropped
           FROM retention_deletions WHERE run_id = $1 AND dataset_id = rd.dataset_id) l ON true
WHERE rd.run_id = $1 AND rd.dataset_id = ANY($2) AND rd.status IN ('pending', 'running')
ORDER BY rd.org_id, rd.dataset_id FOR UPDATE OF rd`, runID, datasetIDs)
	if err != nil {
		return nil, fmt.Errorf("lock parts of run %s: %w", runID, err)
	}
	var parts []openPart
	var p openPart
	_, err = pgx.ForEachRow(rows, []any{&p.datasetID, &p.org, &p.sandbox, &p.ttl, &p.started, &p.store, &p.dryRun,
		&p.evaluatedAt, &p.name, &p.rows, &p.dropped, &p.held}, func() error {
		parts = append(parts, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock parts of run %s: %w", runID, err)
	}
	return parts, nil
}

// markParts records that the parts ended with one status and error; counted is what a dry run counted (nil
// otherwise).
func markParts(ctx context.Context, tx pgx.Tx, runID string, parts []openPart, status, errText string, counted any, now time.Time) error {
	ids, statuses := make([]string, 0, len(parts)), make([]string, 0, len(parts))
	for _, p := range parts {
		ids, statuses = append(ids, p.datasetID), append(statuses, p.partStatus(status))
	}
	if _, err := tx.Exec(ctx, `UPDATE retention_run_datasets rd SET status = c.status, error = NULLIF($3, ''), rows_counted = $4,
		finished_at = $5, started_at = COALESCE(started_at, $5)
		FROM unnest($2::text[], $6::text[]) AS c (dataset_id, status) WHERE rd.run_id = $1 AND rd.dataset_id = c.dataset_id`,
		runID, ids, errText, counted, now, statuses); err != nil {
		return fmt.Errorf("finish parts of run %s: %w", runID, err)
	}
	return nil
}

// recordExpires sets lastCompleted of the datasets' stores when their parts succeeded (a held one's did not: its
// expired rows wait for the release), and then writes their Expire events, an org's events in one append: last, so that each org's chain head stays locked only for the rest
// of the transaction. Dry runs leave both alone.
func recordExpires(ctx context.Context, tx pgx.Tx, runID string, parts []openPart, status, errText string, now time.Time) error {
	var ids, stores []string
	for _, p := range parts {
		if !p.dryRun && p.partStatus(status) == catalog.StatusSucceeded {
			ids, stores = append(ids, p.datasetID), append(stores, p.store)
		}
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE row_expirations e SET last_completed_at = $3
		FROM unnest($1::text[], $2::text[]) AS c (dataset_id, store) WHERE e.dataset_id = c.dataset_id AND e.store = c.store`,
			ids, stores, now); err != nil {
			return fmt.Errorf("set lastCompleted of run %s: %w", runID, err)
		}
	}
	var events []*audit.Event
	for i, p := range parts {
		if !p.dryRun {
			events = append(events, expireEvent(runID, p.datasetID, p.finishedPart, status, errText, now))
		}
		if i == len(parts)-1 || parts[i+1].org != p.org {
			if err := appendAuditEvents(ctx, tx, events); err != nil {
				return err
			}
			events = events[:0]
		}
	}
	return nil
}

// finishPart records how one dataset's part ended, with its Expire event, and reports it; a part already finished
// is left as it is, and nothing is reported.
func finishPart(ctx context.Context, tx pgx.Tx, runID, datasetID string, out catalog.Outcome, now time.Time) ([]catalog.PartEnd, error) {
	parts, err := lockOpenParts(ctx, tx, runID, []string{datasetID})
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	status, errText := catalog.StatusSucceeded, ""
	if out.Err != nil {
		status, errText = catalog.StatusFailed, out.Err.Error()
	}
	var counted any
	if parts[0].dryRun {
		counted = out.Counted
		parts[0].rows = out.Counted
	}
	if err := markParts(ctx, tx, runID, parts, status, errText, counted, now); err != nil {
		return nil, err
	}
	if err := recordExpires(ctx, tx, runID, parts, status, errText, now); err != nil {
		return nil, err
	}
	return partEnds(parts, status, errText, now), nil
}

type finishedPart struct {
	org, sandbox, store, name string
	ttl                       *string
	started                   *time.Time
	dryRun                    bool
	evaluatedAt               time.Time
	rows                      int64
	dropped                   int
	held                      bool // the dataset is under a legal hold as its part ends
}

// partStatus is how a part that ended with status ends: a successful part of a held dataset ends as held, since
// nothing of it was removed while it was held.
func (p finishedPart) partStatus(status string) string {
	if p.held && status == catalog.StatusSucceeded {
		return catalog.StatusHeld
	}
	return status
}

// expireEvent is the Expire audit event of a dataset's part of a run: what the ledger says it removed.
func expireEvent(runID, datasetID string, p finishedPart, status, errText string, now time.Time) *audit.Event {
	duration := int64(0)
	if p.started != nil {
		duration = now.Sub(*p.started).Milliseconds()
	}
	status = p.partStatus(status)
	auditStatus := audit.StatusSuccess
	if status == catalog.StatusFailed {
		auditStatus = audit.StatusFailure
	}
	ev := &audit.Event{
		Org: p.org, Sandbox: p.sandbox, Timestamp: now, RequestID: "run:" + runID, AssetType: audit.AssetDataset,
		AssetID: datasetID, AssetName: p.name, Action: audit.ActionExpire, Status: auditStatus,
		User: "retention-service", ClientID: "retentiond",
		Details: map[string]any{
			"runId": runID, "store": p.store, "ttlValue": p.ttl, "evaluatedAt": p.evaluatedAt.UTC().Format(time.RFC3339Nano),
			"rowsDeleted": p.rows, "partitionsDropped": p.dropped, "durationMs": duration, "status": status, "error": errText,
		},
	}
	if p.held {
		ev.Details["held"] = true // the dataset is under a legal hold: its expired rows stay until the release
	}
	return ev
}

// finishRunIfDone counts the run's finished parts and, when this was the last, sets its final status; it returns how the
// run ended, or nil while parts remain.
func finishRunIfDone(ctx context.Context, tx pgx.Tx, runID string, now time.Time) (*catalog.RunEnd, error) {
	var status string
	var started, finished *time.Time
	err := tx.QueryRow(ctx, `
UPDATE retention_runs r SET datasets_done = c.done,
    status = CASE WHEN c.done < c.total THEN r.status
                  WHEN c.failed = 0 THEN 'succeeded'
                  WHEN c.failed = c.total THEN 'failed'
                  ELSE 'partial' END,
    finished_at = CASE WHEN c.done < c.total THEN NULL ELSE $2::timestamptz END
FROM (SELECT count(*) AS total, count(*) FILTER (WHERE status IN ('succeeded', 'failed', 'held')) AS done,
             count(*) FILTER (WHERE status = 'failed') AS failed
      FROM retention_run_datasets WHERE run_id = $1) c
WHERE r.id = $1
RETURNING r.status, r.started_at, r.finished_at`, runID, now).Scan(&status, &started, &finished)
	if err != nil || finished == nil {
		return nil, err
	}
	end := &catalog.RunEnd{Status: status}
	if started != nil {
		end.Duration = finished.Sub(*started)
	}
	return end, nil
}

// FinishEmptyRun ends a run that had no dataset to process.
func (s *RunRepository) FinishEmptyRun(ctx context.Context, runID string) error {
	_, err := s.db.Pool.Exec(ctx, `UPDATE retention_runs SET status = 'succeeded', finished_at = $2
		WHERE id = $1 AND status = 'running' AND datasets_total = 0`, runID, s.db.now())
	return err
}

// FailRun ends a run whose planning failed for good.
func (s *RunRepository) FailRun(ctx context.Context, runID string, cause error) error {
	_, err := s.db.Pool.Exec(ctx, `UPDATE retention_runs SET status = 'failed', error = $3, finished_at = $2
		WHERE id = $1 AND status IN ('pending', 'running')`, runID, s.db.now(), cause.Error())
	return err
}

// PruneHistory deletes runs that finished before cutoff, with their parts, ledger and deletion manifests, and the
// manifests of other removals made before cutoff, so that a manifest is kept as long as the run history
// (RETENTION_HISTORY_KEEP); audit events stay. It is one statement, so that no run leaves without its manifests,
// after one that deletes the pending listings of those runs (their manifests go with them): their detached tables
// stay in detached_partitions, and the next release drops them unlisted. That statement waits for a release
// listing one of them, whose entries the second statement's snapshot then sees and deletes.
func (s *RunRepository) PruneHistory(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM pending_listings p USING retention_runs r
			WHERE r.finished_at < $1 AND p.removal_kind = 'run' AND p.removal_id = r.id::text`, cutoff); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
WITH runs AS (DELETE FROM retention_runs WHERE finished_at < $1 RETURNING id),
run_manifests AS (DELETE FROM deletion_manifests m USING runs
    WHERE m.removal_kind = 'run' AND m.removal_id = runs.id::text),
other_manifests AS (DELETE FROM deletion_manifests WHERE removal_kind <> 'run' AND removed_at < $1)
SELECT count(*) FROM runs`, cutoff).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("prune run history: %w", err)
	}
	return n, nil
}

// Overdue counts the datasets with rows in the store whose last successful run finished before cutoff (or that never
// had one and existed before it). A dataset under a legal hold is not overdue: runs leave it alone on purpose.
func (s *RunRepository) Overdue(ctx context.Context, store catalog.Store, cutoff time.Time) (int, error) {
	var n int
	err := s.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM datasets d JOIN row_expirations re ON re.dataset_id = d.id AND re.store = $1
WHERE d.deleted_at IS NULL AND d.created_at < $2 AND (re.last_completed_at IS NULL OR re.last_completed_at < $2)
  AND NOT EXISTS (SELECT 1 FROM dataset_holds k WHERE k.dataset_id = d.id AND k.released_at IS NULL)
  AND EXISTS (SELECT 1 FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
              WHERE st.dataset_id = d.id AND p.store = $1 AND st.row_count > 0)`, string(store), cutoff).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count overdue datasets of %s: %w", store, err)
	}
	return n, nil
}
