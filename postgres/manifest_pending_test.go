package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// pendingRun is a run over a dataset keeping a deletion manifest that dropped a partition of it (December's, whole)
// and walked another (January's), before any release: the rows it removed (gone, sorted) and those of them that
// left with the dropped partition (dropped).
type pendingRun struct {
	id, runID     string
	gone, dropped []string
}

// runWithPending makes the pendingRun on the bundle.
func (b *sweepBundle) runWithPending(t *testing.T) pendingRun {
	t.Helper()
	id := b.newDataset(t, "listed")
	b.setTTL(t, id, "P1M")
	b.ingestSeries(t, id, 200, 6*time.Hour) // 50 days back: December's partition goes whole, January's by rows
	b.setManifest(t, id, true)
	before := b.rowIDs(t, id)
	b.now = b.now.Add(10 * 24 * time.Hour)
	runID, dropped := b.runWhole(t, id)
	require.Positive(t, dropped[id], "the run dropped a partition of the dataset")
	r := pendingRun{id: id, runID: runID, gone: minus(before, b.rowIDs(t, id))}
	require.Greater(t, int64(len(r.gone)), dropped[id], "the run also deleted rows of it row by row")
	names := b.pendingListings(t, runID)
	require.Len(t, names, 1, "the drop recorded the listing of its detached table")
	rows, err := b.db.Pool.Query(context.Background(), `SELECT row_id FROM `+pgx.Identifier{names[0]}.Sanitize()+
		` WHERE dataset_id = $1 ORDER BY row_id COLLATE "C"`, id)
	require.NoError(t, err)
	r.dropped, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, r.dropped, int(dropped[id]), "the detached table holds the rows the drop counted")
	return r
}

// pendingListings returns the detached tables whose listing for the run waits.
func (b *sweepBundle) pendingListings(t *testing.T, runID string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT name FROM pending_listings
		WHERE removal_kind = 'run' AND removal_id = $1 ORDER BY name`, runID)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// runEntries returns the _ids the run's manifest of the dataset holds, one per entry (a row listed twice comes
// twice), sorted.
func (b *sweepBundle) runEntries(t *testing.T, runID, id string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT e.row_id FROM `+manifestEntries+`
		WHERE e.removal_kind = 'run' AND e.removal_id = $1 AND e.dataset_id = $2 ORDER BY e.row_id COLLATE "C"`, runID, id)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// detachedTables counts the tables drops detached that are still there, in the catalog and in detached_partitions.
