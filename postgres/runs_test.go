package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// A part that failed records its error and a failed Expire event, and leaves its dataset's lastCompleted alone; the
// parts finished together beside it succeed, with lastCompleted set and a successful Expire event each.
func TestFinishingPartsRecordsHowEachEnded(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	failed, ok1, ok2 := b.newDataset(t, "failed"), b.newDataset(t, "ok1"), b.newDataset(t, "ok2")
	for _, id := range []string{failed, ok1, ok2} {
		b.ingestSeries(t, id, 5, 24*time.Hour) // a run takes only datasets with rows
	}
	runs := postgres.NewRunRepository(b.db)
	runID, err := runs.CreateManualRun(ctx, b.caller, catalog.RunRequest{Store: catalog.LakeHouse,
		DatasetIDs: []string{failed, ok1, ok2}}, retention.Period{})
	require.NoError(t, err)
	_, err = runs.PrepareRun(ctx, runID)
	require.NoError(t, err)
	b.now = b.now.Add(time.Minute)

	_, err = runs.FinishDataset(ctx, runID, failed, catalog.Outcome{Err: errors.New("disk on fire")})
	require.NoError(t, err)
	fin, err := runs.FinishDatasets(ctx, runID, []string{ok1, ok2})
	require.NoError(t, err)
	require.NotNil(t, fin.Run)
	require.Equal(t, catalog.StatusPartial, fin.Run.Status)
	require.Len(t, fin.Parts, 2, "both parts are reported")
	again, err := runs.FinishDatasets(ctx, runID, []string{ok1, ok2})
	require.NoError(t, err)
	require.Empty(t, again.Parts, "parts already finished are not reported again")

	run, err := runs.FindRun(ctx, b.caller, runID)
	require.NoError(t, err)
	status := map[string]string{}
	for _, p := range run.Datasets {
		status[p.DatasetID] = p.Status + "/" + p.Error
	}
	require.Equal(t, map[string]string{failed: "failed/disk on fire", ok1: "succeeded/", ok2: "succeeded/"}, status)

	completed := map[string]bool{}
	rows, err := b.db.Pool.Query(ctx, `SELECT dataset_id, last_completed_at IS NOT NULL FROM row_expirations
		WHERE store = 'adobe_lakeHouse' AND dataset_id = ANY($1)`, []string{failed, ok1, ok2})
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var done bool
		require.NoError(t, rows.Scan(&id, &done))
		completed[id] = done
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]bool{failed: false, ok1: true, ok2: true}, completed)

	expires := map[string]string{}
	rows, err = b.db.Pool.Query(ctx, `SELECT asset_id, status FROM audit_events WHERE action = $1 AND request_id = $2`,
		audit.ActionExpire, "run:"+runID)
	require.NoError(t, err)
	for rows.Next() {
		var id, st string
		require.NoError(t, rows.Scan(&id, &st))
		expires[id] = st
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{failed: audit.StatusFailure, ok1: audit.StatusSuccess, ok2: audit.StatusSuccess}, expires)
}
