package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// requireFiltersCover checks the one promise of the _id filters: every stored row of a (partition, dataset) pair
// that has filters tests positive in one of them, in both stores. A pair without filters is probed for every _id.
func requireFiltersCover(t *testing.T, db *postgres.DB) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT partition_name, dataset_id, filter FROM row_id_filters ORDER BY seq`)
	require.NoError(t, err)
	filters := map[[2]string][]*bloom.BloomFilter{}
	var part, ds string
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&part, &ds, &raw}, func() error {
		f := &bloom.BloomFilter{}
		if err := f.UnmarshalBinary(raw); err != nil {
			return err
		}
		filters[[2]string{part, ds}] = append(filters[[2]string{part, ds}], f)
		return nil
	})
	require.NoError(t, err)
	rows, err = db.Pool.Query(ctx, `SELECT tableoid::regclass::text, dataset_id, row_id FROM lake_rows
		UNION ALL SELECT tableoid::regclass::text, dataset_id, row_id FROM profile_rows`)
	require.NoError(t, err)
	var id string
	_, err = pgx.ForEachRow(rows, []any{&part, &ds, &id}, func() error {
		fs, ok := filters[[2]string{part, ds}]
		if !ok {
			return nil
		}
		for _, f := range fs {
			if f.TestString(id) {
				return nil
			}
		}
		return fmt.Errorf("row %q of %s in %s is in none of its pair's %d filters", id, ds, part, len(fs))
	})
	require.NoError(t, err)
}

// filterPairs counts the (partition, dataset) pairs of the dataset that have _id filters, and the pairs holding its
// rows.
func filterPairs(t *testing.T, db *postgres.DB, datasetID string) (filtered, holding int) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(DISTINCT partition_name) FROM row_id_filters WHERE dataset_id = $1),
		(SELECT count(DISTINCT partition_name) FROM row_stats WHERE dataset_id = $1 AND row_count > 0)`, datasetID).
		Scan(&filtered, &holding))
	return filtered, holding
}

// resend ingests one event with this _id and timestamp, its payload v.
func (b *sweepBundle) resend(t *testing.T, ds, id string, ts time.Time, v string) {
	t.Helper()
	line := fmt.Sprintf(`{"timestamp":%q,"_id":%q,"v":%q}`, ts.Format(time.RFC3339), id, v)
	res, err := ingest(context.Background(), b.rows, b.caller, ds, rawEvents(line), catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted, "%v", res.Errors)
}

// versionsOf returns the payload values v of the stored rows of the dataset with this _id.
func (b *sweepBundle) versionsOf(t *testing.T, ds, id string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT coalesce(payload->>'v', '') FROM lake_rows
		WHERE dataset_id = $1 AND row_id = $2`, ds, id)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// TestResentIDInAFarPartitionIsReplaced checks that the filters never hide a stored _id: an event stored years
// before its neighbours, in a partition far from theirs, is replaced when its _id comes again with a recent
// timestamp, among other dataset's rows with the same _id that stay, and every pair has its filters.
func TestResentIDInAFarPartitionIsReplaced(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds, other := b.newDataset(t, "far"), b.newDataset(t, "other")
	b.setTTL(t, ds, "P3Y")
	b.setTTL(t, other, "P3Y")
	b.resend(t, ds, "old", b.now.AddDate(-2, 0, 0), "first") // placed a year ahead
	b.resend(t, other, "old", b.now.AddDate(-2, 0, 0), "other's")
	b.ingestSeries(t, ds, 1000, 3*time.Hour) // placed three years ahead, in several months
	filtered, holding := filterPairs(t, b.db, ds)
	require.Equal(t, holding, filtered, "every pair the dataset wrote from empty has filters")
	require.Greater(t, holding, 2)

	b.resend(t, ds, "old", b.now.Add(-time.Hour), "second")
	require.Equal(t, []string{"second"}, b.versionsOf(t, ds, "old"), "the re-sent _id replaced its row, three years of expiry away")
	require.Equal(t, []string{"other's"}, b.versionsOf(t, other, "old"), "another dataset's row of the same _id stays")
	b.resend(t, ds, "r999", b.now.AddDate(-2, 0, 0), "moved back")
	require.Equal(t, []string{"moved back"}, b.versionsOf(t, ds, "r999"))
	b.requireCountersExact(t)
}

// TestUnfilteredPairsAreProbed checks rows stored without filters (before migration 0012): their pairs stay
// unfiltered while they hold rows, since a filter started then would miss the rows already there, and a re-sent _id
// is still found in them. Once a pair holds no row, its next chunk starts its filters.
func TestUnfilteredPairsAreProbed(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "legacy")
	b.setTTL(t, ds, "P1Y")
	b.ingestSeries(t, ds, 300, time.Hour)
	_, err := b.db.Pool.Exec(ctx, `DELETE FROM row_id_filters WHERE dataset_id = $1`, ds)
	require.NoError(t, err)

	b.resend(t, ds, "new", b.now.Add(-2*time.Hour), "new") // into a pair that holds rows
	filtered, _ := filterPairs(t, b.db, ds)
	require.Zero(t, filtered, "no filter starts in a pair that holds rows")
	b.resend(t, ds, "r7", b.now.Add(-3*time.Hour), "second")
	require.Equal(t, []string{"second"}, b.versionsOf(t, ds, "r7"))

	b.now = b.now.AddDate(2, 0, 0)
	b.sweep(t, "00000000-0000-0000-0000-0000000000f1", retention.Period{}, true)
	b.resend(t, ds, "r7", b.now.Add(-time.Hour), "third")
	filtered, holding := filterPairs(t, b.db, ds)
	require.Equal(t, 1, holding)
	require.Equal(t, 1, filtered, "an empty pair starts its filters")
	require.Equal(t, []string{"third"}, b.versionsOf(t, ds, "r7"))
	b.requireCountersExact(t)
}

// TestDropTakesItsFilters checks that a run's drop deletes the dropped partition's filters (ahead of its
// transaction: TestDropForgetsFiltersBeforeItLocksTheStore).
func TestDropTakesItsFilters(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "dropped")
	b.setTTL(t, ds, "P1M")
	b.ingestSeries(t, ds, 200, time.Hour)
	filtered, holding := filterPairs(t, b.db, ds)
	require.Equal(t, holding, filtered)
	require.Positive(t, filtered)

	b.now = b.now.AddDate(0, 3, 0)
	removed := b.sweep(t, "00000000-0000-0000-0000-0000000000f2", retention.Period{}, true)
	require.EqualValues(t, 200, removed[ds])
	var left int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM row_id_filters`).Scan(&left))
	require.Zero(t, left, "the dropped partitions took their filters")
	b.requireCountersExact(t)
}

