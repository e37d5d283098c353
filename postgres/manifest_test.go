package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// setManifest sets the lake's deletionManifest of the dataset by a PATCH.
func (b *sweepBundle) setManifest(t *testing.T, id string, on bool) {
	t.Helper()
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{
		"adobe_lakeHouse": map[string]any{"rowExpiration": map[string]any{"deletionManifest": on}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(context.Background(), b.caller, id, patch, nil)
	require.NoError(t, err)
}

// rowIDs returns the _ids of the dataset's stored lake rows.
func (b *sweepBundle) rowIDs(t *testing.T, id string) []string {
	t.Helper()
	var ids []string
	for _, r := range filterDataset(b.allRows(t), id) {
		ids = append(ids, r.id)
	}
	slices.Sort(ids)
	return ids
}

// manifestIDs reads a removal's whole manifest of the dataset through the ManifestService, page by page (pages of
// 7, so that several are read), and returns its counts and its _ids, sorted.
func (b *sweepBundle) manifestIDs(t *testing.T, r catalog.Removal) (*catalog.Manifest, []string) {
	t.Helper()
	ctx := context.Background()
	svc := postgres.NewManifestService(b.db)
	m, err := svc.OpenManifest(ctx, b.caller, r)
	require.NoError(t, err)
	var ids []string
	for after := int64(0); ; {
		page, err := svc.ManifestPage(ctx, m, after, 7)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			require.Equal(t, catalog.LakeHouse, e.Store)
			ids = append(ids, e.ID)
		}
		after = page[len(page)-1].Seq
	}
	slices.Sort(ids)
	return m, ids
}

// manifestEntries is deletion_manifests as a row an entry (alias e), for the checks of what manifests hold.
const manifestEntries = `(SELECT m.removal_kind, m.removal_id, m.dataset_id, m.reason, u.row_id, u.ts, u.expires_at
    FROM deletion_manifests m, unnest(m.row_ids, m.timestamps, m.expiries) AS u (row_id, ts, expires_at)) e`

// minus returns the elements of a not in b (both sorted).
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

// expireCount reads the rowsDeleted of the dataset's Expire event of the run.
func (b *sweepBundle) expireCount(t *testing.T, runID, datasetID string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT (details->>'rowsDeleted')::bigint FROM audit_events
		WHERE action = $1 AND request_id = $2 AND asset_id = $3`, audit.ActionExpire, "run:"+runID, datasetID).Scan(&n))
	return n
}

// runWhole runs a manual run of the datasets as the run and dataset jobs do: the drops and the walk, each dataset's
// part, and the end of the parts with their Expire events. It returns the rows the drops took of each dataset.
func (b *sweepBundle) runWhole(t *testing.T, ids ...string) (string, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	runs := postgres.NewRunRepository(b.db)
	runID, err := runs.CreateManualRun(ctx, b.caller, catalog.RunRequest{Store: catalog.LakeHouse, DatasetIDs: ids}, retention.Period{})
	require.NoError(t, err)
	return runID, b.sweepRun(t, runID)
}

// sweepRun does a created run's work as the run and dataset jobs do, and ends its parts with their Expire events. It
// returns the rows the drops took of each dataset.
func (b *sweepBundle) sweepRun(t *testing.T, runID string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	runs := postgres.NewRunRepository(b.db)
	plan, err := runs.PrepareRun(ctx, runID)
	require.NoError(t, err)
	sw := postgres.Sweep{RunID: runID, Store: plan.Store, At: plan.At, Grace: plan.Grace, Datasets: plan.Scope}
	placed, err := b.sweeper.SweepPlaced(ctx, sw)
	require.NoError(t, err)
	dropped := map[string]int64{}
	for ds, r := range placed.Dropped.Datasets {
		dropped[ds] = r.Rows
	}
	sw.Walked = placed.Walked
	for _, id := range plan.Pending {
		_, err := b.sweeper.SweepDataset(ctx, sw, id)
		require.NoError(t, err)
	}
	_, err = runs.FinishDatasets(ctx, runID, plan.Pending)
	require.NoError(t, err)
	return dropped
}

// A run lists in a dataset's manifest exactly the rows it removed of it, those that left with dropped partitions
// and those deleted row by row, and counts in it what its Expire event counts; a dataset beside it with the manifest
// off is counted and not listed, its rows removed all the same.
func TestManifestListsExactlyTheRowsARunRemoved(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	listed, plain := b.newDataset(t, "listed"), b.newDataset(t, "plain")
	for _, id := range []string{listed, plain} {
		b.setTTL(t, id, "P1M")
		b.ingestSeries(t, id, 200, 6*time.Hour) // 50 days back: December's partition goes whole, January's by rows
	}
	b.setManifest(t, listed, true)
	before := map[string][]string{listed: b.rowIDs(t, listed), plain: b.rowIDs(t, plain)}
	b.now = b.now.Add(10 * 24 * time.Hour)

	runID, dropped := b.runWhole(t, listed, plain)
	require.Positive(t, dropped[listed], "the run dropped a partition of the listed dataset")
	gone := minus(before[listed], b.rowIDs(t, listed))
	require.Greater(t, int64(len(gone)), dropped[listed], "the run also deleted rows of it row by row")

	m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: listed})
	require.Equal(t, gone, ids, "the manifest lists exactly the rows removed")
	require.Equal(t, int64(len(gone)), m.Removed)
	require.Equal(t, m.Removed, m.Listed)
	require.Equal(t, b.expireCount(t, runID, listed), m.Removed, "the manifest counts what the Expire event counts")

	m, ids = b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: plain})
	require.Empty(t, ids, "a dataset with the manifest off lists nothing")
	require.Equal(t, int64(len(minus(before[plain], b.rowIDs(t, plain)))), m.Removed)
	require.Equal(t, b.expireCount(t, runID, plain), m.Removed)
	require.Positive(t, m.Removed)
	require.Zero(t, m.Listed)

	var entries int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+manifestEntries+`
		WHERE e.reason = 'expired' AND e.expires_at <= $1`, b.now).Scan(&entries))
	require.Equal(t, len(gone), entries, "every entry says the row expired, and when, before the run")
}

// A delete by _id lists the rows it removed when the manifest is on, under its Delete event's id, and counts them
// as the event does; with the manifest off it lists nothing. Another org finds neither manifest.
func TestManifestOfADeleteByID(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	listed, plain := b.newDataset(t, "listed"), b.newDataset(t, "plain")
	for _, id := range []string{listed, plain} {
		b.setTTL(t, id, "P1M")
		b.ingestSeries(t, id, 3, time.Hour)
	}
	b.setManifest(t, listed, true)
	for _, id := range []string{listed, plain} {
		require.NoError(t, b.rows.DeleteRow(ctx, b.caller, id, "r1"))
		var eventID string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT id::text FROM audit_events WHERE action = 'Delete' AND asset_id = $1
			AND details->>'rowId' = 'r1'`, id).Scan(&eventID))
		m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRowDelete, ID: eventID, DatasetID: id})
		require.Equal(t, int64(1), m.Removed)
		if id == listed {
			require.Equal(t, []string{"r1"}, ids)
		} else {
			require.Empty(t, ids)
		}
		if id == listed { // turned off again, the switch lists no more deletes
			b.setManifest(t, id, false)
			require.NoError(t, b.rows.DeleteRow(ctx, b.caller, id, "r2"))
			var listedAfter int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM deletion_manifests WHERE 'r2' = ANY(row_ids)`).Scan(&listedAfter))
			require.Zero(t, listedAfter)
		}
		other := *b.caller
		other.Org = "OTHER@AdobeOrg"
		_, err := postgres.NewManifestService(b.db).OpenManifest(ctx, &other, catalog.Removal{Kind: catalog.RemovalRowDelete, ID: eventID, DatasetID: id})
		require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "%v", err)
	}
}

// A dataset with the manifest off costs a run no statement: the sweep of one sends exactly as many statements as
// the same sweep of a dataset with the manifest on, less the drops' statements that record their pending listings,
// and none of them writes a manifest or a pending listing.
func TestManifestOffCostsNoStatement(t *testing.T) {
	t.Parallel()
	count := func(on bool) (total, listing, drops int) {
		b := setupConfinement(t)
		id := b.newDataset(t, "d")
		b.setTTL(t, id, "P1M")
		b.ingestSeries(t, id, 200, 6*time.Hour)
		if on {
			b.setManifest(t, id, true)
		}
		b.now = b.now.Add(10 * 24 * time.Hour)
		b.on(t, "Run", func() { b.runWhole(t, id) })
		for _, st := range b.rec.stmts {
			total++
			if strings.Contains(st.sql, "deletion_manifests") {
				listing++
			}
			if strings.Contains(st.sql, "INSERT INTO pending_listings") {
				drops++
			}
		}
		return total, listing, drops
	}
	offTotal, offListing, offDrops := count(false)
	onTotal, onListing, drops := count(true)
	require.Zero(t, offListing, "no statement of a run over a dataset with the manifest off writes a manifest")
	require.Zero(t, offDrops, "nor a pending listing")
	require.Positive(t, drops, "the run over a dataset with the manifest on recorded a dropped partition's pending listing")
	require.Positive(t, onListing, "and its row batches listed theirs within their own statements")
	require.Equal(t, offTotal+drops, onTotal, "the pending listing of each drop is the only statement the manifest adds")
}

// A record-delete work order lists the rows it removed of a dataset whose store keeps a manifest, in the statement
// that removes them, and nothing of a dataset with the manifest off; the manifest's count is its part's, which its
// Delete event reports.
func TestWorkOrderListsItsRowsInTheManifest(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	listed, plain := b.newDataset(t, "listed"), b.newDataset(t, "plain")
	b.setManifest(t, listed, true)
	ts := "2024-12-30T10:00:00Z"
	for _, ds := range []string{listed, plain} {
		b.ingestLines(t, ds, identityLine(ts, "a1", "alice@example.com", true, ""), identityLine(ts, "a2", "alice@example.com", true, ""),
			identityLine(ts, "b1", "bob@example.com", true, ""))
	}
	id := b.createWorkOrder(t, catalog.AllDatasets, catalog.Identity{Namespace: "email", Value: "alice@example.com"})
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, testHashKey), nil).Execute(ctx, id))

	svc := postgres.NewManifestService(b.db)
	m, err := svc.OpenManifest(ctx, b.caller, catalog.Removal{Kind: catalog.RemovalWorkOrder, ID: id, DatasetID: listed})
	require.NoError(t, err)
	require.Equal(t, int64(2), m.Removed)
	require.Equal(t, int64(2), m.Listed)
	entries, err := svc.ManifestPage(ctx, m, 0, 100)
	require.NoError(t, err)
	var ids []string
	for _, e := range entries {
		require.Equal(t, "work-order", e.Reason)
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	require.Equal(t, []string{"a1", "a2"}, ids)

	m, err = svc.OpenManifest(ctx, b.caller, catalog.Removal{Kind: catalog.RemovalWorkOrder, ID: id, DatasetID: plain})
	require.NoError(t, err)
	require.Equal(t, int64(2), m.Removed, "the rows are counted")
	require.Zero(t, m.Listed, "and not listed: the manifest is off")

	_, err = svc.OpenManifest(ctx, b.caller, catalog.Removal{Kind: catalog.RemovalWorkOrder, ID: "not-an-order", DatasetID: listed})
	require.ErrorContains(t, err, "DI- followed by a UUID")
	other := *b.caller
	other.Org = "OTHER@AdobeOrg"
	_, err = svc.OpenManifest(ctx, &other, catalog.Removal{Kind: catalog.RemovalWorkOrder, ID: id, DatasetID: listed})
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "another org's order is missing")
}

// Manifests are kept as long as the run history: the history cleaner removes a run's manifest with the run, and
// a delete's once it is older than the cutoff, and keeps both until then.
func TestPruneHistoryRemovesManifests(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	id := b.newDataset(t, "listed")
	b.setTTL(t, id, "P1M")
	b.ingestSeries(t, id, 100, 12*time.Hour)
	b.setManifest(t, id, true)
	require.NoError(t, b.rows.DeleteRow(ctx, b.caller, id, "r0"))
	b.now = b.now.Add(10 * 24 * time.Hour)
	b.runWhole(t, id)
	require.Positive(t, b.release(t), "the release listed the dropped partition's rows")
	entries := func() map[string]int {
		n := map[string]int{}
		rows, err := b.db.Pool.Query(ctx, `SELECT removal_kind, sum(entries) FROM deletion_manifests GROUP BY 1`)
		require.NoError(t, err)
		for rows.Next() {
			var kind string
			var c int
			require.NoError(t, rows.Scan(&kind, &c))
			n[kind] = c
		}
		require.NoError(t, rows.Err())
		return n
	}
	kept := entries()
	require.Equal(t, 1, kept["row-delete"])
	require.Positive(t, kept["run"])

	runs := postgres.NewRunRepository(b.db)
	pruned, err := runs.PruneHistory(ctx, b.now.Add(-11*24*time.Hour))
	require.NoError(t, err)
	require.Zero(t, pruned)
	require.Equal(t, kept, entries(), "a cutoff before both keeps both manifests")
	pruned, err = runs.PruneHistory(ctx, b.now.Add(-time.Hour))
	require.NoError(t, err)
	require.Zero(t, pruned, "the run finished after the cutoff")
	require.Equal(t, map[string]int{"run": kept["run"]}, entries(), "the delete, 10 days before, is older than the cutoff")
	pruned, err = runs.PruneHistory(ctx, b.now.Add(time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, pruned)
	require.Empty(t, entries(), "the run's manifest left with it")
}

// The rows of a deleted dataset leave with the next scheduled run, which lists them in its manifest of the dataset
// with the reason, and counts them as its Expire event does.
func TestManifestListsADeletedDatasetsRows(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	id := b.newDataset(t, "deleted")
	b.setTTL(t, id, "P1M")
	b.ingestSeries(t, id, 50, 12*time.Hour)
	b.setManifest(t, id, true)
	stored := b.rowIDs(t, id)
	require.NoError(t, b.datasets.DeleteDataset(ctx, b.caller, id))
	b.now = b.now.Add(time.Hour)
	runID, created, err := postgres.NewRunRepository(b.db).CreateScheduledRun(ctx, catalog.LakeHouse, b.now, retention.Period{})
	require.NoError(t, err)
	require.True(t, created)
	b.sweepRun(t, runID)
	require.Empty(t, b.rowIDs(t, id), "the run removed every row of the deleted dataset")

	m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: id})
	require.Equal(t, stored, ids)
	require.Equal(t, int64(len(stored)), m.Removed)
	require.Equal(t, b.expireCount(t, runID, id), m.Removed)
	var reasons []string
	rows, err := b.db.Pool.Query(ctx, `SELECT DISTINCT e.reason || '/' || (e.expires_at IS NULL)::text FROM `+manifestEntries)
	require.NoError(t, err)
	reasons, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"dataset-deleted/true"}, reasons)
}

// readManifest reads a removal's whole manifest through the ManifestService in pages of size, and returns its
// entries' _ids in the order read; each entry's place is past the one before it.
func (b *sweepBundle) readManifest(t *testing.T, m *catalog.Manifest, size int) []string {
	t.Helper()
	svc := postgres.NewManifestService(b.db)
	var ids []string
	for after := int64(0); ; {
		page, err := svc.ManifestPage(context.Background(), m, after, size)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), size)
		if len(page) == 0 {
			return ids
		}
		for _, e := range page {
			require.Greater(t, e.Seq, after, "each entry is past the one before it")
			require.LessOrEqual(t, e.Seq, m.Through)
			after = e.Seq
			ids = append(ids, e.ID)
		}
	}
}

// A removal writes its entries of a dataset in chunks of up to 1,000, a row of deletion_manifests each, not a row
// an entry; pages of any size read them all once, in one order, across the chunks' boundaries.
func TestManifestChunksHoldUpToAThousandEntries(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	id := b.newDataset(t, "listed")
	b.setTTL(t, id, "P1M")
	b.ingestSeries(t, id, 3600, 20*time.Minute) // 50 days back: December's partition goes whole, January's by rows
	b.setManifest(t, id, true)
	before := b.rowIDs(t, id)
	b.now = b.now.Add(10 * 24 * time.Hour)

	runID, dropped := b.runWhole(t, id)
	require.Greater(t, dropped[id], int64(1000), "the drop took more rows than a chunk holds")
	gone := minus(before, b.rowIDs(t, id))
	require.Positive(t, b.release(t), "the release listed the dropped partition's rows")

	var chunks, fullest, listed int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*), max(entries), sum(entries) FROM deletion_manifests
		WHERE removal_id = $1 AND dataset_id = $2`, runID, id).Scan(&chunks, &fullest, &listed))
	require.Equal(t, int64(len(gone)), listed)
	require.Equal(t, int64(1000), fullest, "the drop's entries fill chunks of 1,000")
	require.Less(t, chunks, listed/10, "a chunk holds many entries: %d chunks for %d entries", chunks, listed)

	m, err := postgres.NewManifestService(b.db).OpenManifest(ctx, b.caller, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: id})
	require.NoError(t, err)
	require.Equal(t, listed, m.Listed)
	inOrder := b.readManifest(t, m, 7)
	require.Equal(t, inOrder, b.readManifest(t, m, 1000), "pages of any size read the same entries in the same order")
	require.Equal(t, inOrder, b.readManifest(t, m, 999), "pages of any size read the same entries in the same order")
	sorted := slices.Sorted(slices.Values(inOrder))
	require.Equal(t, gone, sorted, "every removed row once")
}

