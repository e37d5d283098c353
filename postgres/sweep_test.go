package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// sweepBundle is a database with the services a sweep test drives, and a clock it moves.
type sweepBundle struct {
	db       *postgres.DB
	datasets *postgres.DatasetService
	rows     *postgres.RowService
	policies *postgres.PolicyService
	sweeper  *postgres.Sweeper
	caller   *catalog.Caller
	now      time.Time
}

func setupSweep(t *testing.T) *sweepBundle {
	t.Helper()
	return setupSweepOn(t, testdb.NewDB(t))
}

// setupSweepOn is setupSweep on a database the caller opened.
func setupSweepOn(t *testing.T, db *postgres.DB) *sweepBundle {
	t.Helper()
	b := &sweepBundle{db: db, datasets: postgres.NewDatasetService(db), rows: postgres.NewRowService(db, 200),
		policies: postgres.NewPolicyService(db), now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		caller: &catalog.Caller{User: "t", ClientID: "t", Org: "ORG@AdobeOrg", Sandbox: "prod", RequestID: "r"}}
	b.sweeper = postgres.MustSweeper(db, postgres.SweepConfig{BatchSize: 37})
	db.Now = func() time.Time { return b.now }
	// Wide limits, so that random TTLs and overrides are all allowed, -1 included.
	for _, store := range catalog.Stores {
		require.NoError(t, b.policies.SetLimits(context.Background(), b.caller.Org,
			catalog.PolicyKey{Store: store, ManagedBy: catalog.Customer},
			catalog.Limits{Min: period(t, "P1D"), Default: period(t, "P6M")}))
		require.NoError(t, b.policies.SetLimits(context.Background(), b.caller.Org,
			catalog.PolicyKey{Store: store, ManagedBy: catalog.Customer, Records: true},
			catalog.Limits{Min: period(t, "P1D")}))
	}
	return b
}

func period(t testing.TB, s string) retention.Period {
	t.Helper()
	p, err := retention.ParsePeriod(s)
	require.NoError(t, err)
	return p
}

// storedRow is a row as the oracle sees it.
type storedRow struct {
	dataset, id string
	row         retention.Row
}

func (b *sweepBundle) allRows(t *testing.T) []storedRow {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT dataset_id, row_id, ts, ingested_at, own_expiry, never_expires FROM lake_rows`)
	require.NoError(t, err)
	defer rows.Close()
	var out []storedRow
	for rows.Next() {
		var r storedRow
		require.NoError(t, rows.Scan(&r.dataset, &r.id, &r.row.Timestamp, &r.row.IngestedAt, &r.row.OwnExpiry, &r.row.Never))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// history reads the lake settings of every dataset back as the oracle's settings.
func (b *sweepBundle) history(t *testing.T) map[string][]retention.Setting {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `
		SELECT dataset_id, ttl IS NULL, date_part('year', ttl)::int, date_part('month', ttl)::int, date_part('day', ttl)::int,
		       effective_from, effective_until
		FROM ttl_settings WHERE store = 'adobe_lakeHouse' ORDER BY effective_from, id`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][]retention.Setting{}
	for rows.Next() {
		var ds string
		var null bool
		var y, m, d *int64
		var s retention.Setting
		require.NoError(t, rows.Scan(&ds, &null, &y, &m, &d, &s.From, &s.Until))
		if !null {
			s.TTL = &retention.Period{Years: *y, Months: *m, Days: *d}
		}
		out[ds] = append(out[ds], s)
	}
	return out
}

func (b *sweepBundle) setTTL(t *testing.T, id string, v any) {
	t.Helper()
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{
		"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"ttlValue": v}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(context.Background(), b.caller, id, patch, nil)
	if err != nil {
		require.Equal(t, catalog.EINVALID, catalog.ErrorCode(err), "only the cross-store rule may refuse: %v", err)
	}
}

// sweep runs a whole sweep at b.now: either the drops beside the boundary pass across datasets, followed by the
// per-dataset pass over later partitions (as the run job does), or the drops and then the per-dataset pass alone.
func (b *sweepBundle) sweep(t *testing.T, runID string, grace retention.Period, boundary bool) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	b.startRun(t, runID, grace)
	sw := postgres.Sweep{RunID: runID, Store: catalog.LakeHouse, At: b.now, Grace: grace}
	removed := map[string]int64{}
	if boundary {
		placed, err := b.sweeper.SweepPlaced(ctx, sw)
		require.NoError(t, err)
		for ds, r := range placed.Dropped.Datasets {
			removed[ds] += r.Rows
		}
		for ds, r := range placed.Swept {
			removed[ds] += r.Rows
		}
		sw.Walked = placed.Walked
	} else {
		dropped, err := b.sweeper.DropPartitions(ctx, sw)
		require.NoError(t, err)
		for ds, r := range dropped.Datasets {
			removed[ds] += r.Rows
		}
	}
	var all []string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT array_agg(id) FROM datasets`).Scan(&all))
	for _, ds := range all {
		r, err := b.sweeper.SweepDataset(ctx, sw, ds)
		require.NoError(t, err)
		removed[ds] += r.Rows
	}
	return removed
}

