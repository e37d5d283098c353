package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// The tests of this file hold requests safe from the partitions a run drops under them (#15, finding 7), and reads
// to the partitions that hold their dataset (finding 2).

// partitionsBundle is a sweep bundle whose dataset has rows in three partitions: January's and February's, which a
// run at b.now drops whole, and June's, which it leaves.
type partitionsBundle struct {
	*sweepBundle
	ds  string
	run string
}

func setupPartitions(t *testing.T) *partitionsBundle {
	t.Helper()
	b := &partitionsBundle{sweepBundle: setupSweep(t), run: "00000000-0000-0000-0000-0000000000f1"}
	b.ds = b.newDataset(t, "raced")
	b.setTTL(t, b.ds, "P1M")
	b.ingestLines(t, b.ds,
		`{"timestamp":"2024-12-20T00:00:00Z","_id":"jan"}`,
		`{"timestamp":"2025-01-01T00:00:00Z","_id":"feb"}`,
		`{"timestamp":"2024-12-31T00:00:00Z","_id":"keep","_ttl":"P6M"}`)
	require.Equal(t, []string{"lake_rows_p202501", "lake_rows_p202502", "lake_rows_p202506"}, b.partitionsOf(t, b.ds))
	b.now = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	b.startRun(t, b.run, retention.Period{})
	return b
}

// ingestLines ingests NDJSON lines and requires every one accepted.
func (b *sweepBundle) ingestLines(t *testing.T, id string, lines ...string) {
	t.Helper()
	res, err := ingest(context.Background(), b.rows, b.caller, id, rawEvents(lines...), catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, len(lines), res.Accepted, "%v", res.Errors)
}

// partitionsOf lists the partitions the counters say hold rows of the dataset.
func (b *sweepBundle) partitionsOf(t *testing.T, id string) []string {
	t.Helper()
	var names []string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(DISTINCT partition_name ORDER BY partition_name), '{}')
		FROM row_stats WHERE dataset_id = $1 AND row_count > 0`, id).Scan(&names))
	return names
}

// drop drops the named partitions as a run's drop phase does, and returns its error: the lock timeout when a
// request holds what the drop needs.
func (b *partitionsBundle) drop(names ...string) error {
	sw := postgres.Sweep{RunID: b.run, Store: catalog.LakeHouse, At: b.now}
	_, err := b.sweeper.Queries().DropPartitions(context.Background(), sw, names, 100*time.Millisecond)
	return err
}

// requireAttached checks which partitions of the lake are still attached.
func (b *sweepBundle) attached(t *testing.T) []string {
	t.Helper()
	var names []string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}')
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'lake_rows'::regclass`).Scan(&names))
	return names
}

// TestDeleteRowWhileARunDropsAPartition: a run drops January's partition after DELETE …/rows/{_id} has read which
// partitions hold the dataset and before it deletes. The delete holds the store's parent, so the drop waits for it
// (and times out), and the delete succeeds. It named each partition, and failed with 42P01 (relation
// "lake_rows_p202501" does not exist), a 500.
func TestDeleteRowWhileARunDropsAPartition(t *testing.T) {
	t.Parallel()
	b := setupPartitions(t)
	var dropErrs []error
	b.db.OnPartitionLookup(func() { dropErrs = append(dropErrs, b.drop("lake_rows_p202501")) })
	require.NoError(t, b.rows.DeleteRow(context.Background(), b.caller, b.ds, "keep"))
	require.Len(t, dropErrs, 1)
	require.ErrorContains(t, dropErrs[0], "lock timeout", "the drop waits for the delete")
	require.NoError(t, b.drop("lake_rows_p202501"), "and goes through after it")
	err := b.rows.DeleteRow(context.Background(), b.caller, b.ds, "nonexistent")
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "%v", err)
	b.requireCountersExact(t)
}