// ingestMonths stores, for each of months months from now on, 120 rows of the dataset a few hours old, so that
// under a TTL of a month each month's rows are placed in a partition of their own.
func (b *sweepBundle) ingestMonths(t *testing.T, id string, months int) {
	t.Helper()
	start := b.now
	for k := range months {
		b.now = start.AddDate(0, k, 0)
		b.ingestSeriesAs(t, id, fmt.Sprintf("m%d-", k), 120, 5*time.Minute)
	}
}

// dropTransactions returns, for each transaction of the run that dropped partitions, how many it dropped, how many
// manifest entries it wrote and how many pending listings it recorded, by the transaction id that wrote its rows.
func (b *sweepBundle) dropTransactions(t *testing.T, runID string) (partitions, entries, pending map[string]int64) {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `
SELECT d.x, d.parts, coalesce(m.n, 0)::bigint, coalesce(p.n, 0)::bigint
FROM (SELECT xmin::text AS x, count(DISTINCT partition_name) AS parts FROM retention_deletions
      WHERE run_id::text = $1 AND dropped GROUP BY 1) d
LEFT JOIN (SELECT xmin::text AS x, sum(entries) AS n FROM deletion_manifests
           WHERE removal_kind = 'run' AND removal_id = $1 GROUP BY 1) m ON m.x = d.x
LEFT JOIN (SELECT xmin::text AS x, count(*) AS n FROM pending_listings
           WHERE removal_kind = 'run' AND removal_id = $1 GROUP BY 1) p ON p.x = d.x`, runID)
	require.NoError(t, err)
	partitions, entries, pending = map[string]int64{}, map[string]int64{}, map[string]int64{}
	var x string
	var parts, n, p int64
	_, err = pgx.ForEachRow(rows, []any{&x, &parts, &n, &p}, func() error {
		partitions[x], entries[x], pending[x] = parts, n, p
		return nil
	})
	require.NoError(t, err)
	return partitions, entries, pending
}