// requireCountersExact checks that row_stats matches the rows really stored, partition by partition.
func (b *sweepBundle) requireCountersExact(t *testing.T) {
	t.Helper()
	var mismatches int
	err := b.db.Pool.QueryRow(context.Background(), `
		WITH real AS (SELECT tableoid::regclass::text AS part, dataset_id, setting_id, count(*) AS n FROM lake_rows GROUP BY 1, 2, 3),
		     kept AS (SELECT partition_name AS part, dataset_id, setting_id, row_count AS n FROM row_stats s
		              JOIN row_partitions p ON p.name = s.partition_name AND p.store = 'adobe_lakeHouse' WHERE row_count <> 0)
		SELECT count(*) FROM (SELECT * FROM real EXCEPT SELECT * FROM kept UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM real)) x`).Scan(&mismatches)
	require.NoError(t, err)
	require.Zero(t, mismatches)
	requireFiltersCover(t, b.db)
}

// requirePreviewsExact checks that previews, which count from the counters where they can, count exactly what the
// Go rule counts, for the current TTL and for hypothetical ones.
func (b *sweepBundle) requirePreviewsExact(t *testing.T, ids []string, rows []storedRow, history map[string][]retention.Setting, grace retention.Period) {
	t.Helper()
	previews := postgres.NewPreviewService(b.db, grace)
	hypotheticals := []*retention.Period{nil, {Months: 1}, {Months: 5}, {Years: 1}, {Days: 100}, {Years: 3}}
	for _, id := range ids {
		for i, hyp := range hypotheticals {
			got, err := previews.Preview(context.Background(), b.caller, id, catalog.LakeHouse, hyp, i == 0)
			require.NoError(t, err)
			var want, stored int64
			for _, r := range rows {
				if r.dataset != id {
					continue
				}
				stored++
				graceOK := !grace.AddTo(r.row.IngestedAt).After(b.now)
				hypothetical := hyp != nil && !r.row.Never && !r.row.Expiry(*hyp).After(b.now)
				if graceOK && (retention.Expired(r.row, history[id], b.now) || hypothetical) {
					want++
				}
			}
			require.Equal(t, want, got.RowsToDelete, "preview of %s with %v", id, hyp)
			require.Equal(t, stored, got.RowCount, "rows of %s", id)
		}
	}
}

// TestSweepAfterShorteningDeletesExactlyTheExpired covers the per-dataset pass a shortened TTL leaves: rows placed
// under P2Y in partitions after the sweep's time, every six hours over two years, become expired under P6M. The pass
// bounds its index scan by the last event time the history can have expired, so a bound two days too tight shows
// here as rows left late (the rule itself, evaluated on every row read, keeps a loose bound from deleting early).
func TestSweepAfterShorteningDeletesExactlyTheExpired(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds := b.newDataset(t, "shortened")
	b.setTTL(t, ds, "P2Y")
	b.ingestSeries(t, ds, 4*730, 6*time.Hour)
	b.now = b.now.Add(3 * 24 * time.Hour)
	b.setTTL(t, ds, "P6M")
	b.now = b.now.Add(5*24*time.Hour + 7*time.Hour)

	before := b.allRows(t)
	history := b.history(t)[ds]
	var wantKept []string
	var wantRemoved int64
	for _, r := range before {
		if retention.Deletable(r.row, history, b.now, retention.Period{}) {
			wantRemoved++
			continue
		}
		wantKept = append(wantKept, r.id)
	}
	require.Greater(t, wantRemoved, int64(2000), "most rows expire under the shorter TTL")

	removed := b.sweep(t, "00000000-0000-0000-0000-0000000000a1", retention.Period{}, true)
	require.Equal(t, wantRemoved, removed[ds])
	var kept []string
	for _, r := range b.allRows(t) {
		kept = append(kept, r.id)
	}
	require.ElementsMatch(t, wantKept, kept, "the sweep deletes exactly the expired rows")
	b.requireCountersExact(t)
}

