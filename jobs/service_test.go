package jobs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testlog"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
	"github.com/acme/retention/riverjobs"
)

// testBundle is one database with the services a run needs, and a clock the test moves.
type testBundle struct {
	url      string
	db       *postgres.DB
	datasets *postgres.DatasetService
	rows     *postgres.RowService
	caller   *catalog.Caller
	clock    *testClock
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	url := testdb.New(t)
	b := &testBundle{url: url, clock: &testClock{now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		caller: &catalog.Caller{User: "u@example.com", ClientID: "c", Org: "ORG1@AdobeOrg", Sandbox: "prod", RequestID: "r"}}
	b.db = b.openDB(t)
	b.datasets, b.rows = postgres.NewDatasetService(b.db), postgres.NewRowService(b.db, 100)
	return b
}

// openDB opens another pool on the bundle's database: a replica of its own, sharing the clock.
func (b *testBundle) openDB(t *testing.T) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), b.url, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	db.Now = b.clock.Now
	return db
}

// replica is the retention jobs of one replica: the orchestration and its River queue.
type replica struct {
	*jobs.Service
	queue *riverjobs.Client
}

// Client is the replica's River client, for subscribing to job events.
func (r *replica) Client() *river.Client[pgx.Tx] { return r.queue.River() }

// replica starts the jobs of a replica on a pool of its own, as another retentiond would. wrap, when set, wraps its
// sweeper (to hold or break a run).
func (b *testBundle) replica(t *testing.T, work bool, wrap func(jobs.Sweeper) jobs.Sweeper) *replica {
	t.Helper()
	return b.replicaWith(t, work, wrap, nil)
}

// replicaWith is replica logging to logger.
func (b *testBundle) replicaWith(t *testing.T, work bool, wrap func(jobs.Sweeper) jobs.Sweeper, logger *slog.Logger) *replica {
	t.Helper()
	db := b.openDB(t)
	sweeper, err := postgres.NewSweeper(db, postgres.SweepConfig{BatchSize: 25}, logger)
	require.NoError(t, err)
	var sw jobs.Sweeper = sweeper
	if wrap != nil {
		sw = wrap(sw)
	}
	lake, err := jobs.ParseSchedule(weeklySunday3am)
	require.NoError(t, err)
	svc, queue := testdb.Jobs(t, db, testdb.JobsOptions{Work: work, Sweeper: sw,
		Config: jobs.Config{Schedules: jobs.Schedules{catalog.LakeHouse: lake}, Logger: logger},
		River:  riverjobs.Config{TickInterval: time.Hour}})
	return &replica{Service: svc, queue: queue}
}

// dataset creates a dataset with rows 1 to 24 months old (a row a month), and returns its id.
func (b *testBundle) dataset(t *testing.T, name string, ttl string) string {
	t.Helper()
	ctx := context.Background()
	ds, err := b.datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: name,
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": ttl}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(ctx, b.caller, ds.ID, patch, nil)
	require.NoError(t, err)
	var rows []catalog.RowInput
	for m := 1; m <= 24; m++ {
		ingested := b.clock.Now().AddDate(0, -m, 0)
		rows = append(rows, catalog.RowInput{ID: fmt.Sprintf("m%02d", m), Timestamp: ingested, IngestedAt: &ingested, Payload: []byte(`{}`)})
	}
	_, err = b.rows.IngestRows(ctx, b.caller, ds.ID, func(yield func(catalog.RowInput) bool) {
		for _, r := range rows {
			if !yield(r) {
				return
			}
		}
	}, catalog.IngestOptions{})
	require.NoError(t, err)
	return ds.ID
}

