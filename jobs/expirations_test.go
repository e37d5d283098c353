package jobs_test

import (
	"context"
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

// expirationReplica is a replica whose River runs dataset expirations, and its orchestration of them.
type expirationReplica struct {
	*replica
	expirations *jobs.Expirations
}

func (b *testBundle) expirationReplica(t *testing.T) *expirationReplica {
	t.Helper()
	db := b.openDB(t)
	exp := jobs.NewExpirations(postgres.NewExpirationRunner(db), nil)
	svc, queue := testdb.Jobs(t, db, testdb.JobsOptions{Work: true,
		River: riverjobs.Config{TickInterval: time.Hour, ExpirationInterval: time.Hour}, Expirations: exp})
	return &expirationReplica{replica: &replica{Service: svc, queue: queue}, expirations: exp}
}

// schedule creates a dataset with rows and its expiration at expiry, and returns both ids.
func (b *testBundle) schedule(t *testing.T, name string, expiry time.Time) (datasetID, expirationID string) {
	t.Helper()
	datasetID = b.dataset(t, name, "P2Y")
	e, err := postgres.NewExpirationService(b.db, 0).CreateExpiration(context.Background(), b.caller,
		catalog.ExpirationCreate{DatasetID: datasetID, Expiry: expiry, DisplayName: "retire " + name})
	require.NoError(t, err)
	return datasetID, e.ID
}

// waitForExpirations waits, woken by the expiration jobs' ends, until each expiration has the status wanted.
func waitForExpirations(t *testing.T, b *testBundle, events <-chan *river.Event, want map[string]catalog.ExpirationStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := postgres.NewExpirationService(b.db, 0)
	for {
		got := map[string]catalog.ExpirationStatus{}
		for id := range want {
			e, err := svc.FindExpiration(ctx, b.caller, id, false)
			require.NoError(t, err)
			got[id] = e.Status
		}
		if len(got) == len(want) && equalStatuses(got, want) {
			return
		}
		select {
		case ev := <-events:
			require.Equal(t, river.EventKindJobCompleted, ev.Kind, "an expiration job failed: %v", ev.Job.Errors)
		case <-ctx.Done():
			t.Fatalf("expirations are %v, want %v", got, want)
		}
	}
}

func equalStatuses(a, b map[string]catalog.ExpirationStatus) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func (b *testBundle) auditCount(t *testing.T, assetID, action string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = $2`, assetID, action).Scan(&n))
	return n
}

// TestDueExpirationsRunOnceAcrossReplicas: two replicas tick at once over three due expirations and one not yet
// due; each due dataset is deleted once (one Delete event naming its expiration, one Execute event), the other
// stays pending with its dataset, and the org's audit chain verifies.
func TestDueExpirationsRunOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := b.clock.Now()
	due := map[string]string{}
	for _, name := range []string{"campaign-a", "campaign-b", "pilot"} {
		ds, id := b.schedule(t, name, start.Add(48*time.Hour))
		due[id] = ds
	}
	laterDS, later := b.schedule(t, "keep-for-now", start.Add(10*24*time.Hour))
	b.clock.Set(start.Add(72 * time.Hour))

	replicas := []*expirationReplica{b.expirationReplica(t), b.expirationReplica(t)}
	events := jobEvents(t, []*replica{replicas[0].replica, replicas[1].replica}, "dataset_expiration")
	for _, r := range replicas {
		require.NoError(t, r.expirations.Tick(ctx, r.queue))
	}
	want := map[string]catalog.ExpirationStatus{later: catalog.ExpirationPending}
	for id := range due {
		want[id] = catalog.ExpirationCompleted
	}
	waitForExpirations(t, b, events, want)

	for id, ds := range due {
		require.Equal(t, 1, b.auditCount(t, ds, "Delete"), "dataset %s deleted once", ds)
		require.Equal(t, 1, b.auditCount(t, id, "Execute"), "expiration %s executed once", id)
		var named string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT details->>'expirationId' FROM audit_events WHERE asset_id = $1 AND action = 'Delete'`, ds).Scan(&named))
		require.Equal(t, id, named)
		_, err := b.datasets.FindDatasetByID(ctx, b.caller, ds)
		require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err))
		e, err := postgres.NewExpirationService(b.db, 0).FindExpiration(ctx, b.caller, id, false)
		require.NoError(t, err)
		require.NotNil(t, e.ExecutingAt)
		require.Equal(t, start.Add(72*time.Hour), *e.CompletedAt)
	}
	ds, err := b.datasets.FindDatasetByID(ctx, b.caller, laterDS)
	require.NoError(t, err)
	require.Equal(t, start.Add(10*24*time.Hour), *ds.PendingExpiry)
	require.Equal(t, 24, b.rowCount(t, laterDS))
	report, err := postgres.NewAuditService(b.db).Verify(ctx, b.caller.Org)
	require.NoError(t, err)
	require.True(t, report.Valid, "audit chain: %+v", report)
}

