package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/riverjobs"
)

// workOrderReplica is a replica whose River runs work orders, and its orchestration of them.
type workOrderReplica struct {
	*replica
	orders *jobs.WorkOrders
}

func (b *testBundle) workOrderReplica(t *testing.T) *workOrderReplica {
	t.Helper()
	db := b.openDB(t)
	orders := jobs.NewWorkOrders(postgres.NewWorkOrderRunner(db, "k"), nil)
	svc, queue := testdb.Jobs(t, db, testdb.JobsOptions{Work: true,
		River: riverjobs.Config{TickInterval: time.Hour, WorkOrderInterval: time.Hour}, WorkOrders: orders})
	return &workOrderReplica{replica: &replica{Service: svc, queue: queue}, orders: orders}
}

// identityDataset creates a dataset whose 24 rows carry the identities email:p<month%3>@example.com.
func (b *testBundle) identityDataset(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	ds, err := b.datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: name,
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	_, err = b.rows.IngestRows(ctx, b.caller, ds.ID, func(yield func(catalog.RowInput) bool) {
		for m := 1; m <= 24; m++ {
			ts := b.clock.Now().AddDate(0, -m, 0)
			key := catalog.IdentityKey("email", []string{"p0", "p1", "p2"}[m%3]+"@example.com")
			if !yield(catalog.RowInput{ID: name + string(rune('a'+m)), Timestamp: ts, IngestedAt: &ts, Payload: []byte(`{}`), Identities: []string{key}}) {
				return
			}
		}
	}, catalog.IngestOptions{})
	require.NoError(t, err)
	return ds.ID
}

// awaitCompleted waits until the order is completed, each job event meanwhile a completion, for up to a minute.
func (b *testBundle) awaitCompleted(t *testing.T, events <-chan *river.Event, id string) {
	t.Helper()
	waitCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{})
	for {
		w, err := svc.FindWorkOrder(context.Background(), b.caller, id)
		require.NoError(t, err)
		if w.Status == catalog.WorkOrderCompleted {
			return
		}
		select {
		case ev := <-events:
			require.Equal(t, river.EventKindJobCompleted, ev.Kind, "a work order job failed: %v", ev.Job.Errors)
		case <-waitCtx.Done():
			t.Fatalf("order %s is %s", id, w.Status)
		}
	}
}

// TestWorkOrdersRunOnceAcrossReplicas: two replicas tick at once over three orders (one per dataset, and one against
// ALL); each order completes, each part's rows are removed once (one Delete event per dataset and order), and the
// rows of the people no order names are left.
func TestWorkOrdersRunOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, c := b.identityDataset(t, "a"), b.identityDataset(t, "c")
	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{})
	create := func(ds string, people ...string) string {
		var ids []catalog.Identity
		for _, p := range people {
			ids = append(ids, catalog.Identity{Namespace: "email", Value: p + "@example.com"})
		}
		w, err := svc.CreateWorkOrder(ctx, b.caller, catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: ds, Identities: ids})
		require.NoError(t, err)
		return w.ID
	}
	orders := []string{create(a, "p0"), create(c, "p1"), create(catalog.AllDatasets, "p0")}

	replicas := []*workOrderReplica{b.workOrderReplica(t), b.workOrderReplica(t)}
	events := jobEvents(t, []*replica{replicas[0].replica, replicas[1].replica}, "workorder")
	for _, r := range replicas {
		require.NoError(t, r.orders.Tick(ctx, r.queue))
	}
	for _, id := range orders {
		b.awaitCompleted(t, events, id)
	}
	require.Equal(t, 16, b.rowCount(t, a), "a loses p0's 8 rows (named by its own order and ALL), keeps p1's and p2's")
	require.Equal(t, 8, b.rowCount(t, c), "c loses p1's (its own order) and p0's (ALL), keeps p2's")
	var deletes int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE action = 'Delete' AND details ? 'workorderId'`).Scan(&deletes))
	require.Equal(t, 4, deletes, "one Delete event per part: a and c for ALL, a and c for their own orders")
	report, err := postgres.NewAuditService(b.db).Verify(ctx, b.caller.Org)
	require.NoError(t, err)
	require.True(t, report.Valid)
}

// failingQueue refuses every job, as a queue whose database call failed.
type failingQueue struct{}

func (failingQueue) EnqueueWorkOrders(context.Context, []string) error {
	return errors.New("queue unavailable")
}

// TestAnOrderStartsWhenItIsCreated: an order created through the API's service (StartingWorkOrders) is queued at once
// and completes with no tick (the replica ticks once an hour); one whose queueing failed is stored all the same, and
// the next tick carries it out.
func TestAnOrderStartsWhenItIsCreated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds := b.identityDataset(t, "started")
	r := b.workOrderReplica(t)
	events := jobEvents(t, []*replica{r.replica}, "workorder")
	create := func(q jobs.WorkOrderQueue, person string) string {
		svc := &jobs.StartingWorkOrders{WorkOrderService: postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{}), Queue: q}
		w, err := svc.CreateWorkOrder(ctx, b.caller, catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: ds,
			Identities: []catalog.Identity{{Namespace: "email", Value: person + "@example.com"}}})
		require.NoError(t, err)
		return w.ID
	}
	b.awaitCompleted(t, events, create(r.queue, "p0"))
	require.Equal(t, 16, b.rowCount(t, ds), "p0's 8 rows gone, with no tick")

	unqueued := create(failingQueue{}, "p1")
	var jobsOf int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'workorder_id' = $1`, unqueued).Scan(&jobsOf))
	require.Zero(t, jobsOf, "its queueing failed")
	require.NoError(t, r.orders.Tick(ctx, r.queue))
	b.awaitCompleted(t, events, unqueued)
	require.Equal(t, 8, b.rowCount(t, ds), "p1's 8 rows gone after the tick")
}