func (b *testBundle) rowCount(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM lake_rows WHERE dataset_id = $1`, id).Scan(&n))
	return n
}

// waitForRun waits until the run ends, woken by River's job events rather than by polling on a timer.
func waitForRun(t *testing.T, b *testBundle, svcs []*replica, runID string) *catalog.Run {
	t.Helper()
	events := make(chan *river.Event, 100)
	for _, svc := range svcs {
		ch, cancel := svc.Client().Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobSnoozed)
		t.Cleanup(cancel)
		go func() {
			for ev := range ch {
				events <- ev
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	scope := &catalog.Caller{Org: b.caller.Org, Sandbox: b.caller.Sandbox}
	for {
		run, err := svcs[0].FindRun(ctx, scope, runID)
		require.NoError(t, err)
		if run.Status == catalog.StatusSucceeded || run.Status == catalog.StatusFailed || run.Status == catalog.StatusPartial {
			return run
		}
		select {
		case <-events:
		case <-ctx.Done():
			t.Fatalf("run %s did not end: %+v", runID, run)
		}
	}
}

// jobEvents returns a channel that receives the end of every job of the kind on the replicas.
func jobEvents(t *testing.T, svcs []*replica, kind string) <-chan *river.Event {
	t.Helper()
	out := make(chan *river.Event, 100)
	for _, svc := range svcs {
		ch, cancel := svc.Client().Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
		t.Cleanup(cancel)
		go func() {
			for ev := range ch {
				if ev.Job.Kind == kind {
					out <- ev
				}
			}
		}()
	}
	return out
}

// waitUntilReleased waits, woken by the release jobs' ends, until no detached partition waits for its release.
func waitUntilReleased(t *testing.T, b *testBundle, releases <-chan *river.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var waiting, tables int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM detached_partitions),
			(SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname LIKE '%\_gone%')`).Scan(&waiting, &tables))
		if waiting == 0 && tables == 0 {
			return
		}
		select {
		case ev := <-releases:
			require.Equal(t, river.EventKindJobCompleted, ev.Kind, "the release job failed: %v", ev.Job.Errors)
		case <-ctx.Done():
			t.Fatalf("%d detached partitions (%d tables) were never released", waiting, tables)
		}
	}
}

func TestScheduledSlotRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, c := b.replica(t, false, nil), b.replica(t, false, nil)
	install := time.Date(2026, 11, 18, 12, 0, 0, 0, time.UTC)
	require.NoError(t, a.Tick(ctx, install))
	require.NoError(t, c.Tick(ctx, install))
	countRuns := func() int {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM retention_runs WHERE trigger = 'schedule'`).Scan(&n))
		return n
	}
	require.Zero(t, countRuns(), "a fresh installation has no missed slot")

	// Both replicas reach the Sunday 03:00 slot, with clocks a few seconds apart.
	var wg sync.WaitGroup
	for i, svc := range []*replica{a, c, a, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, svc.Tick(ctx, time.Date(2026, 11, 22, 3, 0, i*3, 0, time.UTC)))
		}()
	}
	wg.Wait()
	require.Equal(t, 1, countRuns(), "one run for the slot")
	var slot time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT scheduled_for FROM retention_runs`).Scan(&slot))
	require.Equal(t, time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), slot.UTC())

	// The next slot comes while that run is still pending (no replica works here): it waits, no overlap.
	require.NoError(t, a.Tick(ctx, time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)))
	require.Equal(t, 1, countRuns(), "a run never overlaps the previous one")
	_, err := b.db.Pool.Exec(ctx, `UPDATE retention_runs SET status = 'succeeded'`)
	require.NoError(t, err)

	// Three weeks with no replica running: the missed slots are caught up by one run, the latest.
	require.NoError(t, a.Tick(ctx, time.Date(2026, 12, 15, 9, 0, 0, 0, time.UTC)))
	require.NoError(t, c.Tick(ctx, time.Date(2026, 12, 15, 9, 0, 1, 0, time.UTC)))
	require.Equal(t, 2, countRuns())
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT max(scheduled_for) FROM retention_runs`).Scan(&slot))
	require.Equal(t, time.Date(2026, 12, 13, 3, 0, 0, 0, time.UTC), slot.UTC())
}

func TestRunDeletesExpiredRowsAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := []string{b.dataset(t, "a", "P3M"), b.dataset(t, "b", "P6M"), b.dataset(t, "c", "P12M")}
	workers := []*replica{b.replica(t, true, nil), b.replica(t, true, nil)}
	b.clock.Set(b.clock.Now().Add(time.Hour))
	releases := jobEvents(t, workers, "retention_release")
	run, err := workers[0].StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	require.Equal(t, catalog.TriggerManual, run.Trigger)
	run = waitForRun(t, b, workers, run.ID)
	var dropped int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT partition_name) FROM retention_deletions
		WHERE run_id = $1 AND dropped`, run.ID).Scan(&dropped))
	require.Positive(t, dropped, "the run dropped whole partitions")
	waitUntilReleased(t, b, releases)
	require.Equal(t, catalog.StatusSucceeded, run.Status)
	// Rows 1 to 24 months old, and 30 days of grace that every row has passed: 3M keeps 2 rows, 6M 5, 12M 11.
	for i, keep := range []int{2, 5, 11} {
		require.Equal(t, keep, b.rowCount(t, ids[i]), "dataset %d", i)
	}
	require.Equal(t, 3, run.DatasetsDone)
	require.EqualValues(t, 22+19+13, run.RowsDeleted)
	for i, ds := range run.Datasets {
		require.Equal(t, catalog.StatusSucceeded, ds.Status, "dataset %d", i)
	}

	var events int
	var counted int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
		SELECT count(*), sum((details->>'rowsDeleted')::bigint) FROM audit_events WHERE action = 'Expire' AND details->>'runId' = $1`,
		run.ID).Scan(&events, &counted))
	require.Equal(t, 3, events, "one Expire event per dataset")
	require.EqualValues(t, 22+19+13, counted, "audit counts equal the rows removed")
	chain, err := postgres.NewAuditService(b.db).Verify(context.Background(), b.caller.Org)
	require.NoError(t, err)
	require.True(t, chain.Valid, "the Expire events, appended together, extend the org's chain: %+v", chain.FirstBroken)
	ds, err := b.datasets.FindDatasetByID(context.Background(), b.caller, ids[0])
	require.NoError(t, err)
	require.NotNil(t, ds.RowExpiration[catalog.LakeHouse].LastCompleted)
}

func TestDryRunCountsWithoutDeleting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.dataset(t, "a", "P6M")
	w := b.replica(t, true, nil)
	run, err := w.StartRun(context.Background(), b.caller, catalog.RunRequest{DryRun: true})
	require.NoError(t, err)
	run = waitForRun(t, b, []*replica{w}, run.ID)
	require.Equal(t, catalog.StatusSucceeded, run.Status)
	require.EqualValues(t, 19, run.RowsDeleted, "rows a real run would delete")
	preview, err := postgres.NewPreviewService(b.db, retention.Period{Days: 30}).Preview(context.Background(), b.caller, id, catalog.LakeHouse, nil, true)
	require.NoError(t, err)
	require.Equal(t, run.RowsDeleted, preview.RowsToDelete, "the preview counts what a dry run counts")
	require.Equal(t, 24, b.rowCount(t, id))
	var events int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE action = 'Expire'`).Scan(&events))
	require.Zero(t, events, "dry runs write no audit events")

	real, err := w.StartRun(context.Background(), b.caller, catalog.RunRequest{DatasetIDs: []string{id}})
	require.NoError(t, err)
	real = waitForRun(t, b, []*replica{w}, real.ID)
	require.Equal(t, run.RowsDeleted, real.RowsDeleted, "a dry run counts exactly what a run deletes")
}

func TestManualRunConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.dataset(t, "a", "P6M")
	queueOnly := b.replica(t, false, nil)
	first, err := queueOnly.StartRun(context.Background(), b.caller, catalog.RunRequest{DatasetIDs: []string{id}})
	require.NoError(t, err)
	_, err = queueOnly.StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.Equal(t, catalog.ECONFLICT, catalog.ErrorCode(err))
	require.Contains(t, err.Error(), first.ID)
	other := *b.caller
	other.Org = "ORG2@AdobeOrg"
	_, err = queueOnly.StartRun(context.Background(), &other, catalog.RunRequest{DatasetIDs: []string{id}})
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "another org's dataset is not found")
}

// blockingSweep holds the run's own part until released, so the test can act while a run is in progress.
type blockingSweep struct {
	jobs.Sweeper
	once     sync.Once
	reached  chan struct{}
	released chan struct{}
}

func (s *blockingSweep) RunPart(ctx context.Context, plan *catalog.Plan) (catalog.RunPart, error) {
	s.once.Do(func() {
		close(s.reached)
		<-s.released
	})
	return s.Sweeper.RunPart(ctx, plan)
}

func TestIngestionAndReadsProceedDuringARun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.dataset(t, "a", "P4M")
	// A month on, December's partition holds an expired row and live ones: the run walks it, and blocks there.
	b.clock.Set(b.clock.Now().AddDate(0, 1, 1))
	block := &blockingSweep{reached: make(chan struct{}), released: make(chan struct{})}
	w := b.replica(t, true, func(sw jobs.Sweeper) jobs.Sweeper { block.Sweeper = sw; return block })
	run, err := w.StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	<-block.reached
	ctx := context.Background()
	now := b.clock.Now()
	_, err = b.rows.IngestRows(ctx, b.caller, id, func(yield func(catalog.RowInput) bool) {
		yield(catalog.RowInput{ID: "during", Timestamp: now, Payload: []byte(`{}`)})
	}, catalog.IngestOptions{})
	require.NoError(t, err, "ingestion completes while the run is in progress")
	page, err := b.rows.FindRows(ctx, b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 100})
	require.NoError(t, err, "reads complete while the run is in progress")
	require.Len(t, page.Rows, 3)
	_, err = b.datasets.FindDatasetByID(ctx, b.caller, id)
	require.NoError(t, err)
	close(block.released)
	run = waitForRun(t, b, []*replica{w}, run.ID)
	require.Equal(t, catalog.StatusSucceeded, run.Status)
	require.Equal(t, 3, b.rowCount(t, id), "the row stored during the run is kept")
}

func TestProfileRunHasNoGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, err := b.datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: "p", Tags: map[string][]string{"unifiedProfile": {"enabled:true"}},
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"adobe_unifiedProfile": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P1D"}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(ctx, b.caller, ds.ID, patch, nil)
	require.NoError(t, err)
	old := b.clock.Now().AddDate(0, 0, -3)
	_, err = b.rows.IngestRows(ctx, b.caller, ds.ID, func(yield func(catalog.RowInput) bool) {
		yield(catalog.RowInput{ID: "just-ingested", Timestamp: old, Payload: []byte(`{}`)}) // ingested now
	}, catalog.IngestOptions{})
	require.NoError(t, err)
	w := b.replica(t, true, nil)
	lake, err := w.StartRun(ctx, b.caller, catalog.RunRequest{Store: catalog.LakeHouse})
	require.NoError(t, err)
	require.Equal(t, catalog.StatusSucceeded, waitForRun(t, b, []*replica{w}, lake.ID).Status)
	profile, err := w.StartRun(ctx, b.caller, catalog.RunRequest{Store: catalog.Profile})
	require.NoError(t, err)
	profile = waitForRun(t, b, []*replica{w}, profile.ID)
	require.EqualValues(t, 1, profile.RowsDeleted, "the profile store deletes at once: no ingestion grace")
	var lakeRows, profileRows int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM lake_rows), (SELECT count(*) FROM profile_rows)`).Scan(&lakeRows, &profileRows))
	require.Equal(t, 1, lakeRows, "the lake keeps the row: it was ingested less than 30 days ago and is not expired under P12M")
	require.Zero(t, profileRows)
}

func TestOverdueAndHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := postgres.NewRunRepository(b.db)
	id := b.dataset(t, "a", "P6M")
	n, err := store.Overdue(ctx, catalog.LakeHouse, b.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n, "a dataset with rows and no successful run since the cutoff is overdue")
	w := b.replica(t, true, nil)
	run, err := w.StartRun(ctx, b.caller, catalog.RunRequest{DatasetIDs: []string{id}})
	require.NoError(t, err)
	waitForRun(t, b, []*replica{w}, run.ID)
	n, err = store.Overdue(ctx, catalog.LakeHouse, b.clock.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "a successful run clears it")

	pruned, err := store.PruneHistory(ctx, b.clock.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Zero(t, pruned, "a run finished after the cutoff is kept")
	pruned, err = store.PruneHistory(ctx, b.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, pruned)
	var audit int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE action = 'Expire'`).Scan(&audit))
	require.Equal(t, 1, audit, "pruning run history keeps the audit events")
}

// panickySweep panics in the run's first part, as a bug in a job would. (A panic in one of the sweep's own worker
// goroutines becomes the job's error too: postgres' TestSweepWorkerPanicIsAnError.)
type panickySweep struct {
	jobs.Sweeper
	once sync.Once
}

func (s *panickySweep) RunPart(ctx context.Context, plan *catalog.Plan) (catalog.RunPart, error) {
	s.once.Do(func() { panic("bug in a batch") })
	return s.Sweeper.RunPart(ctx, plan)
}

func TestPanicInAJobIsRecoveredAndRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.dataset(t, "a", "P2M")
	w := b.replica(t, true, func(sw jobs.Sweeper) jobs.Sweeper { return &panickySweep{Sweeper: sw} })
	failed, cancel := w.Client().Subscribe(river.EventKindJobFailed)
	t.Cleanup(cancel)
	// A month on, shorten the TTL: December's partition holds a row placed under P2M that P30D has expired, so the
	// run walks it, where the panic is.
	b.clock.Set(b.clock.Now().AddDate(0, 1, 1))
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P30D"}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(context.Background(), b.caller, id, patch, nil)
	require.NoError(t, err)
	run, err := w.StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	ev := <-failed
	require.Contains(t, fmt.Sprint(ev.Job.Errors), "bug in a batch", "the panic is recorded on the job")
	run = waitForRun(t, b, []*replica{w}, run.ID)
	require.Equal(t, catalog.StatusSucceeded, run.Status, "the retry finishes the run")
	require.Zero(t, b.rowCount(t, id), "every row is at least a month old, past P30D")
}

func TestRunMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dataset(t, "a", "P6M")
	reg := prometheus.NewRegistry()
	db := b.openDB(t)
	svc, queue := testdb.Jobs(t, db, testdb.JobsOptions{Work: true, Metrics: jobs.NewMetrics(reg, func() float64 { return 7 })})
	run, err := svc.StartRun(context.Background(), b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	require.Equal(t, catalog.StatusSucceeded, waitForRun(t, b, []*replica{{Service: svc, queue: queue}}, run.ID).Status)

	got := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			got[f.GetName()] += v
		}
	}
	require.EqualValues(t, 19, got["retention_rows_deleted_total"])
	require.Positive(t, got["retention_partitions_dropped_total"])
	require.EqualValues(t, 1, got["retention_runs_total"])
	require.EqualValues(t, 1, got["retention_run_duration_seconds"], "one run observed")
	require.EqualValues(t, 1, got["retention_run_datasets_total"])
	require.Positive(t, got["retention_last_success_timestamp_seconds"])
	require.EqualValues(t, 7, got["retention_datasets_overdue"])
}