// TestIngestWithIDsWhileARunDropsPartitions: a chunk with client _ids first deletes the stored rows with those
// _ids, in the partitions the counters name, and a run tries to drop one of them each time between the lookup
// and the delete. The chunk must be stored, once. It named each partition: the drop went through, the chunk failed
// with 42P01, its one retry met the next drop, and its rows were lost.
func TestIngestWithIDsWhileARunDropsPartitions(t *testing.T) {
	t.Parallel()
	b := setupPartitions(t)
	toDrop := []string{"lake_rows_p202501", "lake_rows_p202502"}
	var dropErrs []error
	b.db.OnPartitionLookup(func() {
		if len(toDrop) > 0 {
			dropErrs = append(dropErrs, b.drop(toDrop[0]))
			toDrop = toDrop[1:]
		}
	})
	b.ingestLines(t, b.ds, `{"timestamp":"2025-02-28T00:00:00Z","_id":"keep","v":"second"}`)
	var keep int
	var v string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*), max(payload->>'v') FROM lake_rows
		WHERE dataset_id = $1 AND row_id = 'keep'`, b.ds).Scan(&keep, &v))
	require.Equal(t, 1, keep, "the re-sent _id replaced its row")
	require.Equal(t, "second", v)
	require.NotEmpty(t, dropErrs)
	for _, err := range dropErrs {
		require.ErrorContains(t, err, "lock timeout", "the drops wait for the chunk")
	}
	b.requireCountersExact(t)
}

// TestChunkPlacedAgainWhenARunDropsItsPartition: a run drops a chunk's partition, left empty, between the chunk's
// placement and its transaction, twice; the chunk locks its partitions first, finds it gone, and is placed again
// in a new one. It retried once and failed on the second drop.
func TestChunkPlacedAgainWhenARunDropsItsPartition(t *testing.T) {
	t.Parallel()
	b := setupPartitions(t)
	b.ingestLines(t, b.ds, `{"timestamp":"2025-03-01T00:00:00Z","_id":"a"}`) // April's partition
	require.NoError(t, b.rows.DeleteRow(context.Background(), b.caller, b.ds, "a"))
	var calls atomic.Int32
	b.db.OnChunkTx(func(parts []string) {
		require.Equal(t, []string{"lake_rows_p202504"}, parts)
		if calls.Add(1) <= 2 {
			require.NoError(t, b.drop(parts...))
		}
	})
	b.ingestLines(t, b.ds, `{"timestamp":"2025-03-01T12:00:00Z","_id":"b"}`)
	require.EqualValues(t, 3, calls.Load(), "placed three times")
	require.Contains(t, b.partitionsOf(t, b.ds), "lake_rows_p202504")
	rows, err := b.rows.FindRows(context.Background(), b.caller, b.ds, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "keep"}, rowIDsOf(rows.Rows))
	b.requireCountersExact(t)
}

// TestChunkStoredWhenRunsDropItsPartitionEveryTime: a run drops the chunk's partition every time the chunk is
// placed, before its transaction begins (as runs in a loop beside ingestion dropped the past partition, which goes
// whole in every run). The last attempt pins its partitions: it creates the dropped one in its own transaction,
// under the parent's lock, so the chunk is stored. Before, the chunk gave up after five placements and the
// ingestion failed with 42P01 (1 run in 8 of TestRequestsBesideRunsThatDropPartitions).
func TestChunkStoredWhenRunsDropItsPartitionEveryTime(t *testing.T) {
	t.Parallel()
	b := setupPartitions(t)
	var calls atomic.Int32
	b.db.OnChunkTx(func(parts []string) {
		calls.Add(1)
		require.NoError(t, b.drop(parts...))
	})
	_, err := ingest(context.Background(), b.rows, b.caller, b.ds, rawEvents(`{"timestamp":"2025-03-01T12:00:00Z","_id":"b"}`), catalog.IngestOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 5, calls.Load(), "placed five times, the last one pinned")
	require.Contains(t, b.partitionsOf(t, b.ds), "lake_rows_p202504")
	rows, err := b.rows.FindRows(context.Background(), b.caller, b.ds, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10})
	require.NoError(t, err)
	require.Contains(t, rowIDsOf(rows.Rows), "b")
	b.requireCountersExact(t)
}

func rowIDsOf(rows []catalog.Row) []string {
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestPreviewWhileARunDropsAPartition: January's partition holds rows placed under P1M, then the TTL was lengthened
// to P12M after January ended: the partition can be dropped whole, and a preview reads its rows. A run that drops
// it between the preview's counters and its reads must wait for the preview, which counts what the Go rule counts.
// The preview read the partition by name: 42P01 aborted its transaction, and it answered 500.
func TestPreviewWhileARunDropsAPartition(t *testing.T) {
	t.Parallel()
	b := setupPartitions(t)
	ds := b.newDataset(t, "lengthened") // no override rows, so that its previews count from the counters
	b.setTTL(t, ds, "P1M")
	b.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ingestLines(t, ds, `{"timestamp":"2024-12-20T00:00:00Z","_id":"jan"}`, `{"timestamp":"2024-12-31T00:00:00Z","_id":"jan2"}`)
	b.now = time.Date(2025, 2, 15, 0, 0, 0, 0, time.UTC)
	b.setTTL(t, ds, "P12M")
	b.now = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	var dropErr error
	b.db.OnPreviewCounters(func() { dropErr = b.drop("lake_rows_p202501") })
	before, history := b.allRows(t), b.history(t)
	b.requirePreviewsExact(t, []string{ds}, before, history, retention.Period{})
	require.ErrorContains(t, dropErr, "lock timeout", "the drop waits for the preview")
	require.Contains(t, b.attached(t), "lake_rows_p202501")
}

// TestReadsAndDeletesPlanOnlyTheirDatasetsPartitions: a page read of a dataset and a delete of its rows by _id are
// planned over the partitions holding its rows, not over every partition of the store. With 5,000 partitions
// another tenant made, planning a read over all of them took 12.5 s.
func TestReadsAndDeletesPlanOnlyTheirDatasetsPartitions(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	small, big := b.newDataset(t, "small"), b.newDataset(t, "big")
	b.setTTL(t, small, "P1M")
	b.ingestLines(t, small, `{"timestamp":"2024-12-20T00:00:00Z","_id":"a"}`, `{"timestamp":"2024-12-31T00:00:00Z","_id":"b","_ttl":"P90D"}`)
	b.ingestSeries(t, big, 400, 24*time.Hour) // P6M: expiries over 13 months, 7 of them in partitions of their own
	want := b.partitionsOf(t, small)
	require.Equal(t, []string{"lake_rows_p202501", "lake_rows_p202503"}, want)
	require.Greater(t, len(b.attached(t)), len(want)+4)
	read, deleteByID, err := b.rows.PlannedPartitions(context.Background(), small)
	require.NoError(t, err)
	require.Equal(t, want, read, "a read plans the dataset's partitions only")
	require.Equal(t, want, deleteByID, "a delete by _id plans the dataset's partitions only")
}

// TestRunDropsPartitionsLeftEmpty: the partitions a deleted dataset's rows filled, months ahead, and one whose rows
// were all deleted go with the next run's drops; a partition shared with a live dataset stays. Only partitions
// whose range had ended could be dropped: 4,507 stayed attached and empty after the attack of #15.
func TestRunDropsPartitionsLeftEmpty(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	live, gone := b.newDataset(t, "live"), b.newDataset(t, "gone")
	b.setTTL(t, live, "P1M")
	b.setTTL(t, gone, "P12M")
	b.ingestLines(t, live, `{"timestamp":"2024-12-20T00:00:00Z","_id":"a"}`, `{"timestamp":"2024-12-31T00:00:00Z","_id":"emptied","_ttl":"P90D"}`)
	b.ingestLines(t, gone, `{"timestamp":"2024-01-10T00:00:00Z"}`, `{"timestamp":"2024-06-05T00:00:00Z"}`, `{"timestamp":"2024-12-20T00:00:00Z"}`)
	require.NoError(t, b.rows.DeleteRow(context.Background(), b.caller, live, "emptied"))
	require.Equal(t, []string{"lake_rows_p202501", "lake_rows_p202503", "lake_rows_p202506", "lake_rows_p202512"}, b.attached(t))
	require.NoError(t, b.datasets.DeleteDataset(context.Background(), b.caller, gone))

	b.startRun(t, "00000000-0000-0000-0000-0000000000f2", retention.Period{})
	res, err := b.sweeper.DropPartitions(context.Background(), postgres.Sweep{RunID: "00000000-0000-0000-0000-0000000000f2",
		Store: catalog.LakeHouse, At: b.now})
	require.NoError(t, err)
	require.Equal(t, postgres.SweepResult{Rows: 2, Partitions: 2}, res.Datasets[gone], "the deleted dataset's rows ahead went with their partitions")
	require.Len(t, res.Dropped, 3, "June's and December's, and March's, left empty")
	require.Equal(t, []string{"lake_rows_p202501"}, b.attached(t), "January's partition holds a live row")
	b.requireCountersExact(t)
}

// TestDatasetMetricsMeasureOnlyItsPartitions: GET /dataSets/{id} measures the sizes of the partitions holding the
// dataset, not of every partition: over 5,000 partitions of another tenant that took 6.9 s.
func TestDatasetMetricsMeasureOnlyItsPartitions(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	small, big := b.newDataset(t, "small"), b.newDataset(t, "big")
	b.setTTL(t, small, "P1M")
	b.ingestLines(t, small, `{"timestamp":"2024-12-20T00:00:00Z","_id":"a"}`)
	b.ingestSeries(t, big, 400, 24*time.Hour)
	ds, err := b.datasets.FindDatasetByID(context.Background(), b.caller, small)
	require.NoError(t, err)
	require.EqualValues(t, 1, ds.Metrics.RowCount)
	require.Positive(t, ds.Metrics.StorageSize)
	require.Equal(t, []string{"lake_rows_p202501"}, b.db.MeasuredPartitions())
}

// TestRequestsBesideRunsThatDropPartitions runs ingestion with client _ids, deletes by _id, reads and previews of
// one dataset in loops beside runs that drop partitions under them (the past partition, where the dataset's rows
// expired on arrival go, is dropped and made again all along): no request may fail, and the rows and counters
// must be exact at the end.
func TestRequestsBesideRunsThatDropPartitions(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "busy")
	b.setTTL(t, ds, "P1M")
	previews := postgres.NewPreviewService(b.db, retention.Period{})
	done := make(chan struct{})
	var runs, drops atomic.Int32
	var wg sync.WaitGroup
	loop := func(name string, step func(i int) error) {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if err := step(i); err != nil {
					t.Errorf("%s %d: %v", name, i, err)
					return
				}
			}
		})
	}
	loop("run", func(i int) error {
		runID := fmt.Sprintf("00000000-0000-0000-0001-%012d", i)
		b.startRun(t, runID, retention.Period{})
		sw := postgres.Sweep{RunID: runID, Store: catalog.LakeHouse, At: b.now}
		placed, err := b.sweeper.SweepPlaced(ctx, sw)
		if err != nil {
			return err
		}
		drops.Add(int32(len(placed.Dropped.Dropped)))
		sw.Walked = placed.Walked
		if _, err := b.sweeper.SweepDataset(ctx, sw, ds); err != nil {
			return err
		}
		if _, err := b.sweeper.ReleaseDetached(ctx, b.now); err != nil {
			return err
		}
		runs.Add(1)
		return nil
	})
	loop("delete", func(i int) error {
		err := b.rows.DeleteRow(ctx, b.caller, ds, fmt.Sprintf("old%d", i%20))
		if catalog.ErrorCode(err) == catalog.ENOTFOUND {
			return nil
		}
		return err
	})
	loop("read", func(int) error {
		_, err := b.rows.FindRows(ctx, b.caller, ds, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 50})
		return err
	})
	loop("preview", func(int) error {
		_, err := previews.Preview(ctx, b.caller, ds, catalog.LakeHouse, nil, true)
		return err
	})
	// Chunks until the runs have dropped partitions under the requests several times.
	chunks := 0
	for ; chunks < 40 || drops.Load() < 5; chunks++ {
		require.Less(t, chunks, 1000, "the runs dropped %d partitions in %d runs", drops.Load(), runs.Load())
		i := chunks
		lines := make([]string, 0, 30)
		for j := range 10 {
			lines = append(lines, fmt.Sprintf(`{"timestamp":"2024-06-%02dT00:00:00Z","_id":"old%d"}`, 1+j, (i+j)%20),
				fmt.Sprintf(`{"timestamp":"2024-12-%02dT00:00:00Z","_id":"live%d","chunk":%d}`, 10+j, j, i))
		}
		_, err := ingest(ctx, b.rows, b.caller, ds, rawEvents(lines...), catalog.IngestOptions{})
		require.NoError(t, err, "chunk %d", i)
	}
	close(done)
	wg.Wait()
	t.Logf("%d runs dropped %d partitions beside %d chunks", runs.Load(), drops.Load(), chunks)
	live, err := b.rows.FindRows(ctx, b.caller, ds, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 100})
	require.NoError(t, err)
	require.Len(t, live.Rows, 10, "each live _id once")
	for _, r := range live.Rows {
		require.JSONEq(t, fmt.Sprintf(`{"chunk":%d}`, chunks-1), string(r.Payload), "the last chunk's version of %s", r.ID)
	}
	b.requireCountersExact(t)
}

// TestChunkFollowsASettingChangedBeforeItIsWritten: a TTL lengthened between a chunk's placement and its
// transaction governs the chunk's rows, as it governs every row ingested after it. Placed under the old TTL, the
// rows were judged by it, and a run dropped them before their expiry under the new one.
func TestChunkFollowsASettingChangedBeforeItIsWritten(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds := b.newDataset(t, "lengthened")
	b.setTTL(t, ds, "P1M")
	var once sync.Once
	b.db.OnChunkTx(func([]string) {
		once.Do(func() {
			b.now = b.now.Add(time.Hour)
			b.setTTL(t, ds, "P12M")
		})
	})
	b.ingestLines(t, ds, `{"timestamp":"2024-12-20T00:00:00Z","_id":"a"}`)

	var stored, current int64
	ctx := context.Background()
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT setting_id FROM lake_rows WHERE dataset_id = $1 AND row_id = 'a'`, ds).Scan(&stored))
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT id FROM ttl_settings
		WHERE dataset_id = $1 AND store = 'adobe_lakeHouse' AND effective_until IS NULL`, ds).Scan(&current))
	require.Equal(t, current, stored, "the row is stored under the setting in force when it was written")

	b.now = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC) // past 2025-01-20 (P1M), before 2025-12-20 (P12M)
	removed := b.sweep(t, "00000000-0000-0000-0000-0000000000f9", retention.Period{}, true)
	require.Zero(t, removed[ds], "a row whose TTL was lengthened before it was written is not deleted early")
	var left int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM lake_rows WHERE dataset_id = $1`, ds).Scan(&left))
	require.Equal(t, 1, left)
}