// ingestSeries stores n rows without overrides, one every step back from b.now.
func (b *sweepBundle) ingestSeries(t *testing.T, id string, n int, step time.Duration) {
	t.Helper()
	events := func(yield func([]byte) bool) {
		for i := range n {
			ts := b.now.Add(-time.Duration(i)*step - 17*time.Minute)
			if !yield(fmt.Appendf(nil, `{"timestamp":%q,"_id":"r%d"}`, ts.Format(time.RFC3339), i)) {
				return
			}
		}
	}
	res, err := ingest(context.Background(), b.rows, b.caller, id, events, catalog.IngestOptions{})
	require.NoError(t, err)
	require.Zero(t, res.Rejected, "%v", res.Errors)
}

// TestScopedSweepWalksOnlyWhereTheScopeHoldsTheRows checks SweepPlaced's choice between walking a partition and
// leaving it to the per-dataset pass: a sweep scoped to a dataset with a tenth of the current partition's rows
// leaves the partition to that pass, which deletes exactly its expired rows and none of the other dataset's; a sweep
// scoped to the big dataset walks it.
func TestScopedSweepWalksOnlyWhereTheScopeHoldsTheRows(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	b.now = time.Date(2025, 3, 20, 9, 0, 0, 0, time.UTC)
	small, big := b.newDataset(t, "small"), b.newDataset(t, "big")
	b.setTTL(t, small, "P1M")
	b.setTTL(t, big, "P1M")
	b.ingestSeries(t, small, 60, 12*time.Hour)
	b.ingestSeries(t, big, 600, 72*time.Minute)
	b.now = b.now.Add(15 * 24 * time.Hour) // 2025-04-04: the April partition holds expired and live rows of both
	current := "lake_rows_p202504"

	for i, tc := range []struct {
		name       string
		scope      string
		wantWalked bool
	}{{"SmallScopeByIndex", small, false}, {"BigScopeWalks", big, true}} {
		before := b.allRows(t)
		history := b.history(t)
		want := map[string]int{}
		for _, r := range before {
			if r.dataset != tc.scope || !retention.Deletable(r.row, history[r.dataset], b.now, retention.Period{}) {
				want[r.dataset]++
			}
		}
		runID := fmt.Sprintf("00000000-0000-0000-0000-0000000000b%d", i)
		b.startRun(t, runID, retention.Period{})
		sw := postgres.Sweep{RunID: runID, Store: catalog.LakeHouse, At: b.now, Datasets: map[string]bool{tc.scope: true}}
		placed, err := b.sweeper.SweepPlaced(ctx, sw)
		require.NoError(t, err)
		require.Equal(t, tc.wantWalked, placed.Walked[current], "%s: walked %v", tc.name, placed.Walked)
		sw.Walked = placed.Walked
		later, err := b.sweeper.Queries().DatasetsWithLaterWork(ctx, sw, []string{tc.scope})
		require.NoError(t, err)
		for _, ds := range later {
			_, err := b.sweeper.SweepDataset(ctx, sw, ds)
			require.NoError(t, err)
		}
		got := map[string]int{}
		for _, r := range b.allRows(t) {
			got[r.dataset]++
		}
		require.Equal(t, want, got, "%s: rows left per dataset", tc.name)
		require.Less(t, got[tc.scope], len(filterDataset(before, tc.scope)), "%s: the scope lost rows", tc.name)
		b.requireCountersExact(t)
	}
}

