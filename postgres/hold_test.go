package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// placeHold places a hold on the dataset as the bundle's caller and returns its id.
func (b *sweepBundle) placeHold(t *testing.T, id string) string {
	t.Helper()
	ref := "case 2026-114"
	h, err := b.datasets.PlaceHold(context.Background(), b.caller, id, catalog.HoldCreate{Reason: "litigation", Reference: &ref})
	require.NoError(t, err)
	return h.ID
}

// rowsOf counts the dataset's stored rows, expired or not.
func (b *sweepBundle) rowsOf(t *testing.T, id string) int {
	t.Helper()
	return len(filterDataset(b.allRows(t), id))
}

// droppedBy reports whether the run's ledger says the dataset's rows left partition with it whole.
func (b *sweepBundle) droppedBy(t *testing.T, runID, dataset, partition string) bool {
	t.Helper()
	var dropped bool
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM retention_deletions
		WHERE run_id = $1 AND dataset_id = $2 AND partition_name = $3 AND dropped)`, runID, dataset, partition).Scan(&dropped))
	return dropped
}

// TestHeldRowsStayWhenTheirPartitionIsDropped: a held dataset shares wholly expired partitions with two others. The
// run drops the partitions (the others' rows leave by a drop, counted in the ledger), carries the held rows into
// fresh partitions of the same ranges (all there, counters exact, still hidden from reads), and after the release
// the next run drops them, with their exact count.
func TestHeldRowsStayWhenTheirPartitionIsDropped(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	held, a, c := b.newDataset(t, "held"), b.newDataset(t, "a"), b.newDataset(t, "c")
	for _, id := range []string{held, a, c} {
		b.setTTL(t, id, "P1M")
	}
	b.now = time.Date(2024, 10, 31, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{held, a, c} {
		b.ingestSeries(t, id, 100, 24*time.Hour) // expiries from late August (the past partition) to the end of November 2024
	}
	holdID := b.placeHold(t, held)
	b.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	const first = "00000000-0000-0000-0000-0000000001a1"
	removed := b.sweep(t, first, retention.Period{}, true)
	require.Zero(t, removed[held], "a run removes nothing of a held dataset")
	require.Equal(t, int64(100), removed[a])
	require.Equal(t, int64(100), removed[c])
	require.Equal(t, 100, b.rowsOf(t, held), "every held row is still stored")
	require.Zero(t, b.rowsOf(t, a))
	for _, part := range []string{"lake_rows_ppast", "lake_rows_p202411"} {
		require.True(t, b.droppedBy(t, first, a, part), "%s left by a drop", part)
		require.False(t, b.droppedBy(t, first, held, part), "the held rows of %s are not in the ledger", part)
	}
	require.Contains(t, b.attached(t), "lake_rows_p202411", "the partition is there again, with the held rows")
	var ledger int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(rows_deleted), 0) FROM retention_deletions
		WHERE run_id = $1 AND dataset_id = $2`, first, held).Scan(&ledger))
	require.Zero(t, ledger)
	b.requireCountersExact(t)
	page, err := b.rows.FindRows(context.Background(), b.caller, held, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 1000})
	require.NoError(t, err)
	require.Empty(t, page.Rows, "reads keep hiding the held expired rows")
	require.Positive(t, b.release(t), "the detached tables are released")
	require.Equal(t, 100, b.rowsOf(t, held), "the release of the detached tables takes no held row")

	again := b.sweep(t, "00000000-0000-0000-0000-0000000001a2", retention.Period{}, true)
	require.Zero(t, again[held], "a partition of held rows alone is neither dropped nor walked while held")
	require.Equal(t, 100, b.rowsOf(t, held))

	_, err = b.datasets.ReleaseHold(context.Background(), b.caller, held, holdID)
	require.NoError(t, err)
	const after = "00000000-0000-0000-0000-0000000001a3"
	last := b.sweep(t, after, retention.Period{}, true)
	require.Equal(t, int64(100), last[held], "after the release the next run removes them, as if there had been no hold")
	require.Zero(t, b.rowsOf(t, held))
	require.True(t, b.droppedBy(t, after, held, "lake_rows_p202411"), "by a drop")
	b.requireCountersExact(t)
}