// TestDatasetMetricsNeedOneConnection: a dataset's GET measured its partitions on a second connection while its
// transaction held the first, so as many concurrent GETs as the pool has connections waited on the pool for ever
// (seen with 16 readers on the requests' pool of 16). With a pool of one, the GET must answer.
func TestDatasetMetricsNeedOneConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.OpenPool(ctx, testdb.New(t), nil, postgres.PoolOptions{Name: "one", MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	c := &catalog.Caller{User: "t", ClientID: "t", Org: "ONE@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	datasets := postgres.NewDatasetService(db)
	ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: "one",
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	res, err := ingest(ctx, postgres.NewRowService(db, 0), c, ds.ID,
		rawEvents(`{"timestamp":"`+time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)+`"}`), catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted, "%+v", res)

	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := datasets.FindDatasetByID(within, c, ds.ID)
	require.NoError(t, err, "the GET must not wait for a second connection")
	require.EqualValues(t, 1, got.Metrics.RowCount)
	require.Positive(t, got.Metrics.StorageSize)
}

// TestChunkFollowsARowOverridesSwitchMadeBeforeItIsWritten: overrides refused between a chunk's placement and its
// transaction govern the chunk, whose lines were read while they were allowed: the lines with an override are
// refused by their line numbers, the others stored, and no row is stored with an expiry of its own.
func TestChunkFollowsARowOverridesSwitchMadeBeforeItIsWritten(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds := b.newDataset(t, "switched")
	var once sync.Once
	b.db.OnChunkTx(func([]string) {
		once.Do(func() {
			patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{
				"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"rowOverrides": "refused"}}}})
			require.NoError(t, err)
			_, err = b.datasets.PatchDataset(context.Background(), b.caller, ds, patch, nil)
			require.NoError(t, err)
		})
	})
	res, err := ingest(context.Background(), b.rows, b.caller, ds, rawEvents(
		`{"timestamp":"2024-12-20T00:00:00Z","_id":"plain"}`,
		`{"timestamp":"2024-12-20T00:00:00Z","_id":"ttl","_ttl":"P90D"}`,
		`{"timestamp":"2024-12-20T00:00:00Z","_id":"never","_ttl":-1}`,
		`{"timestamp":"2024-12-20T00:00:00Z","_id":"at","_expiresAt":"2025-06-01T00:00:00Z"}`,
	), catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted, "%+v", res)
	require.Equal(t, 3, res.Rejected)
	var lines []int
	for _, e := range res.Errors {
		require.Contains(t, e.Reason, `rowOverrides is "refused"`)
		lines = append(lines, e.Line)
	}
	require.Equal(t, []int{2, 3, 4}, lines)
	var stored, overridden int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE own_expiry IS NOT NULL OR never_expires)
		FROM lake_rows WHERE dataset_id = $1`, ds).Scan(&stored, &overridden))
	require.Equal(t, 1, stored)
	require.Zero(t, overridden)
	b.requireCountersExact(t)
}