// TestExpirationLeftExecutingIsFinished: a replica stopped after marking an expiration executing (its first step
// committed, the second never ran) leaves it to the next replica, whose start-up tick finishes it, once.
func TestExpirationLeftExecutingIsFinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "half-done", b.clock.Now().Add(25*time.Hour))
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))
	started, err := postgres.NewExpirationRunner(b.openDB(t)).StartExpiration(ctx, id)
	require.NoError(t, err)
	require.True(t, started)

	r := b.expirationReplica(t)
	events := jobEvents(t, []*replica{r.replica}, "dataset_expiration")
	require.NoError(t, r.expirations.Tick(ctx, r.queue))
	waitForExpirations(t, b, events, map[string]catalog.ExpirationStatus{id: catalog.ExpirationCompleted})
	require.Equal(t, 1, b.auditCount(t, ds, "Delete"))
	require.Equal(t, 1, b.auditCount(t, id, "Execute"))
}

// TestExpirationOfADatasetDeletedFirstEndsCancelled: the dataset was deleted by DELETE /dataSets/{id} before its
// expiry; the expiration ends cancelled with that reason and its own Cancel event, and no second Delete event.
func TestExpirationOfADatasetDeletedFirstEndsCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "deleted-by-hand", b.clock.Now().Add(25*time.Hour))
	require.NoError(t, b.datasets.DeleteDataset(ctx, b.caller, ds))
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))
	exp := jobs.NewExpirations(postgres.NewExpirationRunner(b.db), nil)
	require.NoError(t, exp.Execute(ctx, id))
	require.NoError(t, exp.Execute(ctx, id), "a repeat does nothing")

	e, err := postgres.NewExpirationService(b.db, 0).FindExpiration(ctx, b.caller, id, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationCancelled, e.Status)
	require.Contains(t, e.Reason, "deleted by other means")
	require.Equal(t, 1, b.auditCount(t, id, "Cancel"))
	require.Equal(t, 1, b.auditCount(t, ds, "Delete"))
}

// TestExpirationNotYetDueIsLeftAlone: a job for an expiration whose expiry was moved later (or that was cancelled)
// after it was queued does nothing.
func TestExpirationNotYetDueIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "moved", b.clock.Now().Add(25*time.Hour))
	exp := jobs.NewExpirations(postgres.NewExpirationRunner(b.db), nil)
	require.NoError(t, exp.Execute(ctx, id))
	e, err := postgres.NewExpirationService(b.db, 0).FindExpiration(ctx, b.caller, id, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationPending, e.Status)
	_, err = b.datasets.FindDatasetByID(ctx, b.caller, ds)
	require.NoError(t, err)
}

