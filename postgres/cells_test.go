package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// A cell is a database of its own (README, "Past one Postgres"): its scheduler's runs cover the datasets stored
// there, which are those of the orgs placed in it, and nothing else. Two cells, one org each, the same slot: each
// cell's run takes its own org's datasets only, and each counts only its own as overdue.
func TestScheduledRunOfACellCoversOnlyItsOrgs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cellA, cellB := setupSweep(t), setupSweep(t)
	cellB.caller = &catalog.Caller{User: "t", ClientID: "t", Org: "OTHER@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	datasets := map[*sweepBundle][]string{}
	for _, cell := range []*sweepBundle{cellA, cellB} {
		for _, name := range []string{"one", "two"} {
			id := cell.newDataset(t, name)
			cell.ingestSeries(t, id, 5, 24*time.Hour) // a run takes only datasets with rows
			datasets[cell] = append(datasets[cell], id)
		}
	}
	slot := cellA.now.Add(time.Hour)
	for _, cell := range []*sweepBundle{cellA, cellB} {
		runs := postgres.NewRunRepository(cell.db)
		overdue, err := runs.Overdue(ctx, catalog.LakeHouse, slot)
		require.NoError(t, err)
		require.Equal(t, 2, overdue, "each cell's overdue gauge counts its own datasets")

		runID, created, err := runs.CreateScheduledRun(ctx, catalog.LakeHouse, slot, retention.Period{})
		require.NoError(t, err)
		require.True(t, created, "the same slot is a run in each cell: their schedules are their own")
		plan, err := runs.PrepareRun(ctx, runID)
		require.NoError(t, err)
		require.ElementsMatch(t, datasets[cell], plan.Pending)
		var orgs []string
		rows, err := cell.db.Pool.Query(ctx, `SELECT DISTINCT org_id FROM retention_run_datasets WHERE run_id = $1`, runID)
		require.NoError(t, err)
		for rows.Next() {
			var org string
			require.NoError(t, rows.Scan(&org))
			orgs = append(orgs, org)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{cell.caller.Org}, orgs)
	}
}