func (b *sweepBundle) detachedTables(t *testing.T) (tables, listed int) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname LIKE '%\_gone%'),
		(SELECT count(*) FROM detached_partitions)`).Scan(&tables, &listed))
	return tables, listed
}

// releaseWith is release with another sweeper.
func (b *sweepBundle) releaseWith(t *testing.T, sw *postgres.Sweeper) int {
	t.Helper()
	n, err := sw.ReleaseDetached(context.Background(), b.now)
	require.NoError(t, err)
	return n
}

// A run's drop leaves the listing of its partition's rows to the release: until then the detached table and its
// pending listing hold them and the manifest has none of them, and yet a reader of the manifest gets every row the
// run removed, as many as its Expire event counts. The release writes the entries and drops the table.
func TestDropLeavesItsListingToTheRelease(t *testing.T) {
	t.Parallel()
	t.Run("BeforeTheRelease", func(t *testing.T) {
		t.Parallel()
		b := setupSweep(t)
		r := b.runWithPending(t)
		entries := b.runEntries(t, r.runID, r.id)
		require.Equal(t, minus(r.gone, r.dropped), entries, "the manifest holds only the walk's rows, none of the dropped partition")
		tables, _ := b.detachedTables(t)
		require.Equal(t, 1, tables, "the detached table waits")

		m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: r.runID, DatasetID: r.id})
		require.Equal(t, r.gone, ids, "a reader gets every row the run removed")
		require.Equal(t, b.expireCount(t, r.runID, r.id), m.Removed)
		require.Equal(t, m.Removed, m.Listed, "the count equals the audit event's")
		require.Empty(t, b.pendingListings(t, r.runID), "the reader wrote the listing out")
		require.Equal(t, r.gone, b.runEntries(t, r.runID, r.id), "each row once")

		require.Equal(t, 1, b.release(t))
		require.Equal(t, r.gone, b.runEntries(t, r.runID, r.id), "the release lists nothing twice")
	})
	t.Run("AfterTheRelease", func(t *testing.T) {
		t.Parallel()
		b := setupSweep(t)
		r := b.runWithPending(t)
		require.Equal(t, 1, b.release(t))
		require.Equal(t, r.gone, b.runEntries(t, r.runID, r.id), "the manifest lists exactly the rows removed, each once")
		require.Empty(t, b.pendingListings(t, r.runID))
		tables, listed := b.detachedTables(t)
		require.Zero(t, tables, "the detached table is dropped")
		require.Zero(t, listed)
		m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: r.runID, DatasetID: r.id})
		require.Equal(t, r.gone, ids)
		require.Equal(t, b.expireCount(t, r.runID, r.id), m.Listed)
	})
}

// A release whose listing of a detached table does not end within ListTimeout leaves the table and its pending
// listing as they were, drops nothing unlisted, and returns; the next release lists and drops it.
func TestReleaseThatCannotListInTimeLeavesTheTable(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	r := b.runWithPending(t)
	short := postgres.MustSweeper(b.db, postgres.SweepConfig{BatchSize: 37, ListTimeout: time.Millisecond})
	// The listing outlasts its bound whatever the machine's speed: it waits, holding its lock, until its time is out.
	b.db.OnPendingLock(func(ctx context.Context, _ string) { <-ctx.Done() })
	for range 2 {
		require.Zero(t, b.releaseWith(t, short), "the release dropped nothing")
		require.Len(t, b.pendingListings(t, r.runID), 1, "the pending listing stays")
		tables, listed := b.detachedTables(t)
		require.Equal(t, 1, tables, "the table stays")
		require.Equal(t, 1, listed)
		require.Equal(t, minus(r.gone, r.dropped), b.runEntries(t, r.runID, r.id), "nothing of the table was listed")
	}
	b.db.OnPendingLock(nil)
	// A listing cut short by its bound loses its connection, and Postgres lets go of its row lock when it sees the
	// connection close, which a loaded machine may delay past the next release's SKIP LOCKED: wait for the lock.
	_, err := b.db.Pool.Exec(context.Background(), `SELECT 1 FROM detached_partitions FOR UPDATE`)
	require.NoError(t, err)
	require.Equal(t, 1, b.release(t), "the next release lists and drops it")
	require.Equal(t, r.gone, b.runEntries(t, r.runID, r.id))
	tables, _ := b.detachedTables(t)
	require.Zero(t, tables)
}

// A process that stops between the run and the release loses no listing: a new sweeper on another connection pool
// of the same database lists the rows once, and a second release lists nothing again.
func TestPendingListingOutlivesARestart(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	first, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	b := setupSweepOn(t, first)
	r := b.runWithPending(t)
	first.Close()

	second, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	t.Cleanup(second.Close)
	second.Now = func() time.Time { return b.now }
	b.db = second
	restarted := postgres.MustSweeper(second, postgres.SweepConfig{BatchSize: 37})
	require.Equal(t, 1, b.releaseWith(t, restarted))
	require.Zero(t, b.releaseWith(t, restarted))
	require.Equal(t, r.gone, b.runEntries(t, r.runID, r.id), "each row listed once")
	m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: r.runID, DatasetID: r.id})
	require.Equal(t, r.gone, ids)
	require.Equal(t, b.expireCount(t, r.runID, r.id), m.Listed)
}

// A reader of a run's manifest and the release list a pending listing at once: whichever locks it first lists it,
// the other waits and then finds it listed, so every row is listed once and the table is dropped.
func TestReaderAndReleaseListOnce(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"Reader", "Release"} {
		t.Run(first+"First", func(t *testing.T) {
			t.Parallel()
			b := setupSweep(t)
			r := b.runWithPending(t)
			ctx := context.Background()
			locked, proceed := make(chan struct{}), make(chan struct{})
			unblock := sync.OnceFunc(func() { close(proceed) })
			t.Cleanup(unblock) // a failed wait below leaves no listing blocked
			var once sync.Once
			b.db.OnPendingLock(func(context.Context, string) {
				once.Do(func() {
					close(locked)
					<-proceed
				})
			})
			var m *catalog.Manifest
			var readErr, releaseErr error
			var released int
			read := func() {
				m, readErr = postgres.NewManifestService(b.db).OpenManifest(ctx, b.caller,
					catalog.Removal{Kind: catalog.RemovalRun, ID: r.runID, DatasetID: r.id})
			}
			release := func() { released, releaseErr = b.sweeper.ReleaseDetached(ctx, b.now) }
			order := []func(){read, release}
			if first == "Release" {
				order = []func(){release, read}
			}
			var wg sync.WaitGroup
			wg.Go(order[0])
			<-locked // the first holds the pending listing
			wg.Go(order[1])
			b.waitForLockWaiter(t) // the second waits for it
			unblock()
			wg.Wait()
			b.db.OnPendingLock(nil)
			require.NoError(t, readErr)
			require.NoError(t, releaseErr)
			require.Equal(t, 1, released)
			require.Equal(t, r.gone, b.runEntries(t, r.runID, r.id), "every row listed once")
			require.Equal(t, b.expireCount(t, r.runID, r.id), m.Removed)
			require.Equal(t, m.Removed, m.Listed)
			tables, _ := b.detachedTables(t)
			require.Zero(t, tables)
		})
	}
}

// A drop of a run still going on that commits after a reader of the run's manifest has written out the run's
// pending listings, and before it counts, is listed too: the reader finds the drop's pending listing beside the
// count, which already includes the drop's rows, and lists and counts again, so that it answers as many entries as
// the count. The drop runs in the reader's hook, between the two, whatever the machine's speed.
func TestReaderListsADropThatCommitsBeforeItsCount(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	id := b.newDataset(t, "listed")
	b.setTTL(t, id, "P1M")
	b.ingestSeries(t, id, 200, 6*time.Hour) // 50 days back: December's partition goes whole
	b.setManifest(t, id, true)
	before := b.rowIDs(t, id)
	b.now = b.now.Add(10 * 24 * time.Hour)
	runs := postgres.NewRunRepository(b.db)
	runID, err := runs.CreateManualRun(ctx, b.caller, catalog.RunRequest{Store: catalog.LakeHouse, DatasetIDs: []string{id}}, retention.Period{})
	require.NoError(t, err)
	plan, err := runs.PrepareRun(ctx, runID)
	require.NoError(t, err)
	sw := postgres.Sweep{RunID: runID, Store: plan.Store, At: plan.At, Grace: plan.Grace, Datasets: plan.Scope}

	flushes := 0
	var dropped int64
	b.db.OnManifestFlush(func() {
		flushes++
		if flushes > 1 {
			return
		}
		require.Empty(t, b.pendingListings(t, runID), "nothing was dropped before the reader listed")
		placed, err := b.sweeper.SweepPlaced(ctx, sw)
		require.NoError(t, err)
		dropped = placed.Dropped.Datasets[id].Rows
	})
	m, ids := b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: id})
	b.db.OnManifestFlush(nil)
	require.Positive(t, dropped, "the run dropped a partition of the dataset between the listing and the count")
	gone := minus(before, b.rowIDs(t, id))
	require.EqualValues(t, len(gone), m.Removed, "the count includes the drop's rows")
	require.Equal(t, m.Removed, m.Listed, "the count equals the entries")
	require.Equal(t, gone, ids, "the reader gets every row the run removed, those of the drop too")
	require.Empty(t, b.pendingListings(t, runID), "the reader wrote the drop's listing out")
	require.Equal(t, 2, flushes, "the reader listed again once it found the drop's pending listing")
}

// waitForLockWaiter returns once a session of the bundle's database waits for a lock.
func (b *sweepBundle) waitForLockWaiter(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l
			JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`).Scan(&n))
		return n > 0
	}, time.Minute, 5*time.Millisecond, "no session waits for the pending listing's lock")
}