// TestExpirationOfAHeldDatasetWaitsForTheRelease: a due expiration of a dataset under a legal hold stays pending,
// its reason naming the hold, through any number of attempts, and deletes nothing; after the release the next
// attempt executes it, once, and the reason is gone.
func TestExpirationOfAHeldDatasetWaitsForTheRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "under-hold", b.clock.Now().Add(25*time.Hour))
	ref := "case 2026-207"
	hold, err := b.datasets.PlaceHold(ctx, b.caller, ds, catalog.HoldCreate{Reason: "litigation", Reference: &ref})
	require.NoError(t, err)
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))
	exp := jobs.NewExpirations(postgres.NewExpirationRunner(b.db), nil)
	svc := postgres.NewExpirationService(b.db, 0)
	for range 2 {
		require.NoError(t, exp.Execute(ctx, id))
		e, err := svc.FindExpiration(ctx, b.caller, id, false)
		require.NoError(t, err)
		require.Equal(t, catalog.ExpirationPending, e.Status)
		require.Contains(t, e.Reason, hold.ID, "the reason names the hold")
		require.Nil(t, e.ExecutingAt)
		_, err = b.datasets.FindDatasetByID(ctx, b.caller, ds)
		require.NoError(t, err, "a held dataset is not deleted")
	}
	require.Equal(t, 24, b.rowCount(t, ds))
	require.Zero(t, b.auditCount(t, ds, "Delete"))
	require.Zero(t, b.auditCount(t, id, "Execute"))

	_, err = b.datasets.ReleaseHold(ctx, b.caller, ds, hold.ID)
	require.NoError(t, err)
	require.NoError(t, exp.Execute(ctx, id))
	e, err := svc.FindExpiration(ctx, b.caller, id, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationCompleted, e.Status)
	require.Empty(t, e.Reason)
	require.NotNil(t, e.ExecutingAt)
	require.NotNil(t, e.CompletedAt)
	_, err = b.datasets.FindDatasetByID(ctx, b.caller, ds)
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err))
	require.Equal(t, 1, b.auditCount(t, ds, "Delete"))
	require.Equal(t, 1, b.auditCount(t, id, "Execute"))
}

// TestExpirationHeldBetweenItsStepsWaitsPending: the first step committed (executing), the replica died before the
// second, and a hold was placed meanwhile. The job the next tick queues ends without error, the expiration back to
// pending with its reason naming the hold (cancellable again), and the dataset is kept; the first tick after the
// release queues a job again, which executes it once.
func TestExpirationHeldBetweenItsStepsWaitsPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "held-half-done", b.clock.Now().Add(25*time.Hour))
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))
	started, err := postgres.NewExpirationRunner(b.openDB(t)).StartExpiration(ctx, id)
	require.NoError(t, err)
	require.True(t, started)
	hold, err := b.datasets.PlaceHold(ctx, b.caller, ds, catalog.HoldCreate{Reason: "litigation"})
	require.NoError(t, err)

	r := b.expirationReplica(t)
	events := jobEvents(t, []*replica{r.replica}, "dataset_expiration")
	require.NoError(t, r.expirations.Tick(ctx, r.queue))
	ev := <-events
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "the job ends without error: %v", ev.Job.Errors)
	svc := postgres.NewExpirationService(b.db, 0)
	e, err := svc.FindExpiration(ctx, b.caller, id, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationPending, e.Status)
	require.Contains(t, e.Reason, hold.ID, "the reason names the hold")
	require.Nil(t, e.ExecutingAt)
	require.Zero(t, b.auditCount(t, ds, "Delete"))
	require.Equal(t, 24, b.rowCount(t, ds))

	_, err = b.datasets.ReleaseHold(ctx, b.caller, ds, hold.ID)
	require.NoError(t, err)
	require.NoError(t, r.expirations.Tick(ctx, r.queue))
	waitForExpirations(t, b, events, map[string]catalog.ExpirationStatus{id: catalog.ExpirationCompleted})
	require.Equal(t, 1, b.auditCount(t, ds, "Delete"))
	require.Equal(t, 1, b.auditCount(t, id, "Execute"))
}

