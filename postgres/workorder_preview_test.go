package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
)

// TestWorkOrderPreviewCountsWhatTheOrderRemoves: Alice's rows in a dataset with both stores, a record dataset
// (two versions of her record) and a held dataset, beside Bob's. The preview of an order for her e-mail against ALL
// counts, per dataset and store, exactly what the order then removes, names the hold that keeps a dataset's rows,
// and lists no dataset without her rows; it creates no order and counts no quota.
func TestWorkOrderPreviewCountsWhatTheOrderRemoves(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	profile, err := b.datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: "events", Tags: map[string][]string{"unifiedProfile": {"enabled:true"}},
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	events, records, held, bobs := profile.ID, b.newDatasetOf(t, "records", catalog.Record), b.newDataset(t, "held"), b.newDataset(t, "bobs")
	ts := "2024-12-30T10:00:00Z"
	b.ingestLines(t, events, identityLine(ts, "e1", "alice@example.com", true, ""), identityLine(ts, "e2", "bob@example.com", true, ""),
		identityLine(ts, "e3", "Alice@example.com", true, "111"))
	b.ingestLines(t, records, identityLine("", "r1", "alice@example.com", true, ""))
	b.ingestLines(t, records, identityLine("", "r1", "alice@example.com", true, ""), identityLine("", "r2", "bob@example.com", true, ""))
	b.ingestLines(t, held, identityLine(ts, "h1", "alice@example.com", true, ""))
	b.ingestLines(t, bobs, identityLine(ts, "b1", "bob@example.com", true, ""))
	hold := b.placeHold(t, held)
	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{})
	alice := catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: catalog.AllDatasets,
		Identities: []catalog.Identity{{Namespace: "email", Value: "alice@example.com"}}}
	quotasBefore, err := svc.IdentityQuotas(ctx, b.caller)
	require.NoError(t, err)

	p, err := svc.PreviewWorkOrder(ctx, b.caller, alice)
	require.NoError(t, err)
	require.Equal(t, 4, p.DatasetCount)
	require.Equal(t, 1, p.IdentityCount)
	preview := map[string]catalog.WorkOrderPreviewDataset{}
	for _, d := range p.Datasets {
		preview[d.DatasetID] = d
	}
	require.NotContains(t, preview, bobs, "a dataset without her rows is not listed")
	require.Len(t, preview, 3)
	require.Contains(t, preview[held].HeldBy, hold, "the hold that keeps the rows is named")
	require.Empty(t, preview[events].HeldBy)
	quotasAfter, err := svc.IdentityQuotas(ctx, b.caller)
	require.NoError(t, err)
	require.Equal(t, quotasBefore, quotasAfter, "a preview counts no quota")
	page, err := svc.FindWorkOrders(ctx, b.caller, catalog.WorkOrderFilter{Limit: 10})
	require.NoError(t, err)
	require.Zero(t, page.Total, "a preview creates no order")

	id := b.createWorkOrder(t, catalog.AllDatasets, alice.Identities...)
	orders := jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, testHashKey), nil)
	require.NoError(t, orders.Execute(ctx, id))
	_, err = b.datasets.ReleaseHold(ctx, b.caller, held, hold)
	require.NoError(t, err)
	require.NoError(t, orders.Execute(ctx, id))
	w, err := svc.FindWorkOrder(ctx, b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderCompleted, w.Status)
	require.Equal(t, p.RowCount, w.RowsDeleted, "the preview counted what the order removed")
	for _, part := range w.Parts {
		want := preview[part.DatasetID].Stores
		if want == nil {
			want = map[catalog.Store]int64{catalog.LakeHouse: 0, catalog.Profile: 0}
		}
		require.Equal(t, want, part.Stores, "dataset %s (%s)", part.DatasetName, part.DatasetID)
	}
	require.Equal(t, map[catalog.Store]int64{catalog.LakeHouse: 2, catalog.Profile: 2}, preview[events].Stores)
}

// TestWorkOrderPreviewOfOneDataset lists the dataset even without rows of the identities, refuses a dataset of
// another sandbox as a missing one, and refuses a count past its budget naming the field and the rule: here the
// count waits for a lock another session holds, and the statement timeout ends it.
func TestWorkOrderPreviewOfOneDataset(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "bobs")
	b.ingestLines(t, ds, identityLine("2024-12-30T10:00:00Z", "b1", "bob@example.com", true, ""))
	alice := catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: ds,
		Identities: []catalog.Identity{{Namespace: "email", Value: "alice@example.com"}}}
	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{PreviewBudget: 200 * time.Millisecond})

	t.Run("ListsTheDatasetWithoutRows", func(t *testing.T) {
		p, err := svc.PreviewWorkOrder(ctx, b.caller, alice)
		require.NoError(t, err)
		require.Len(t, p.Datasets, 1)
		require.Equal(t, ds, p.Datasets[0].DatasetID)
		require.Zero(t, p.RowCount)
	})
	t.Run("AnotherSandboxIsMissing", func(t *testing.T) {
		other := *b.caller
		other.Sandbox = "dev"
		_, err := svc.PreviewWorkOrder(ctx, &other, alice)
		require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "%v", err)
	})
	t.Run("PastTheBudget", func(t *testing.T) {
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `LOCK TABLE lake_rows IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)
		_, err = svc.PreviewWorkOrder(ctx, b.caller, alice)
		var e *catalog.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, "preview-over-budget", e.Type)
		require.Equal(t, "namespacesIdentities", e.Field)
	})
}