// TestWalkAndRowPhaseLeaveHeldRows: rows of a held dataset in the current partition (walked) and in a partition
// whose TTL was shortened since (the row phase) all stay, while the others' expired rows there go.
func TestWalkAndRowPhaseLeaveHeldRows(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	held, free := b.newDataset(t, "held"), b.newDataset(t, "free")
	b.now = time.Date(2025, 3, 20, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{held, free} {
		b.setTTL(t, id, "P1M")
		b.ingestSeries(t, id, 60, 12*time.Hour)
		b.setTTL(t, id, "P10D") // rows placed under P1M, judged by the shorter TTL: the row phase's work
	}
	b.placeHold(t, held)
	b.now = time.Date(2025, 4, 10, 0, 0, 0, 0, time.UTC)
	removed := b.sweep(t, "00000000-0000-0000-0000-0000000001b1", retention.Period{}, true)
	require.Zero(t, removed[held])
	require.Equal(t, 60, b.rowsOf(t, held))
	require.Positive(t, removed[free])
	b.requireCountersExact(t)
}

// TestHeldDatasetRefusesRowDeletes: a delete by _id of a held dataset's row is refused with the hold named, and
// the row stays; after the release it goes.
func TestHeldDatasetRefusesRowDeletes(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "held")
	b.ingestLines(t, id, `{"timestamp":"2024-12-30T00:00:00Z","_id":"evidence"}`)
	holdID := b.placeHold(t, id)
	err := b.rows.DeleteRow(context.Background(), b.caller, id, "evidence")
	require.Equal(t, catalog.ECONFLICT, catalog.ErrorCode(err), "%v", err)
	require.Contains(t, err.Error(), holdID)
	require.Equal(t, 1, b.rowsOf(t, id))
	held, err := b.datasets.Held(context.Background(), id)
	require.NoError(t, err)
	require.True(t, held)

	_, err = b.datasets.ReleaseHold(context.Background(), b.caller, id, holdID)
	require.NoError(t, err)
	held, err = b.datasets.Held(context.Background(), id)
	require.NoError(t, err)
	require.False(t, held)
	require.NoError(t, b.rows.DeleteRow(context.Background(), b.caller, id, "evidence"))
	require.Zero(t, b.rowsOf(t, id))
}

// ledgerOf sums the rows the run's ledger says it removed of the dataset.
func (b *sweepBundle) ledgerOf(t *testing.T, runID, dataset string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(rows_deleted), 0)::bigint
		FROM retention_deletions WHERE run_id = $1 AND dataset_id = $2`, runID, dataset).Scan(&n))
	return n
}

// TestHeldVersionsLeaveAfterReleaseAndExpiry: rows of a held dataset written again keep their previous versions.
// A run under the hold removes none of them; after the release, each run removes exactly the versions whose own
// expiry has passed, counted in its ledger, with the counters exact throughout.
func TestHeldVersionsLeaveAfterReleaseAndExpiry(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id, free := b.newDataset(t, "held"), b.newDataset(t, "free")
	for _, ds := range []string{id, free} {
		b.setTTL(t, ds, "P1M")
	}
	b.now = time.Date(2025, 2, 26, 0, 0, 0, 0, time.UTC)
	old := `{"timestamp":"2024-12-20T00:00:00Z","_id":"old","memo":"%s"}`     // expires 2025-01-20
	fresh := `{"timestamp":"2025-02-25T00:00:00Z","_id":"fresh","memo":"%s"}` // expires 2025-03-25
	for _, ds := range []string{id, free} {
		b.ingestLines(t, ds, fmt.Sprintf(old, "first"), fmt.Sprintf(fresh, "first"))
	}
	holdID := b.placeHold(t, id)
	b.now = b.now.Add(time.Hour)
	for _, ds := range []string{id, free} {
		b.ingestLines(t, ds, fmt.Sprintf(old, "second"), fmt.Sprintf(fresh, "second"))
	}
	require.Equal(t, 4, b.rowsOf(t, id), "the held dataset keeps both versions of each row")
	require.Equal(t, 2, b.rowsOf(t, free), "the other dataset's re-sent _ids replace their rows")
	b.requireCountersExact(t)

	page, err := b.rows.FindRows(context.Background(), b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10, IncludeExpired: true})
	require.NoError(t, err)
	require.Len(t, page.Rows, 4)
	kept := 0
	for _, r := range page.Rows {
		if r.ReplacedAt != nil {
			kept++
			require.Equal(t, b.now, r.ReplacedAt.UTC(), "%s was replaced by the second write", r.ID)
			require.Contains(t, string(r.Payload), "first")
		}
	}
	require.Equal(t, 2, kept)
	page, err = b.rows.FindRows(context.Background(), b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Rows, 1, "ordinary reads show the current, unexpired version only")
	require.Contains(t, string(page.Rows[0].Payload), "second")

	b.now = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	const held = "00000000-0000-0000-0000-0000000001c1"
	require.Zero(t, b.sweep(t, held, retention.Period{}, true)[id], "a run under the hold removes no version")
	require.Equal(t, 4, b.rowsOf(t, id))
	b.requireCountersExact(t)

	_, err = b.datasets.ReleaseHold(context.Background(), b.caller, id, holdID)
	require.NoError(t, err)
	b.now = b.now.Add(24 * time.Hour)
	const released = "00000000-0000-0000-0000-0000000001c2"
	require.Equal(t, int64(2), b.sweep(t, released, retention.Period{}, true)[id], "after the release, the expired versions of old go")
	require.Equal(t, int64(2), b.ledgerOf(t, released, id))
	require.Equal(t, 2, b.rowsOf(t, id), "the versions of fresh wait for their own expiry")
	b.requireCountersExact(t)

	b.now = time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	const expired = "00000000-0000-0000-0000-0000000001c3"
	require.Equal(t, int64(2), b.sweep(t, expired, retention.Period{}, true)[id])
	require.Equal(t, int64(2), b.ledgerOf(t, expired, id))
	require.Zero(t, b.rowsOf(t, id))
	b.requireCountersExact(t)
}

// waitersOn lists the wait events ("advisory", "transactionid", …) of the database's backends waiting for a lock
// now, other than the caller's own.
func waitersOn(t *testing.T, b *sweepBundle) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT wait_event FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() ORDER BY wait_event`)
	require.NoError(t, err)
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return events
}