// TestRunDeletesImportsExpiredUnderAnEarlierSetting: a row imported with an _ingestedAt from before a shorter TTL
// ended is stored under the longer (or null) TTL now in force, in a partition placed after the run's time, yet the
// shorter TTL expired it. The run must list its dataset for the per-dataset pass and delete it there, while the
// datasets whose later partitions hold no such row stay off that pass: rows ingested after the change, and imports
// the earlier TTL could not have expired (the benchmark loads its rows so). The property test's seed 7 found it.
func TestRunDeletesImportsExpiredUnderAnEarlierSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSweep(t)
	ids := map[string]string{}
	for _, c := range []struct{ name, first, then string }{
		{"Lengthened", "P6M", "P1Y"}, {"Disabled", "P6M", ""}, {"Plain", "P6M", "P1Y"}, {"Backfilled", "P10Y", "P1Y"},
	} {
		b.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		ids[c.name] = b.newDataset(t, c.name)
		b.setTTL(t, ids[c.name], c.first)
		b.now = time.Date(2025, 2, 26, 0, 0, 0, 0, time.UTC)
		var then any
		if c.then != "" {
			then = c.then
		}
		b.setTTL(t, ids[c.name], then)
	}
	b.now = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	imported := `{"timestamp":"2024-05-16T00:00:00Z","_id":"imported","_ingestedAt":"2024-08-11T00:00:00Z"}` // P6M expired it on 2024-11-16
	late := `{"timestamp":"2024-05-20T00:00:00Z","_id":"late"}`                                              // arrived after P6M ended
	for name, lines := range map[string][]string{
		"Lengthened": {imported, late},
		"Disabled":   {imported, late},
		"Plain":      {late},
		"Backfilled": {`{"timestamp":"2024-12-01T00:00:00Z","_id":"backfilled","_ingestedAt":"2024-12-02T00:00:00Z"}`},
	} {
		res, err := ingest(ctx, b.rows, b.caller, ids[name], byteLines(lines), catalog.IngestOptions{AllowIngestedAt: true})
		require.NoError(t, err)
		require.Equal(t, len(lines), res.Accepted, name)
	}

	b.now = time.Date(2025, 4, 27, 0, 0, 0, 0, time.UTC)
	history := b.history(t)
	for _, r := range b.allRows(t) {
		require.Equal(t, r.id == "imported", retention.Deletable(r.row, history[r.dataset], b.now, retention.Period{}), r.id)
	}
	runID := "00000000-0000-0000-0000-0000000000e2"
	sw := postgres.Sweep{RunID: runID, Store: catalog.LakeHouse, At: b.now}
	later, err := b.sweeper.Queries().DatasetsWithLaterWork(ctx, sw, slices.Collect(maps.Values(ids)))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{ids["Lengthened"], ids["Disabled"]}, later, "the datasets holding such imports, and only those")
	removed := b.sweep(t, runID, retention.Period{}, true)
	require.Equal(t, int64(1), removed[ids["Lengthened"]])
	require.Equal(t, int64(1), removed[ids["Disabled"]])
	var left []string
	for _, r := range b.allRows(t) {
		left = append(left, r.id)
	}
	require.ElementsMatch(t, []string{"late", "late", "late", "backfilled"}, left)
	b.requireCountersExact(t)
}

// byteLines yields the lines as an ingestion's events.
func byteLines(lines []string) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for _, l := range lines {
			if !yield([]byte(l)) {
				return
			}
		}
	}
}

func filterDataset(rows []storedRow, id string) []storedRow {
	var out []storedRow
	for _, r := range rows {
		if r.dataset == id {
			out = append(out, r)
		}
	}
	return out
}

