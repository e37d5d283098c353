package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// runScope keeps a caller to the runs it may see: every scheduled run, which covers every org and sandbox (so an org
// with nothing to delete still sees that this week's run ran, with an empty part), the manual runs started in its
// org and sandbox (@org, @sandbox), and runs with a part there. The parts are an uncorrelated subquery, which a
// store distributed by dataset can run where it cannot run one correlated on the run's id (docs/scaling.md); parts
// narrows the parts it reads (SQL on rd), so that a lookup of one run reads that run's parts only.
func runScope(parts string) string {
	return `(r.trigger = 'schedule' OR (r.org_id = @org AND r.sandbox_name = @sandbox)
    OR r.id IN (SELECT rd.run_id FROM retention_run_datasets rd WHERE rd.org_id = @org AND rd.sandbox_name = @sandbox AND ` + parts + `))`
}

const runColumns = `r.id, r.store, r.trigger, r.scheduled_for, COALESCE(r.org_id, ''), COALESCE(r.sandbox_name, ''),
       r.dataset_ids, r.dry_run, r.status, r.evaluated_at, r.created_at, r.started_at, r.finished_at, COALESCE(r.error, '')`

func scanRun(row pgx.Row) (*catalog.Run, error) {
	var run catalog.Run
	var store string
	err := row.Scan(&run.ID, &store, &run.Trigger, &run.ScheduledFor, &run.Org, &run.Sandbox, &run.DatasetIDs, &run.DryRun,
		&run.Status, &run.EvaluatedAt, &run.CreatedAt, &run.StartedAt, &run.FinishedAt, &run.Error)
	run.Store = catalog.Store(store)
	return &run, err
}

// FindRun implements jobs.RunRepository.
func (s *RunRepository) FindRun(ctx context.Context, c *catalog.Caller, id string) (_ *catalog.Run, err error) {
	defer outage(&err)
	if !isUUID(id) {
		return nil, catalog.Invalid("invalid-run-id", "runId", "run id %q must be a UUID", id)
	}
	run, err := scanRun(s.db.Pool.QueryRow(ctx, `SELECT `+runColumns+` FROM retention_runs r WHERE `+runScope("rd.run_id = @id")+` AND r.id = @id`,
		pgx.StrictNamedArgs{"org": c.Org, "sandbox": c.Sandbox, "id": id}))
	if err != nil {
		return nil, translate(err, "run "+id+" was not found")
	}
	if err := s.attachParts(ctx, c, []*catalog.Run{run}); err != nil {
		return nil, err
	}
	return run, nil
}

// FindRuns implements jobs.RunRepository.
func (s *RunRepository) FindRuns(ctx context.Context, c *catalog.Caller, f catalog.RunFilter) (_ []*catalog.Run, err error) {
	defer outage(&err)
	rows, err := s.db.Pool.Query(ctx, `SELECT `+runColumns+` FROM retention_runs r WHERE `+runScope("true")+`
		ORDER BY r.created_at DESC, r.id LIMIT @limit OFFSET @offset`,
		pgx.StrictNamedArgs{"org": c.Org, "sandbox": c.Sandbox, "limit": f.Limit, "offset": f.Offset})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	if err := s.attachParts(ctx, c, runs); err != nil {
		return nil, err
	}
	return runs, nil
}

// attachParts loads the caller's parts of the runs, with what the ledger says each removed, and the totals.
func (s *RunRepository) attachParts(ctx context.Context, c *catalog.Caller, runs []*catalog.Run) error {
	if len(runs) == 0 {
		return nil
	}
	byID := map[string]*catalog.Run{}
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
		ids = append(ids, r.ID)
	}
	rows, err := s.db.Pool.Query(ctx, `
SELECT rd.run_id, rd.dataset_id, rd.status, rd.ttl_value, rd.rows_counted, COALESCE(rd.error, ''), rd.started_at, rd.finished_at,
       COALESCE(x.rows, 0), COALESCE(x.dropped, 0)
FROM retention_run_datasets rd
LEFT JOIN LATERAL (SELECT sum(rows_deleted)::bigint AS rows, count(*) FILTER (WHERE dropped)::int AS dropped
                   FROM retention_deletions d WHERE d.run_id = rd.run_id AND d.dataset_id = rd.dataset_id) x ON true
WHERE rd.run_id = ANY($3::uuid[]) AND rd.org_id = $1 AND rd.sandbox_name = $2
ORDER BY rd.run_id, rd.dataset_id`, c.Org, c.Sandbox, ids)
	if err != nil {
		return fmt.Errorf("read run parts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var runID string
		var p catalog.RunDataset
		var counted *int64
		if err := rows.Scan(&runID, &p.DatasetID, &p.Status, &p.TTLValue, &counted, &p.Error, &p.StartedAt, &p.FinishedAt,
			&p.RowsDeleted, &p.PartitionsDropped); err != nil {
			return fmt.Errorf("read run parts: %w", err)
		}
		if counted != nil {
			p.RowsDeleted = *counted
		}
		r := byID[runID]
		r.Datasets = append(r.Datasets, p)
		r.DatasetsTotal++
		if p.Status == catalog.StatusSucceeded || p.Status == catalog.StatusFailed || p.Status == catalog.StatusHeld {
			r.DatasetsDone++
		}
		r.RowsDeleted += p.RowsDeleted
	}
	return rows.Err()
}

// isUUID reports whether s is a run id in the canonical 36-character form.
func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}