// TestHeldExpirationCanBeCancelledAfterACrash: an expiration left executing by a crash, its dataset held since,
// is put back to pending by the next attempt, and the user can then cancel it.
func TestHeldExpirationCanBeCancelledAfterACrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "held-then-cancelled", b.clock.Now().Add(25*time.Hour))
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))
	runner := postgres.NewExpirationRunner(b.db)
	started, err := runner.StartExpiration(ctx, id)
	require.NoError(t, err)
	require.True(t, started)
	_, err = b.datasets.PlaceHold(ctx, b.caller, ds, catalog.HoldCreate{Reason: "audit"})
	require.NoError(t, err)
	require.NoError(t, jobs.NewExpirations(runner, nil).Execute(ctx, id))
	e, err := postgres.NewExpirationService(b.db, 0).CancelExpiration(ctx, b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationCancelled, e.Status)
}

// TestHeldReasonSaysTheCurrentState: a due expiration waiting for a hold names it; moving its expiry, or releasing
// the hold, takes the reason away at once, without waiting for a tick.
func TestHeldReasonSaysTheCurrentState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	svc := postgres.NewExpirationService(b.db, 0)
	exp := jobs.NewExpirations(postgres.NewExpirationRunner(b.db), nil)
	moved, movedID := b.schedule(t, "moved-later", b.clock.Now().Add(25*time.Hour))
	released, releasedID := b.schedule(t, "released", b.clock.Now().Add(25*time.Hour))
	holds := map[string]string{}
	for _, ds := range []string{moved, released} {
		h, err := b.datasets.PlaceHold(ctx, b.caller, ds, catalog.HoldCreate{Reason: "litigation"})
		require.NoError(t, err)
		holds[ds] = h.ID
	}
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))
	for _, id := range []string{movedID, releasedID} {
		require.NoError(t, exp.Execute(ctx, id))
		e, err := svc.FindExpiration(ctx, b.caller, id, false)
		require.NoError(t, err)
		require.Contains(t, e.Reason, "legal hold")
	}

	later := b.clock.Now().Add(30 * 24 * time.Hour)
	e, err := svc.UpdateExpiration(ctx, b.caller, movedID, catalog.ExpirationUpdate{Expiry: &later})
	require.NoError(t, err)
	require.Empty(t, e.Reason, "not due any more")
	e, err = svc.FindExpiration(ctx, b.caller, movedID, false)
	require.NoError(t, err)
	require.Empty(t, e.Reason)

	_, err = b.datasets.ReleaseHold(ctx, b.caller, released, holds[released])
	require.NoError(t, err)
	e, err = svc.FindExpiration(ctx, b.caller, releasedID, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationPending, e.Status)
	require.Empty(t, e.Reason, "nothing holds it: it runs at the next tick")
}

// TestRefusedExpirationJobEndsWithoutBackoff: a step the domain refuses (here a dataset made SYSTEM behind the
// service's back, which cannot be deleted) ends its job cancelled after one attempt, not retryable on a backoff,
// so the next tick queues the expiration again.
func TestRefusedExpirationJobEndsWithoutBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, id := b.schedule(t, "made-system", b.clock.Now().Add(25*time.Hour))
	_, err := b.db.Pool.Exec(ctx, `UPDATE datasets SET managed_by = 'SYSTEM' WHERE id = $1`, ds)
	require.NoError(t, err)
	b.clock.Set(b.clock.Now().Add(26 * time.Hour))

	r := b.expirationReplica(t)
	events, cancel := r.Client().Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(cancel)
	for round := 1; round <= 2; round++ {
		require.NoError(t, r.expirations.Tick(ctx, r.queue))
		ev := <-events
		for ev.Job.Kind != "dataset_expiration" { // the replica's periodic jobs (the work orders' tick) end too
			ev = <-events
		}
		require.Equal(t, river.EventKindJobCancelled, ev.Kind, "round %d: %v", round, ev.Job.Errors)
		require.Equal(t, 1, ev.Job.Attempt)
		var jobsQueued int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'dataset_expiration'`).Scan(&jobsQueued))
		require.Equal(t, round, jobsQueued, "each tick queued a job")
	}
	e, err := postgres.NewExpirationService(b.db, 0).FindExpiration(ctx, b.caller, id, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationExecuting, e.Status)
}