// TestResentIDsReplaceRows checks that a chunk re-sending stored _ids replaces their rows: each _id is stored once,
// with the later content, even when its new timestamp places it in another partition, and the counters stay exact.
func TestResentIDsReplaceRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		resent int // of 1,000 stored rows
	}{{"FewIDs", 3}, {"ManyIDs", 400}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSweep(t)
			ctx := context.Background()
			ds := b.newDataset(t, "resent")
			b.setTTL(t, ds, "P1Y")
			b.ingestSeries(t, ds, 1000, time.Hour) // about six weeks: two or three partitions
			events := func(yield func([]byte) bool) {
				for i := range tc.resent {
					ts := b.now.Add(-time.Duration(i*7) * 24 * time.Hour) // moves most rows to another partition
					line := fmt.Appendf(nil, `{"timestamp":%q,"_id":"r%d","v":"second"}`, ts.Format(time.RFC3339), i*2)
					if !yield(line) {
						return
					}
				}
			}
			res, err := ingest(ctx, b.rows, b.caller, ds, events, catalog.IngestOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.resent, res.Accepted)

			var rows, distinct, second int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT row_id),
				count(*) FILTER (WHERE payload->>'v' = 'second') FROM lake_rows WHERE dataset_id = $1`, ds).
				Scan(&rows, &distinct, &second))
			require.Equal(t, 1000, rows, "a re-sent _id replaces its row")
			require.Equal(t, 1000, distinct)
			require.Equal(t, tc.resent, second, "with the later content")
			b.requireCountersExact(t)
		})
	}
}

// newDataset creates a customer-managed time-series dataset and returns its id.
func (b *sweepBundle) newDataset(t *testing.T, name string) string {
	t.Helper()
	return b.newDatasetOf(t, name, catalog.TimeSeries)
}

// newDatasetOf creates a customer-managed dataset of the data behavior and returns its id.
func (b *sweepBundle) newDatasetOf(t *testing.T, name string, behavior catalog.DataBehavior) string {
	t.Helper()
	ds, err := b.datasets.CreateDataset(context.Background(), b.caller, catalog.DatasetCreate{Name: name,
		Classification: catalog.Classification{DataBehavior: behavior, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	return ds.ID
}

// startRun records a running manual run of the lake at b.now, which the ledger rows of a sweep refer to.
func (b *sweepBundle) startRun(t *testing.T, runID string, grace retention.Period) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO retention_runs (id, store, trigger, status, evaluated_at, grace, created_at)
		VALUES ($1, 'adobe_lakeHouse', 'manual', 'running', $2, $3::interval, $2)`, runID, b.now, grace.Interval())
	require.NoError(t, err)
}

// release drops the tables the sweeps detached, as the release job a run queues does, and returns how many.
func (b *sweepBundle) release(t *testing.T) int {
	t.Helper()
	n, err := b.sweeper.ReleaseDetached(context.Background(), b.now)
	require.NoError(t, err)
	return n
}

// TestLateEventAfterItsPartitionWasDropped checks that an event arriving after a run dropped the partition its
// expiry falls in, while the detached table still waits, renamed, for its release, is stored (in the past
// partition, as every row expired on arrival), hidden at once, and removed by the next run with exact counters.
func TestLateEventAfterItsPartitionWasDropped(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds := b.newDataset(t, "late")
	b.setTTL(t, ds, "P1M")
	b.now = time.Date(2024, 10, 31, 0, 0, 0, 0, time.UTC)
	b.ingestSeries(t, ds, 100, 24*time.Hour) // expiries from late August to the end of November 2024
	b.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	removed := b.sweep(t, "00000000-0000-0000-0000-0000000000c1", retention.Period{}, true)
	require.Positive(t, removed[ds])
	var dropped bool
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM retention_deletions
		WHERE partition_name = 'lake_rows_p202411' AND dropped)`).Scan(&dropped))
	require.True(t, dropped, "the November partition was dropped whole")
	var waiting int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM detached_partitions
		WHERE name LIKE 'lake\_rows\_p202411\_gone%'`).Scan(&waiting))
	require.Equal(t, 1, waiting, "the dropped partition's table waits for its release")
	n, err := b.sweeper.ReleaseDetached(context.Background(), b.now.Add(-time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "a release of what was detached before a minute ago leaves it")

	late := func(yield func([]byte) bool) {
		yield([]byte(`{"timestamp":"2024-10-10T00:00:00Z","_id":"late"}`))
	}
	res, err := ingest(context.Background(), b.rows, b.caller, ds, late, catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted)
	require.Equal(t, 1, res.ExpiredOnArrival, "expired on arrival, so hidden at once")
	b.requireCountersExact(t)

	require.Positive(t, b.release(t))
	again := b.sweep(t, "00000000-0000-0000-0000-0000000000c2", retention.Period{}, true)
	require.Equal(t, int64(1), again[ds], "the next run removes it")
	for _, r := range b.allRows(t) {
		require.NotEqual(t, "late", r.id)
	}
	b.requireCountersExact(t)
}

