package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
)

// blockedPart tells whether a session of this test's database holds an order's row lock (a part's transaction,
// which removes a dataset's rows) and waits for the org's audit chain.
const blockedPart = `
SELECT EXISTS (
  SELECT 1 FROM pg_stat_activity a
  JOIN pg_locks l ON l.pid = a.pid AND l.relation = 'workorders'::regclass AND l.granted
  WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'
    AND a.query LIKE '%FROM audit_chains%FOR UPDATE%')`

// TestKilledReplicaWorkOrderCompletesOnce kills a retentiond with SIGKILL in the middle of a work order: validated
// and submitted committed, its first dataset's removal under way but held at the org's audit chain, which the test
// locks. A replica started after removes each dataset's rows once: one Delete event per dataset, the rows of the
// person gone, the other person's left.
func TestKilledReplicaWorkOrderCompletesOnce(t *testing.T) {
	t.Parallel()
	bin := buildRetentiond(t)
	f := newExpirationFixture(t, "WOKILL@AdobeOrg")
	ctx := context.Background()
	var datasets []string
	rows := postgres.NewRowService(f.db, 100)
	for _, name := range []string{"visits", "orders"} {
		ds, err := postgres.NewDatasetService(f.db).CreateDataset(ctx, f.caller, catalog.DatasetCreate{Name: name,
			Classification: catalog.Classification{DataBehavior: catalog.Record, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		_, err = rows.IngestRows(ctx, f.caller, ds.ID, func(yield func(catalog.RowInput) bool) {
			_ = yield(catalog.RowInput{ID: "alice", Payload: []byte(`{}`), Identities: []string{"email:alice@example.com"}}) &&
				yield(catalog.RowInput{ID: "bob", Payload: []byte(`{}`), Identities: []string{"email:bob@example.com"}})
		}, catalog.IngestOptions{})
		require.NoError(t, err)
		datasets = append(datasets, ds.ID)
	}
	w, err := postgres.NewWorkOrderService(f.db, postgres.WorkOrderLimits{}).CreateWorkOrder(ctx, f.caller, catalog.WorkOrderCreate{
		DisplayName: "erase alice", DatasetID: catalog.AllDatasets, Identities: []catalog.Identity{{Namespace: "email", Value: "alice@example.com"}}})
	require.NoError(t, err)
	status := func() string {
		var s string
		require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT status FROM workorders WHERE id = $1`, w.ID).Scan(&s))
		return s
	}

	chain, err := f.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = chain.Rollback(ctx) }()
	_, err = chain.Exec(ctx, `SELECT 1 FROM audit_chains WHERE org_id = $1 FOR UPDATE`, f.caller.Org)
	require.NoError(t, err)

	env := append(expirationEnv(f.url), "RETENTION_WORKORDER_INTERVAL=1s")
	first, _ := startReplica(t, bin, env)
	testwait.For(t, 60*time.Second, func() (bool, string) {
		var blocked bool
		require.NoError(t, f.db.Pool.QueryRow(ctx, blockedPart).Scan(&blocked))
		return blocked, "no part of the order is blocked on the audit chain"
	})
	require.Equal(t, "submitted", status(), "validated and submitted committed")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.NoError(t, chain.Rollback(ctx))
	var left int
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM lake_rows WHERE row_id = 'alice'`).Scan(&left))
	require.Equal(t, 2, left, "the killed replica's removal never committed")

	startReplica(t, bin, env)
	testwait.For(t, 150*time.Second, func() (bool, string) {
		s := status()
		return s == "completed", "the order is " + s
	})
	for _, ds := range datasets {
		var deletes int
		require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = 'Delete'
			AND details->>'workorderId' = $2 AND details->>'rowsDeleted' = '1'`, ds, w.ID).Scan(&deletes))
		require.Equal(t, 1, deletes, "dataset %s: one Delete event of one row", ds)
		var ids []string
		require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT array_agg(row_id) FROM lake_rows WHERE dataset_id = $1`, ds).Scan(&ids))
		require.Equal(t, []string{"bob"}, ids)
	}
	report, err := postgres.NewAuditService(f.db).Verify(ctx, f.caller.Org)
	require.NoError(t, err)
	require.True(t, report.Valid, "audit chain: %+v", report)
}
