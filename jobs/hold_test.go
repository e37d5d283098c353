package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// expireDetails returns the details of the run's Expire event of the dataset.
func (b *testBundle) expireDetails(t *testing.T, runID, datasetID string) (rows int64, status string, held bool) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT (details->>'rowsDeleted')::bigint, details->>'status',
		coalesce((details->>'held')::boolean, false)
		FROM audit_events WHERE action = 'Expire' AND details->>'runId' = $1 AND asset_id = $2`, runID, datasetID).
		Scan(&rows, &status, &held))
	return rows, status, held
}

// TestRunSkipsHeldDataset: under a real run across two replicas, a held dataset's part ends as held with 0 rows
// and an Expire event that says so, while the dataset beside it loses its expired rows; after the release, the next
// run deletes the held dataset's expired rows with their exact count in its Expire event.
func TestRunSkipsHeldDataset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held, free := b.dataset(t, "held", "P3M"), b.dataset(t, "free", "P3M")
	ref := "case 2026-114"
	hold, err := b.datasets.PlaceHold(context.Background(), b.caller, held, catalog.HoldCreate{Reason: "litigation", Reference: &ref})
	require.NoError(t, err)
	workers := []*replica{b.replica(t, true, nil), b.replica(t, true, nil)}
	b.clock.Set(b.clock.Now().Add(time.Hour))

	run, err := workers[0].StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	run = waitForRun(t, b, workers, run.ID)
	require.Equal(t, catalog.StatusSucceeded, run.Status)
	require.Equal(t, 2, run.DatasetsDone)
	for _, part := range run.Datasets {
		if part.DatasetID == held {
			require.Equal(t, catalog.StatusHeld, part.Status)
			require.Zero(t, part.RowsDeleted)
		} else {
			require.Equal(t, catalog.StatusSucceeded, part.Status)
		}
	}
	require.Equal(t, 24, b.rowCount(t, held), "a run deletes none of a held dataset's rows")
	require.Equal(t, 2, b.rowCount(t, free), "3M keeps 2 of the 24 monthly rows")
	rows, status, isHeld := b.expireDetails(t, run.ID, held)
	require.Zero(t, rows)
	require.Equal(t, catalog.StatusHeld, status)
	require.True(t, isHeld)
	ds, err := b.datasets.FindDatasetByID(context.Background(), b.caller, held)
	require.NoError(t, err)
	require.Nil(t, ds.RowExpiration[catalog.LakeHouse].LastCompleted, "a held dataset's retention did not complete")

	_, err = b.datasets.ReleaseHold(context.Background(), b.caller, held, hold.ID)
	require.NoError(t, err)
	b.clock.Set(b.clock.Now().Add(time.Hour))
	next, err := workers[1].StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	next = waitForRun(t, b, workers, next.ID)
	require.Equal(t, catalog.StatusSucceeded, next.Status)
	require.Equal(t, 2, b.rowCount(t, held), "after the release, as if there had been no hold")
	rows, status, isHeld = b.expireDetails(t, next.ID, held)
	require.EqualValues(t, 22, rows, "the exact count of the rows the run deleted")
	require.Equal(t, catalog.StatusSucceeded, status)
	require.False(t, isHeld)
}