// TestConcurrentResendsKeepOneRowPerID checks the filters under concurrent ingestions of one dataset: four bodies
// send the same _ids at once, each with its own timestamps (so each places them in other partitions) and chunk by
// chunk; whichever commits last, each _id is stored once and every stored _id is in its pair's filters.
func TestConcurrentResendsKeepOneRowPerID(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds := b.newDataset(t, "concurrent")
	b.setTTL(t, ds, "P2Y")
	const ids = 500
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			events := func(yield func([]byte) bool) {
				for i := range ids {
					ts := b.now.Add(-time.Duration((i*7+w*97)%400) * 24 * time.Hour)
					if !yield(fmt.Appendf(nil, `{"timestamp":%q,"_id":"c%d","v":"w%d"}`, ts.Format(time.RFC3339), i, w)) {
						return
					}
				}
			}
			res, err := ingest(context.Background(), b.rows, b.caller, ds, events, catalog.IngestOptions{})
			assert.NoError(t, err)
			assert.Equal(t, ids, res.Accepted)
		})
	}
	wg.Wait()
	var rows, distinct int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT row_id) FROM lake_rows
		WHERE dataset_id = $1`, ds).Scan(&rows, &distinct))
	require.Equal(t, ids, rows, "each _id is stored once")
	require.Equal(t, ids, distinct)
	b.requireCountersExact(t)
}

// TestForgottenFiltersLeaveThePairsProbed checks what makes it safe for a drop to delete a partition's filters in a
// transaction ahead of its own (ForgetIDFilters): where no drop follows, the pairs hold rows and no filter, so they
// are unfiltered, probed for every _id, and a re-sent _id still replaces its row there. A held dataset keeps its
// filters.
func TestForgottenFiltersLeaveThePairsProbed(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds, held := b.newDataset(t, "forgotten"), b.newDataset(t, "held")
	for _, id := range []string{ds, held} {
		b.setTTL(t, id, "P1Y")
		b.ingestSeries(t, id, 200, time.Hour)
	}
	b.placeHold(t, held)
	rows, err := b.db.Pool.Query(ctx, `SELECT DISTINCT partition_name FROM row_id_filters`)
	require.NoError(t, err)
	parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, parts)

	require.NoError(t, b.sweeper.Queries().ForgetIDFilters(ctx, parts))
	filtered, holding := filterPairs(t, b.db, ds)
	require.Zero(t, filtered, "the dataset's pairs lost their filters")
	require.Positive(t, holding)
	filtered, holding = filterPairs(t, b.db, held)
	require.Equal(t, holding, filtered, "the held dataset keeps its filters")

	b.resend(t, ds, "r7", b.now.Add(-3*time.Hour), "second")
	require.Equal(t, []string{"second"}, b.versionsOf(t, ds, "r7"), "the re-sent _id replaced its row in an unfiltered pair")
	filtered, _ = filterPairs(t, b.db, ds)
	require.Zero(t, filtered, "no filter starts in a pair that holds rows")
	b.requireCountersExact(t)
}

// TestDropForgetsFiltersBeforeItLocksTheStore checks where a drop deletes the dropped partitions' filters: in a
// transaction committed before its own takes the store's parent table, which every ingestion waits for while the
// drop holds it.
func TestDropForgetsFiltersBeforeItLocksTheStore(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	ds := b.newDataset(t, "dropped")
	b.setTTL(t, ds, "P1M")
	b.ingestSeries(t, ds, 200, time.Hour)
	b.now = b.now.AddDate(0, 3, 0)
	b.on(t, "Drop", func() {
		removed := b.sweep(t, "00000000-0000-0000-0000-0000000000f3", retention.Period{}, true)
		require.EqualValues(t, 200, removed[ds])
	})
	forget, lock, committed := -1, -1, -1
	for i, st := range b.rec.stmts {
		switch {
		case st.path != "Drop":
		case strings.HasPrefix(st.sql, "DELETE FROM row_id_filters") && forget < 0:
			forget = i
		case forget >= 0 && committed < 0 && strings.EqualFold(strings.TrimSpace(st.sql), "commit"):
			committed = i
		case strings.HasPrefix(st.sql, "LOCK TABLE ONLY lake_rows IN ACCESS EXCLUSIVE") && lock < 0:
			lock = i
		}
	}
	require.GreaterOrEqual(t, forget, 0, "the drop deleted the filters")
	require.Greater(t, committed, forget, "in a transaction that committed")
	require.Greater(t, lock, committed, "before the drop's transaction took the store")
	var left int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM row_id_filters`).Scan(&left))
	require.Zero(t, left)
}