// The history cleaner prunes a run whose listing still waits: the pending listing goes with the run's manifest,
// and the next release drops the detached table without listing it.
func TestPruneHistoryDropsPendingListings(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	r := b.runWithPending(t)
	pruned, err := postgres.NewRunRepository(b.db).PruneHistory(context.Background(), b.now.Add(time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, pruned)
	require.Empty(t, b.pendingListings(t, r.runID), "no listing of a pruned run waits")
	tables, listed := b.detachedTables(t)
	require.Equal(t, 1, tables, "the detached table stays for the release")
	require.Equal(t, 1, listed)
	require.Equal(t, 1, b.release(t))
	require.Empty(t, b.runEntries(t, r.runID, r.id), "the pruned run has no manifest")
	tables, listed = b.detachedTables(t)
	require.Zero(t, tables)
	require.Zero(t, listed)
}

// A move copies the org's manifests whole: the listings a run's drops left pending, whose detached tables hold the
// org's rows, are written out on the source before the copy, so the target lists every row the run removed.
func TestMoveWritesOutThePendingListingsOfTheOrg(t *testing.T) {
	t.Parallel()
	m := setupMove(t, 100)
	ctx := context.Background()
	src := m.src
	id := src.newDataset(t, "listed")
	src.setTTL(t, id, "P1M")
	src.setManifest(t, id, true)
	src.ingestSeries(t, id, 100, 12*time.Hour)
	before := src.rowIDs(t, id)
	src.now = src.now.Add(90 * 24 * time.Hour)
	runID, created, err := postgres.NewRunRepository(src.db).CreateScheduledRun(ctx, catalog.LakeHouse, src.now, retention.Period{})
	require.NoError(t, err)
	require.True(t, created)
	src.sweepRun(t, runID)
	gone := minus(before, src.rowIDs(t, id))
	require.NotEmpty(t, gone)
	require.NotEmpty(t, src.pendingListings(t, runID), "a drop left its listing to the release")

	m.dst.now = src.now
	move := &postgres.OrgMove{Org: src.caller.Org, Source: src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router}
	_, err = move.Run(ctx)
	require.NoError(t, err)
	require.Empty(t, src.pendingListings(t, runID), "the source wrote the org's pending listings out before the copy")
	require.Equal(t, gone, m.dst.runEntries(t, runID, id), "the target lists every row the run removed, once")
	man, ids := m.dst.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalRun, ID: runID, DatasetID: id})
	require.Equal(t, gone, ids)
	require.Equal(t, man.Removed, man.Listed)
}
