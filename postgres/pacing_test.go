package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// pacingClock is the pacing's clock in a test: every reading moves it on by step, and a rest is recorded, not
// waited for.
type pacingClock struct {
	mu    sync.Mutex
	at    time.Time
	step  time.Duration
	rests []time.Duration
}

func (c *pacingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(c.step)
	return c.at
}

func (c *pacingClock) sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rests = append(c.rests, d)
	return nil
}

func (c *pacingClock) move(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// setupPacing is a sweep bundle whose sweeper works on one connection at share percent while ingestion is busy,
// on the pacing clock, with one dataset of P1M whose rows span a hundred days: a run drops some partitions, walks
// the current one in many block ranges and deletes more by dataset.
func setupPacing(t *testing.T, share int) (*sweepBundle, *pacingClock, string) {
	t.Helper()
	b := setupSweep(t)
	b.sweeper = postgres.MustSweeper(b.db, postgres.SweepConfig{BatchSize: 37, Workers: 1, BusyShare: share})
	clock := &pacingClock{at: time.Unix(0, 0), step: 10 * time.Millisecond}
	b.sweeper.SetPacingClock(clock.now, clock.sleep)
	b.now = time.Date(2025, 3, 20, 9, 0, 0, 0, time.UTC)
	ds := b.newDataset(t, "paced")
	b.setTTL(t, ds, "P1M")
	b.ingestSeries(t, ds, 4800, 30*time.Minute)
	return b, clock, ds
}

// TestRunPacesOnlyWhileIngestionIsBusy: while a session of the database is tagged as an ingestion's, each worker
// of a run rests after each batch three times the batch's time (a share of 25%), and the release of the detached
// partitions drops one table a transaction with a rest after each; with no ingestion nothing rests, and pacing off
// (100%) never rests either. The run removes exactly the deletable rows, paced or not.
func TestRunPacesOnlyWhileIngestionIsBusy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		share     int
		busy      bool
		wantRests bool
	}{
		{"Idle", 25, false, false},
		{"Busy", 25, true, true},
		{"BusyWithPacingOff", 100, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, clock, ds := setupPacing(t, tc.share)
			if tc.busy {
				tx, err := b.db.BeginTaggedIngestion(ctx)
				require.NoError(t, err)
				t.Cleanup(func() { _ = tx.Rollback(ctx) })
			}
			history := b.history(t)[ds]
			var wantRemoved int64
			var wantKept []string
			for _, r := range b.allRows(t) {
				if retention.Deletable(r.row, history, b.now, retention.Period{}) {
					wantRemoved++
				} else {
					wantKept = append(wantKept, r.id)
				}
			}
			require.Greater(t, wantRemoved, int64(2000))

			removed := b.sweep(t, "00000000-0000-0000-0000-0000000000c1", retention.Period{}, true)
			require.Equal(t, wantRemoved, removed[ds], "the run removes exactly the deletable rows")
			var kept []string
			for _, r := range b.allRows(t) {
				kept = append(kept, r.id)
			}
			require.ElementsMatch(t, wantKept, kept)
			b.requireCountersExact(t)

			restsOfRun := len(clock.rests)
			released, err := b.sweeper.ReleaseDetached(ctx, b.now)
			require.NoError(t, err)
			require.Positive(t, released, "the run detached partitions")
			var left int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM detached_partitions`).Scan(&left))
			require.Zero(t, left, "the release drops every detached table")
			if tc.wantRests {
				require.Len(t, clock.rests, restsOfRun+released, "busy: one table a transaction, a rest after each")
			}

			if !tc.wantRests {
				require.Empty(t, clock.rests, "no rest without busy ingestion or with pacing off")
				return
			}
			require.NotEmpty(t, clock.rests, "a rest after the batches")
			for _, d := range clock.rests {
				require.Equal(t, 30*time.Millisecond, d, "three times the batch's 10 ms")
			}
		})
	}
}

// TestPacingHoldsASecondAfterIngestionWasSeen: a busy client's session is tagged only while it writes a chunk, so
// a run goes on resting for a second after it last saw one, and then works at full speed again.
func TestPacingHoldsASecondAfterIngestionWasSeen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSweep(t)
	b.sweeper = postgres.MustSweeper(b.db, postgres.SweepConfig{BusyShare: 50})
	clock := &pacingClock{at: time.Unix(0, 0)}
	b.sweeper.SetPacingClock(clock.now, clock.sleep)
	batch := func() {
		t.Helper()
		started := clock.now()
		clock.move(100 * time.Millisecond)
		require.NoError(t, b.sweeper.PaceAfter(ctx, started))
	}

	tx, err := b.db.BeginTaggedIngestion(ctx)
	require.NoError(t, err)
	batch()
	require.Equal(t, []time.Duration{100 * time.Millisecond}, clock.rests, "busy: rests as long as the batch took")
	require.NoError(t, tx.Rollback(ctx))
	clock.move(700 * time.Millisecond)
	batch()
	require.Len(t, clock.rests, 2, "800 ms after ingestion was last seen, it still counts as busy")
	clock.move(200 * time.Millisecond)
	batch()
	require.Len(t, clock.rests, 2, "more than a second after, the run works at full speed")
}

// TestIngestionTagsItsSessionOnlyWhileItWrites: a chunk's transaction shows in pg_stat_activity as an ingestion's
// while it runs, and its connection, back in the pool, no longer does.
func TestIngestionTagsItsSessionOnlyWhileItWrites(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := setupSweep(t)
	ds := b.newDataset(t, "tagged")
	busy, err := b.db.IngestionBusy(ctx)
	require.NoError(t, err)
	require.False(t, busy, "no ingestion yet")

	// The chunk's transaction waits for the dataset's ingestion lock, which the test holds, after it has tagged
	// its session.
	lock, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('rows:' || $1, 0))`, ds)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }() // on a failure, lets the ingestion end
	type outcome struct {
		res *catalog.IngestResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := ingest(ctx, b.rows, b.caller, ds, rawEvents(
			fmt.Sprintf(`{"timestamp":%q,"_id":"a"}`, b.now.Add(-time.Hour).Format(time.RFC3339))), catalog.IngestOptions{})
		done <- outcome{res, err}
	}()
	for !busy {
		select {
		case o := <-done:
			t.Fatalf("the ingestion ended before it showed as one: %+v, %v", o.res, o.err)
		default:
		}
		busy, err = b.db.IngestionBusy(ctx)
		require.NoError(t, err, "the chunk never showed as an ingestion")
	}
	require.NoError(t, lock.Commit(ctx))
	o := <-done
	require.NoError(t, o.err)
	require.Equal(t, 1, o.res.Accepted, "%v", o.res.Errors)
	busy, err = b.db.IngestionBusy(ctx)
	require.NoError(t, err)
	require.False(t, busy, "a committed chunk's connection is an ingestion's no more")
}