// TestWorkersWalkOnePartitionTogether has four workers walk one partition in one-block ranges, each block holding
// rows of several datasets, so that their transactions update the same counters at once: the rows left, the sweep's
// counts, the ledger and the counters must all be exact. (Their deadlock needs two ranges to lock shared counters in
// opposite orders; DeleteBlocks locks them in key order, and this test could not make the unordered update
// deadlock in 5 runs, so it guards the counts, not the order.)
func TestWorkersWalkOnePartitionTogether(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	b.sweeper = postgres.MustSweeper(b.db, postgres.SweepConfig{BatchSize: 5, Workers: 4})
	b.now = time.Date(2025, 3, 20, 9, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 8 {
		ids = append(ids, b.newDataset(t, fmt.Sprintf("shared%d", i)))
		b.setTTL(t, ids[i], "P1M")
	}
	for round := range 30 {
		for _, id := range ids {
			b.ingestRound(t, id, round, 5, 29*24*time.Hour)
		}
	}
	b.now = time.Date(2025, 4, 8, 0, 0, 0, 0, time.UTC) // April's partition holds expired and live rows of each
	before := b.allRows(t)
	history := b.history(t)
	wantRemoved := map[string]int64{}
	var wantKept []string
	for _, r := range before {
		if retention.Deletable(r.row, history[r.dataset], b.now, retention.Period{}) {
			wantRemoved[r.dataset]++
			continue
		}
		wantKept = append(wantKept, r.dataset+"/"+r.id)
	}
	require.Len(t, wantRemoved, len(ids), "every dataset has expired rows")
	require.NotEmpty(t, wantKept)

	runID := "00000000-0000-0000-0000-0000000000d1"
	removed := b.sweep(t, runID, retention.Period{}, true)
	require.Equal(t, wantRemoved, removed)
	var kept []string
	for _, r := range b.allRows(t) {
		kept = append(kept, r.dataset+"/"+r.id)
	}
	require.ElementsMatch(t, wantKept, kept)
	var walkedRanges int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM retention_deletions
		WHERE run_id = $1 AND partition_name = 'lake_rows_p202504' AND NOT dropped`, runID).Scan(&walkedRanges))
	require.Greater(t, walkedRanges, 4*len(ids), "the walk took April's partition in many ranges")
	b.requireCountersExact(t)
}

// ingestRound stores n rows of the dataset with event times spread evenly over span back from b.now, their _ids
// unique to the round.
func (b *sweepBundle) ingestRound(t *testing.T, id string, round, n int, span time.Duration) {
	t.Helper()
	events := func(yield func([]byte) bool) {
		for i := range n {
			ts := b.now.Add(-span * time.Duration(round*n+i) / time.Duration(30*n))
			if !yield(fmt.Appendf(nil, `{"timestamp":%q,"_id":"w%d-%d"}`, ts.Format(time.RFC3339), round, i)) {
				return
			}
		}
	}
	res, err := ingest(context.Background(), b.rows, b.caller, id, events, catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, n, res.Accepted)
}

// TestWalkJudgesImportedRowsByTheirHistory: a row imported with an ingestion time from before a TTL was lengthened
// is stored under the longer TTL, so its placed expiry is still ahead, yet the shorter TTL expired it. The walk
// judges a row by its placed expiry alone only where no earlier setting can have expired it (soleSettingSQL); this
// one must be judged by its history, and go.
func TestWalkJudgesImportedRowsByTheirHistory(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	b.now = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ds := b.newDataset(t, "lengthened")
	b.setTTL(t, ds, "P1M")
	b.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.setTTL(t, ds, "P12M")
	events := func(yield func([]byte) bool) {
		for _, l := range []string{
			`{"timestamp":"2024-06-20T00:00:00Z","_id":"imported","_ingestedAt":"2024-06-21T00:00:00Z"}`, // P1M expired it
			`{"timestamp":"2024-06-05T00:00:00Z","_id":"due"}`,                                           // placed 2025-06-05
			`{"timestamp":"2024-06-25T00:00:00Z","_id":"young"}`,                                         // placed 2025-06-25; P1M ended before it came
		} {
			if !yield([]byte(l)) {
				return
			}
		}
	}
	res, err := ingest(context.Background(), b.rows, b.caller, ds, events, catalog.IngestOptions{AllowIngestedAt: true})
	require.NoError(t, err)
	require.Equal(t, 3, res.Accepted)

	b.now = time.Date(2025, 6, 15, 0, 0, 0, 0, time.UTC)
	history := b.history(t)[ds]
	for _, r := range b.allRows(t) {
		require.Equal(t, r.id != "young", retention.Deletable(r.row, history, b.now, retention.Period{}), r.id)
	}
	runID := "00000000-0000-0000-0000-0000000000e1"
	removed := b.sweep(t, runID, retention.Period{}, true)
	require.Equal(t, int64(2), removed[ds])
	var left []string
	for _, r := range b.allRows(t) {
		left = append(left, r.id)
	}
	require.Equal(t, []string{"young"}, left)
	var walked int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(rows_deleted), 0)::bigint
		FROM retention_deletions WHERE run_id = $1 AND partition_name = 'lake_rows_p202506' AND NOT dropped`, runID).Scan(&walked))
	require.Equal(t, int64(2), walked, "the walk of June's partition removed both")
	b.requireCountersExact(t)
}