// A drop lists nothing in its transaction, which holds the store's parent table: it records there a pending
// listing of each partition it detaches, which the release lists from the detached table. A listing in the drop
// read and wrote every removed row under that lock, and made a run with manifests at 2M rows retry its one drop of
// every partition until it gave up. The manifest still lists exactly the rows removed, once the release ran.
func TestManifestDropsListNothingInTheirTransactions(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "listed")
	b.setTTL(t, id, "P1M")
	b.setManifest(t, id, true)
	b.ingestMonths(t, id, 4)
	before := b.rowIDs(t, id)
	b.now = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

	runID, dropped := b.runWhole(t, id)
	require.EqualValues(t, 480, dropped[id], "the drops took the four months' rows")
	partitions, entries, pending := b.dropTransactions(t, runID)
	require.NotEmpty(t, partitions)
	var detached int64
	for x, parts := range partitions {
		require.Zero(t, entries[x], "a drop transaction wrote manifest entries")
		require.Equal(t, parts, pending[x], "a drop transaction records the pending listing of each partition it detaches")
		detached += parts
	}
	require.EqualValues(t, detached, b.release(t), "the release lists and drops every detached table")
	_, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: id})
	require.Equal(t, minus(before, b.rowIDs(t, id)), ids, "the manifest lists exactly the rows removed")
}

// A drop that runs out of its BatchTimeout is not tried again: a lock wait is bounded by LockTimeout, so its own
// work (the listing of its rows, above all) took the time, and would take it again at every one of its
// DropAttempts. The walk removes and lists its partitions' rows instead, in batches of its own.
func TestDropThatRunsOutOfItsTimeIsLeftToTheWalk(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "listed")
	b.setTTL(t, id, "P1M")
	b.setManifest(t, id, true)
	b.ingestMonths(t, id, 2)
	before := b.rowIDs(t, id)
	b.now = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

	var attempts atomic.Int32
	b.db.OnDropAttempt(func() time.Duration {
		attempts.Add(1)
		return 0 // its time is out before it starts
	})
	runID, dropped := b.runWhole(t, id)
	b.db.OnDropAttempt(nil)
	require.EqualValues(t, 1, attempts.Load(), "the one batch of drops was tried once")
	require.Empty(t, dropped, "no partition was dropped")
	gone := minus(before, b.rowIDs(t, id))
	require.Len(t, gone, 240, "the walk removed the two months' rows")
	_, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: id})
	require.Equal(t, gone, ids, "the manifest lists exactly the rows removed")
}