// Issue 28, finding 7: PlaceHold took one advisory lock of every org exclusive and kept it while it waited for its
// own org's audit chain, and every delete by _id of every org took it shared: one org's hold churn took another
// org's deletes from 3 to 47 ms. A hold now serializes with the deletes of its own dataset only. Shown without a
// clock: a hold is stopped mid-transaction (its org's chain row is locked here), and another org's delete by _id
// must end meanwhile, never waiting on an advisory lock; the hold still waits for a delete of its own dataset in
// flight.
func TestHoldWaitsOnlyForRemovalsOfItsDataset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSweep(t)
	held := b.newDataset(t, "held")
	b.ingestLines(t, held, `{"timestamp":"2024-12-30T00:00:00Z","_id":"evidence"}`)
	victim := &catalog.Caller{User: "v", ClientID: "v", Org: "VICTIM@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	ds, err := b.datasets.CreateDataset(ctx, victim, catalog.DatasetCreate{Name: "victim",
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	res, err := ingest(ctx, b.rows, victim, ds.ID, rawEvents(`{"timestamp":"2024-12-30T00:00:00Z","_id":"v1"}`), catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted, "%v", res.Errors)

	// The attacker's org chain is locked, so its hold stops where it writes its audit event, all its locks taken.
	chain, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = chain.Rollback(ctx) }()
	_, err = chain.Exec(ctx, `SELECT 1 FROM audit_chains WHERE org_id = $1 FOR UPDATE`, b.caller.Org)
	require.NoError(t, err)
	placed := make(chan error, 1)
	go func() {
		_, err := b.datasets.PlaceHold(ctx, b.caller, held, catalog.HoldCreate{Reason: "litigation"})
		placed <- err
	}()
	for w := waitersOn(t, b); !slices.Contains(w, "transactionid") && !slices.Contains(w, "tuple"); w = waitersOn(t, b) {
		runtime.Gosched() // the hold has not reached the chain yet
	}

	deleted := make(chan error, 1)
	go func() { deleted <- b.rows.DeleteRow(ctx, victim, ds.ID, "v1") }()
	for done := false; !done; {
		select {
		case err := <-deleted:
			require.NoError(t, err, "the victim's delete")
			done = true
		default:
			if slices.Contains(waitersOn(t, b), "advisory") {
				require.NoError(t, chain.Rollback(ctx))
				require.NoError(t, <-placed)
				require.NoError(t, <-deleted)
				t.Fatal("another org's delete by _id waited for the attacker's hold")
			}
			runtime.Gosched()
		}
	}
	select {
	case err := <-placed:
		t.Fatalf("the hold ended while its org's chain was locked: %v", err)
	default:
	}
	require.NoError(t, chain.Rollback(ctx))
	require.NoError(t, <-placed)
	require.Equal(t, catalog.ECONFLICT, catalog.ErrorCode(b.rows.DeleteRow(ctx, b.caller, held, "evidence")))
}

// A hold still answers only once the deletes by _id in flight on its dataset have committed: a delete holding the
// dataset's hold lock shared (as DeleteRow does) keeps the hold waiting on it, and the hold then sees the row gone.
func TestHoldWaitsForADeleteOfItsDatasetInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSweep(t)
	id := b.newDataset(t, "held")
	b.ingestLines(t, id, `{"timestamp":"2024-12-30T00:00:00Z","_id":"evidence"}`)
	removal, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = removal.Rollback(ctx) }()
	_, err = removal.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtextextended('hold:' || $1, 0))`, id)
	require.NoError(t, err)
	placed := make(chan error, 1)
	go func() {
		_, err := b.datasets.PlaceHold(ctx, b.caller, id, catalog.HoldCreate{Reason: "litigation"})
		placed <- err
	}()
	for !slices.Contains(waitersOn(t, b), "advisory") {
		select {
		case err := <-placed:
			t.Fatalf("the hold answered while a removal of its dataset was in flight: %v", err)
		default:
			runtime.Gosched()
		}
	}
	require.NoError(t, removal.Commit(ctx))
	require.NoError(t, <-placed)
}