// TestRowPhaseBatchesStartWhereTheLastStopped holds the row phase's index batches to keyset batches: in a partition
// where the dataset holds too few rows to be walked in block ranges, each batch after the first starts after the
// (ts, row_id) of the last row the one before it picked, so no batch reads again the index entries earlier batches
// deleted (dead until VACUUM) or passed over. LIMIT batches that each started from the range's start, as before,
// fail it: they carried no start key.
func TestRowPhaseBatchesStartWhereTheLastStopped(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	ctx := context.Background()
	b.sweeper = postgres.MustSweeper(b.db, postgres.SweepConfig{BatchSize: 5, Workers: 1})
	small, big := b.newDataset(t, "small"), b.newDataset(t, "big")
	for _, id := range []string{small, big} {
		b.setTTL(t, id, "P3M")
	}
	// Both in one partition (placed in February 2025), the small dataset with a tenth of its rows.
	first := time.Date(2024, 11, 1, 0, 0, 0, 0, time.UTC)
	lines := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			ts := first.Add(time.Duration(i) * 25 * time.Minute)
			out = append(out, fmt.Sprintf(`{"timestamp":%q,"_id":"%s%03d"}`, ts.Format(time.RFC3339), prefix, i))
		}
		return out
	}
	b.ingestLines(t, small, lines("s", 23)...)
	b.ingestLines(t, big, lines("b", 230)...)
	_, err := b.db.Pool.Exec(ctx, `ANALYZE lake_rows`)
	require.NoError(t, err)
	b.now = b.now.Add(time.Hour)
	b.setTTL(t, small, "P1M")
	b.now = b.now.Add(time.Hour)

	type key struct {
		ts time.Time
		id string
	}
	var keys []key
	rows, err := b.db.Pool.Query(ctx, `SELECT ts, row_id FROM lake_rows WHERE dataset_id = $1 ORDER BY ts, row_id`, small)
	require.NoError(t, err)
	for rows.Next() {
		var k key
		require.NoError(t, rows.Scan(&k.ts, &k.id))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	require.Len(t, keys, 23)

	b.on(t, "RowPhase", func() { b.sweepDatasetOnce(t, small, "00000000-0000-0000-0000-0000000000e1") })
	var batches []recordedStatement
	for _, st := range b.rec.stmts {
		if st.path == "RowPhase" && strings.Contains(st.sql, "ORDER BY r.ts, r.row_id LIMIT") {
			batches = append(batches, st)
		}
	}
	require.Len(t, batches, 5, "23 deletable rows in batches of 5: four full, one short")
	require.NotContains(t, batches[0].sql, "(r.ts, r.row_id) >", "the first batch starts at the range's start")
	startKey := regexp.MustCompile(`\(r\.ts, r\.row_id\) > \(\$(\d+)::timestamptz, \$(\d+)::text\)`)
	for i, st := range batches[1:] {
		last := keys[5*(i+1)-1]
		m := startKey.FindStringSubmatch(st.sql)
		require.NotNil(t, m, "batch %d starts after a key", i+2)
		ts, id := st.args[atoi(t, m[1])-1], st.args[atoi(t, m[2])-1]
		require.Equal(t, []any{last.ts.UTC(), last.id}, []any{ts.(time.Time).UTC(), id},
			"batch %d starts after the last row batch %d picked", i+2, i+1)
	}
	var left int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM lake_rows WHERE dataset_id = $1`, small).Scan(&left))
	require.Zero(t, left, "every row of the small dataset expired under P1M and went")
	b.requireCountersExact(t)
}

// atoi is a statement's parameter number.
func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