// TestStartupReleaseDropsOnlyOldLeftovers checks the release a replica queues when it starts: it drops a table a
// crash left detached an hour ago, and leaves one detached a minute ago to the run that may still be walking.
func TestStartupReleaseDropsOnlyOldLeftovers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	for name, at := range map[string]time.Time{"lake_rows_p200001_gone1": now.Add(-time.Hour), "lake_rows_p200002_gone2": now.Add(-time.Minute)} {
		_, err := b.db.Pool.Exec(ctx, `CREATE TABLE `+name+` (LIKE lake_rows)`)
		require.NoError(t, err)
		_, err = b.db.Pool.Exec(ctx, `INSERT INTO detached_partitions (name, detached_at) VALUES ($1, $2)`, name, at)
		require.NoError(t, err)
	}
	svc := b.replica(t, true, nil)
	releases := jobEvents(t, []*replica{svc}, "retention_release")
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var done int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'retention_release'
			AND state = 'completed'`).Scan(&done))
		if done > 0 {
			break
		}
		select {
		case ev := <-releases:
			require.Equal(t, river.EventKindJobCompleted, ev.Kind, "the release job failed: %v", ev.Job.Errors)
		case <-wait.Done():
			t.Fatal("no release job completed after the replica started")
		}
	}
	var listed []string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT array_agg(name ORDER BY name) FROM detached_partitions`).Scan(&listed))
	require.Equal(t, []string{"lake_rows_p200002_gone2"}, listed, "only the old leftover is dropped")
	var tables []string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT array_agg(relname::text ORDER BY relname) FROM pg_class
		WHERE relkind = 'r' AND relname LIKE 'lake\_rows\_p20000%'`).Scan(&tables))
	require.Equal(t, []string{"lake_rows_p200002_gone2"}, tables)
}

// datasetLines returns the "dataset done" log lines of the run in log, keyed by dataset id; a dataset logged twice
// fails.
func datasetLines(t *testing.T, log *testlog.Buffer, runID string) map[string]map[string]any {
	t.Helper()
	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(log.Bytes()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "log line %q", sc.Text())
		if line["msg"] != "retention: dataset done" || line["run_id"] != runID {
			continue
		}
		ds, _ := line["dataset_id"].(string)
		require.NotContains(t, lines, ds, "one line per dataset: %s", sc.Text())
		lines[ds] = line
	}
	require.NoError(t, sc.Err())
	return lines
}

// The README promises one log line per dataset and store at info: every dataset of a run gets one, whether its own
// job finished it or the run job did once its drops and walk left it nothing, and so does each one a dry run
// counted.
func TestRunLogsEachDataset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := []string{b.dataset(t, "a", "P3M"), b.dataset(t, "b", "P6M"), b.dataset(t, "c", "P12M")}
	want := map[string]float64{ids[0]: 22, ids[1]: 19, ids[2]: 13}
	log := &testlog.Buffer{}
	w := b.replicaWith(t, true, nil, slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})))
	b.clock.Set(b.clock.Now().Add(time.Hour))

	for _, dryRun := range []bool{true, false} {
		run, err := w.StartRun(context.Background(), b.caller, catalog.RunRequest{DryRun: dryRun})
		require.NoError(t, err)
		run = waitForRun(t, b, []*replica{w}, run.ID)
		require.Equal(t, catalog.StatusSucceeded, run.Status)
		lines := datasetLines(t, log, run.ID)
		require.Len(t, lines, len(ids), "dry run %v: one line per dataset", dryRun)
		for id, rows := range want {
			line := lines[id]
			require.NotNil(t, line, "dry run %v: no line for dataset %s", dryRun, id)
			require.Equal(t, "INFO", line["level"])
			require.Equal(t, "adobe_lakeHouse", line["store"])
			require.Equal(t, "succeeded", line["status"])
			require.Contains(t, line, "duration")
			if dryRun {
				require.Equal(t, true, line["dry_run"])
				require.Equal(t, rows, line["rows_would_delete"], "dataset %s", id)
				require.NotContains(t, line, "rows_deleted")
			} else {
				require.Equal(t, rows, line["rows_deleted"], "dataset %s", id)
				require.NotContains(t, line, "dry_run")
			}
		}
	}
}

// A record dataset's run deletes the records whose last write is older than its TTL: a re-sent _id restarted its
// clock, so the run keeps it however old its first write, and the dry run, the preview and the Expire event count
// the same rows.
func TestRunExpiresRecordsByLastWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ds, err := b.datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: "members",
		Classification: catalog.Classification{DataBehavior: catalog.Record, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P3M"}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(ctx, b.caller, ds.ID, patch, nil)
	require.NoError(t, err)
	write := func(ids []string, at time.Time) {
		t.Helper()
		_, err := b.rows.IngestRows(ctx, b.caller, ds.ID, func(yield func(catalog.RowInput) bool) {
			for _, id := range ids {
				if !yield(catalog.RowInput{ID: id, ClientID: true, IngestedAt: &at, Payload: []byte(`{}`)}) {
					return
				}
			}
		}, catalog.IngestOptions{AllowIngestedAt: true})
		require.NoError(t, err)
	}
	// m01 to m24 were first written 1 to 24 months ago; m20 to m24 again yesterday.
	for m := 1; m <= 24; m++ {
		write([]string{fmt.Sprintf("m%02d", m)}, b.clock.Now().AddDate(0, -m, 0))
	}
	write([]string{"m20", "m21", "m22", "m23", "m24"}, b.clock.Now().AddDate(0, 0, -1))
	b.clock.Set(b.clock.Now().Add(time.Hour))
	w := b.replica(t, true, nil)

	dry, err := w.StartRun(ctx, b.caller, catalog.RunRequest{DryRun: true})
	require.NoError(t, err)
	dry = waitForRun(t, b, []*replica{w}, dry.ID)
	// Written 3 months ago or earlier, and not since: m03 to m19.
	require.EqualValues(t, 17, dry.RowsDeleted)
	preview, err := postgres.NewPreviewService(b.db, retention.Period{Days: 30}).Preview(ctx, b.caller, ds.ID, catalog.LakeHouse, nil, true)
	require.NoError(t, err)
	require.Equal(t, dry.RowsDeleted, preview.RowsToDelete, "the preview counts what a dry run counts")

	run, err := w.StartRun(ctx, b.caller, catalog.RunRequest{})
	require.NoError(t, err)
	run = waitForRun(t, b, []*replica{w}, run.ID)
	require.Equal(t, catalog.StatusSucceeded, run.Status)
	require.EqualValues(t, 17, run.RowsDeleted)
	var left []string
	rows, err := b.db.Pool.Query(ctx, `SELECT row_id FROM lake_rows WHERE dataset_id = $1 ORDER BY row_id`, ds.ID)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"m01", "m02", "m20", "m21", "m22", "m23", "m24"}, left)
	var counted int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (details->>'rowsDeleted')::bigint FROM audit_events
		WHERE action = 'Expire' AND asset_id = $1 AND details->>'runId' = $2`, ds.ID, run.ID).Scan(&counted))
	require.EqualValues(t, 17, counted, "the Expire event counts the records removed")
}
