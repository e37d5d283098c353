package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
)

// passPeople is how many people a pass fixture's datasets hold rows of; every third is erased.
const passPeople = 120

// passFixture is an order of many identities (so removed in passes) against datasets whose rows lie in two
// partitions of the lake store (two months of a one-year TTL), each person's row once with the e-mail as its only
// identity and once with an ECID and the e-mail, neither primary (the e-mail second in the row's identities).
type passFixture struct {
	b        *sweepBundle
	datasets []string
	want     map[string][]string // the rows each dataset keeps
	gone     map[string][]string // the rows each dataset loses
	erased   map[string]int64    // the rows each dataset loses
	identity []catalog.Identity
}

func setupPasses(t *testing.T, names ...string) *passFixture {
	t.Helper()
	f := &passFixture{b: setupSweep(t), want: map[string][]string{}, gone: map[string][]string{}, erased: map[string]int64{}}
	for _, name := range names {
		ds := f.b.newDataset(t, name)
		f.b.setTTL(t, ds, "P1Y")
		f.datasets = append(f.datasets, ds)
		f.ingestPeople(t, ds, "a", "2024-11-30T10:00:00Z")
		f.ingestPeople(t, ds, "b", "2024-12-30T10:00:00Z")
	}
	for i := 0; i < passPeople; i += 3 {
		f.identity = append(f.identity, catalog.Identity{Namespace: "email", Value: fmt.Sprintf("P%d@example.com", i)})
	}
	for i := range 30 {
		f.identity = append(f.identity, catalog.Identity{Namespace: "email", Value: fmt.Sprintf("nobody%d@example.com", i)})
	}
	return f
}

// ingestPeople stores two rows of every person in the dataset at ts, their ids prefixed.
func (f *passFixture) ingestPeople(t *testing.T, ds, prefix, ts string) {
	t.Helper()
	var lines []string
	for i := range passPeople {
		email := fmt.Sprintf("p%d@example.com", i)
		mail, ecid := fmt.Sprintf("%s-m%03d", prefix, i), fmt.Sprintf("%s-e%03d", prefix, i)
		lines = append(lines, identityLine(ts, mail, email, true, ""),
			fmt.Sprintf(`{"timestamp":%q,"_id":%q,"identityMap":{"ECID":[{"id":"%d"}],"email":[{"id":%q}]}}`, ts, ecid, i, email))
		if i%3 == 0 {
			f.erased[ds] += 2
			f.gone[ds] = append(f.gone[ds], mail, ecid)
			continue
		}
		f.want[ds] = append(f.want[ds], mail, ecid)
	}
	f.b.ingestLines(t, ds, lines...)
	slices.Sort(f.want[ds])
	slices.Sort(f.gone[ds])
}

// runner returns a runner whose passes read about 20 rows, so that each partition takes several.
func (f *passFixture) runner() *postgres.WorkOrderRunner {
	r := postgres.NewWorkOrderRunner(f.b.db, testHashKey)
	r.SetPassRows(20)
	return r
}

func (f *passFixture) order(t *testing.T, datasetID string) string {
	t.Helper()
	return f.b.createWorkOrder(t, datasetID, f.identity...)
}

// deleteEvents returns the rowsDeleted of each Delete event of the order, by dataset, each event once.
func (f *passFixture) deleteEvents(t *testing.T, id string) map[string][]string {
	t.Helper()
	rows, err := f.b.db.Pool.Query(context.Background(), `SELECT asset_id, details->>'rowsDeleted', details::text FROM audit_events
		WHERE action = 'Delete' AND details->>'workorderId' = $1 ORDER BY asset_id`, id)
	require.NoError(t, err)
	got := map[string][]string{}
	for rows.Next() {
		var asset, n, details string
		require.NoError(t, rows.Scan(&asset, &n, &details))
		require.NotContains(t, details, "@example.com", "no identity in clear")
		got[asset] = append(got[asset], n)
	}
	require.NoError(t, rows.Err())
	return got
}

// requireDone checks that the order completed having removed exactly the fixture's rows of datasets, each dataset's
// removal in one Delete event with its exact count, with the counters exact.
func (f *passFixture) requireDone(t *testing.T, id string, datasets ...string) {
	t.Helper()
	w, err := postgres.NewWorkOrderService(f.b.db, postgres.WorkOrderLimits{}).FindWorkOrder(context.Background(), f.b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderCompleted, w.Status, "reason: %s", w.Reason)
	var total int64
	want := map[string][]string{}
	for _, ds := range datasets {
		require.Equal(t, f.want[ds], f.b.rowIDsIn(t, "lake_rows", ds))
		total += f.erased[ds]
		want[ds] = []string{fmt.Sprint(f.erased[ds])}
	}
	require.Equal(t, total, w.RowsDeleted)
	require.Equal(t, want, f.deleteEvents(t, id))
	for _, p := range w.Parts {
		require.Equal(t, f.erased[p.DatasetID], p.RowsDeleted, "part %s", p.DatasetID)
	}
	f.b.requireCountersExact(t)
}

// TestWorkOrderPassesRemoveEachRowOnce: two replicas carry one order of many identities at once, then a third
// repeats it; a second order's passes are run one by one, and its settlement twice: each order's passes cover both
// partitions in several block ranges each, every pass is done once, exactly the rows carrying the order's
// identities go (as the only identity or beside another), each dataset has one Delete event with its exact count,
// and the counters stay exact.
func TestWorkOrderPassesRemoveEachRowOnce(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "one", "two")
	ctx := context.Background()
	one, two := f.datasets[0], f.datasets[1]
	id := f.order(t, one)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = jobs.NewWorkOrders(f.runner(), nil).Execute(ctx, id) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, jobs.NewWorkOrders(f.runner(), nil).Execute(ctx, id), "a repeat does nothing")
	f.requireAllPassesDone(t, id)
	f.requireDone(t, id, one)

	id = f.order(t, two)
	r := f.runner()
	_, err := r.ValidateWorkOrder(ctx, id)
	require.NoError(t, err)
	require.NoError(t, r.SubmitWorkOrder(ctx, id))
	for {
		ran, err := r.RunWorkOrderPass(ctx, id)
		require.NoError(t, err)
		if !ran {
			break
		}
	}
	for range 2 {
		more, err := f.runner().SettleWorkOrder(ctx, id)
		require.NoError(t, err)
		require.False(t, more)
	}
	require.NoError(t, jobs.NewWorkOrders(f.runner(), nil).Execute(ctx, id))
	ran, err := f.runner().RunWorkOrderPass(ctx, id)
	require.NoError(t, err)
	require.False(t, ran, "a completed order has no pass left")
	f.requireAllPassesDone(t, id)
	f.requireDone(t, id, two)
}

// requireAllPassesDone checks that the order was removed in several passes, all done.
func (f *passFixture) requireAllPassesDone(t *testing.T, id string) {
	t.Helper()
	planned, done, err := f.b.db.WorkOrderPasses(context.Background(), id)
	require.NoError(t, err)
	require.Greater(t, planned, 4, "each partition is cut into several passes")
	require.Equal(t, planned, done)
}

// TestWorkOrderPassRolledBackRunsAgain: a pass whose transaction is lost (as under kill -9) leaves what the passes
// before it did, counted, and nothing of its own; the next Execute runs it again and the order completes once, with
// exact counts, the dataset whose store keeps a deletion manifest listing each row it lost once.
func TestWorkOrderPassRolledBackRunsAgain(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "one", "two")
	ctx := context.Background()
	f.b.setManifest(t, f.datasets[0], true)
	id := f.order(t, catalog.AllDatasets)
	r := f.runner()
	passes := 0
	r.BeforePassCommit(func() error {
		if passes++; passes == 3 {
			return errors.New("killed")
		}
		return nil
	})
	require.ErrorContains(t, jobs.NewWorkOrders(r, nil).Execute(ctx, id), "killed")
	_, done, err := f.b.db.WorkOrderPasses(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 2, done, "the lost pass is not done")
	var ledger, left int64
	require.NoError(t, f.b.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(rows_deleted), 0) FROM workorder_removals WHERE workorder_id = $1`, id).Scan(&ledger))
	require.NoError(t, f.b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM lake_rows`).Scan(&left))
	require.Equal(t, int64(4*2*passPeople), left+ledger, "the ledger holds exactly the rows gone")
	require.Positive(t, ledger)
	f.b.requireCountersExact(t)

	r.BeforePassCommit(nil)
	require.NoError(t, jobs.NewWorkOrders(r, nil).Execute(ctx, id))
	f.requireDone(t, id, f.datasets...)
	m, listed := f.b.manifestIDs(t, catalog.Removal{Kind: catalog.RemovalWorkOrder, ID: id, DatasetID: f.datasets[0]})
	require.Equal(t, f.gone[f.datasets[0]], listed)
	require.Equal(t, []int64{f.erased[f.datasets[0]], f.erased[f.datasets[0]]}, []int64{m.Removed, m.Listed})
}

// TestWorkOrderPassesKeepAHeldDataset: a held dataset's rows stay while the other dataset's passes run, its part
// waits naming the hold, and after the release its rows go, its Delete event counting exactly.
func TestWorkOrderPassesKeepAHeldDataset(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "free", "held")
	ctx := context.Background()
	free, held := f.datasets[0], f.datasets[1]
	hold := f.b.placeHold(t, held)
	id := f.order(t, catalog.AllDatasets)
	orders := jobs.NewWorkOrders(f.runner(), nil)
	require.NoError(t, orders.Execute(ctx, id))

	w, err := postgres.NewWorkOrderService(f.b.db, postgres.WorkOrderLimits{}).FindWorkOrder(ctx, f.b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderIngested, w.Status)
	require.Contains(t, w.Reason, hold)
	require.Equal(t, f.want[free], f.b.rowIDsIn(t, "lake_rows", free))
	require.Len(t, f.b.rowIDsIn(t, "lake_rows", held), 4*passPeople, "a held dataset keeps its rows")
	require.Equal(t, map[string][]string{free: {fmt.Sprint(f.erased[free])}}, f.deleteEvents(t, id))
	f.b.requireCountersExact(t)

	_, err = f.b.datasets.ReleaseHold(ctx, f.b.caller, held, hold)
	require.NoError(t, err)
	require.NoError(t, orders.Execute(ctx, id))
	f.requireDone(t, id, free, held)
}

// TestWorkOrderPassesAddTheRowsOfAReleasedDataset: a dataset held during the first pass and released before the
// others has its rows removed partly by the passes and the rest by its own part; its part and its one Delete event
// count both.
func TestWorkOrderPassesAddTheRowsOfAReleasedDataset(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "held", "free") // the held dataset's rows come first in each partition, in the first pass
	ctx := context.Background()
	held, free := f.datasets[0], f.datasets[1]
	hold := f.b.placeHold(t, held)
	id := f.order(t, catalog.AllDatasets)
	r := f.runner()
	_, err := r.ValidateWorkOrder(ctx, id)
	require.NoError(t, err)
	require.NoError(t, r.SubmitWorkOrder(ctx, id))
	ran, err := r.RunWorkOrderPass(ctx, id)
	require.NoError(t, err)
	require.True(t, ran)
	_, err = f.b.datasets.ReleaseHold(ctx, f.b.caller, held, hold)
	require.NoError(t, err)
	require.NoError(t, jobs.NewWorkOrders(r, nil).Execute(ctx, id))

	var byPasses, byPart int64
	require.NoError(t, f.b.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(rows_deleted) FILTER (WHERE partition_name <> '*'), 0),
		coalesce(sum(rows_deleted) FILTER (WHERE partition_name = '*'), 0) FROM workorder_removals WHERE workorder_id = $1 AND dataset_id = $2`,
		id, held).Scan(&byPasses, &byPart))
	require.Positive(t, byPasses, "the passes after the release removed rows of the dataset")
	require.Positive(t, byPart, "its part removed the rest")
	f.requireDone(t, id, free, held)
}

// TestWorkOrderPassesReachRowsStoredAfterThePlan: rows carrying the order's identities stored after its passes were
// planned, before they ran, go too: appended to a planned partition (past the blocks it had), and in a partition that
// held none of the order's rows when it was planned.
func TestWorkOrderPassesReachRowsStoredAfterThePlan(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "people")
	ctx := context.Background()
	ds := f.datasets[0]
	id := f.order(t, ds)
	r := f.runner()
	_, err := r.ValidateWorkOrder(ctx, id)
	require.NoError(t, err)
	require.NoError(t, r.SubmitWorkOrder(ctx, id))
	planned, _, err := f.b.db.WorkOrderPasses(ctx, id)
	require.NoError(t, err)

	f.ingestPeople(t, ds, "c", "2024-12-30T11:00:00Z") // the planned December partition, appended
	f.ingestPeople(t, ds, "d", "2024-06-30T10:00:00Z") // a partition of its own
	require.NoError(t, jobs.NewWorkOrders(r, nil).Execute(ctx, id))
	after, _, err := f.b.db.WorkOrderPasses(ctx, id)
	require.NoError(t, err)
	require.Greater(t, after, planned, "the new partition was planned when the order settled")
	f.requireDone(t, id, ds)
	for _, row := range f.b.rowIDsIn(t, "lake_rows", ds) {
		var i int
		_, err := fmt.Sscanf(row[strings.IndexByte(row, '-')+2:], "%03d", &i)
		require.NoError(t, err)
		require.NotZero(t, i%3, "row %s carries an identity of the order", row)
	}
}

// TestWorkOrderPassReadsBlocksInOrder: a pass reads its block range in block order, never through the index on
// (dataset_id, row_id) that an ANY over every dataset of the order invites, even where a sequential scan is priced
// out (enable_seqscan off stands for a table large enough that the planner prefers the index); the order's keys are
// hashed once, never compared one by one with each row.
func TestWorkOrderPassReadsBlocksInOrder(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "one", "two", "three")
	ctx := context.Background()
	var partition string
	require.NoError(t, f.b.db.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM lake_rows LIMIT 1`).Scan(&partition))
	partition = strings.Trim(partition, `"`)
	_, err := f.b.db.Pool.Exec(ctx, `ANALYZE lake_rows`)
	require.NoError(t, err)
	plan, err := f.b.db.WorkOrderPassPlan(ctx, "DI-plan", partition, f.datasets)
	require.NoError(t, err)
	var doc []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal([]byte(plan), &doc), plan)
	var scans, hashed []string
	doc[0].Plan.walk(func(n planNode) {
		if n.Relation == partition && n.Type != "ModifyTable" {
			scans = append(scans, n.Type)
		}
		if strings.Contains(n.Filter, "hashed SubPlan") {
			hashed = append(hashed, n.Filter)
		}
	})
	require.Equal(t, []string{"Tid Range Scan"}, scans, plan)
	require.NotEmpty(t, hashed, "the keys are probed in a hash: %s", plan)
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan, with what the tests judge.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Filter   string     `json:"Filter"`
	Plans    []planNode `json:"Plans"`
}

// walk calls fn on the node and every node below it.
func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// TestWorkOrderOfASmallShareGoesDatasetByDataset: an order of many identities against a dataset holding a small
// share of its partitions' rows plans no passes (they would read every other dataset's rows) and removes the rows
// through the dataset's own statement, with its Delete event.
func TestWorkOrderOfASmallShareGoesDatasetByDataset(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "big")
	ctx := context.Background()
	small := f.b.newDataset(t, "small")
	f.b.setTTL(t, small, "P1Y")
	f.b.ingestLines(t, small, identityLine("2024-12-30T10:00:00Z", "s1", "p0@example.com", true, ""),
		identityLine("2024-12-30T10:00:00Z", "s2", "p1@example.com", true, ""))
	id := f.order(t, small)
	require.NoError(t, jobs.NewWorkOrders(f.runner(), nil).Execute(ctx, id))
	planned, _, err := f.b.db.WorkOrderPasses(ctx, id)
	require.NoError(t, err)
	require.Zero(t, planned)
	f.want[small], f.erased[small] = []string{"s2"}, 1
	f.requireDone(t, id, small)
	require.Len(t, f.b.rowIDsIn(t, "lake_rows", f.datasets[0]), 4*passPeople, "the other dataset is not the order's")
}

// TestOrgMovedInTheMiddleOfAnOrdersPasses: an org moves to another cell after some of its order's passes ran. The
// order, its parts and its ledger move with it, not its passes (a plan of the source's blocks): on the target it
// plans the target's partitions when it settles, removes the rest, and completes with each dataset's exact count in
// one Delete event, the rows the passes removed on the source counted once.
func TestOrgMovedInTheMiddleOfAnOrdersPasses(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "one", "two")
	ctx := context.Background()
	id := f.order(t, catalog.AllDatasets)
	src := f.runner()
	_, err := src.ValidateWorkOrder(ctx, id)
	require.NoError(t, err)
	require.NoError(t, src.SubmitWorkOrder(ctx, id))
	for range 3 {
		ran, err := src.RunWorkOrderPass(ctx, id)
		require.NoError(t, err)
		require.True(t, ran)
	}
	var removed int64
	require.NoError(t, f.b.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(rows_deleted), 0) FROM workorder_removals WHERE workorder_id = $1`, id).Scan(&removed))
	require.Positive(t, removed, "the passes on the source removed rows")
	require.Less(t, removed, f.erased[f.datasets[0]]+f.erased[f.datasets[1]], "and left some")

	db := testdb.NewDB(t)
	db.Now = f.b.db.Now
	router := &mapRouter{routes: map[string]string{f.b.caller.Org: "cell-a"}}
	_, err = (&postgres.OrgMove{Org: f.b.caller.Org, Source: f.b.db, Target: db, TargetCell: "cell-b", Router: router}).Run(ctx)
	require.NoError(t, err)

	dst := postgres.NewWorkOrderRunner(db, testHashKey)
	dst.SetPassRows(20)
	require.NoError(t, jobs.NewWorkOrders(dst, nil).Execute(ctx, id))
	f.b = &sweepBundle{db: db, datasets: postgres.NewDatasetService(db), rows: postgres.NewRowService(db, 200),
		policies: postgres.NewPolicyService(db), now: f.b.now, caller: f.b.caller}
	f.requireDone(t, id, f.datasets...)
}

// TestWorkOrderPassOutOfTimeIsSplit: a pass whose statement runs out of its time (here, waiting for a lock another
// transaction holds on its partition) is rolled back whole and split into two passes of half its blocks, the second
// open-ended as the pass was; once the lock is gone the order completes with exact counts, each half done once.
func TestWorkOrderPassOutOfTimeIsSplit(t *testing.T) {
	t.Parallel()
	f := setupPasses(t, "one")
	ctx := context.Background()
	id := f.order(t, f.datasets[0])
	r := postgres.NewWorkOrderRunner(f.b.db, testHashKey)
	r.SetPassRows(1_000_000) // one pass a partition, open-ended
	_, err := r.ValidateWorkOrder(ctx, id)
	require.NoError(t, err)
	require.NoError(t, r.SubmitWorkOrder(ctx, id))
	first, blocks := f.firstPass(t, id)
	require.GreaterOrEqual(t, blocks, int64(2), "the partition holds blocks to split")

	holder, err := f.b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `LOCK TABLE `+first+` IN SHARE MODE`)
	require.NoError(t, err)
	r.SetPassTimeout(50 * time.Millisecond)
	ran, err := r.RunWorkOrderPass(ctx, id)
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, [][2]any{{int64(0), blocks / 2}, {blocks / 2, nil}}, f.passRanges(t, id, first))
	planned, done, err := f.b.db.WorkOrderPasses(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, planned, "two partitions, the first split in two")
	require.Zero(t, done)

	require.NoError(t, holder.Rollback(ctx))
	r.SetPassTimeout(0)
	require.NoError(t, jobs.NewWorkOrders(r, nil).Execute(ctx, id))
	_, done, err = f.b.db.WorkOrderPasses(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, done)
	f.requireDone(t, id, f.datasets[0])
}

// firstPass returns the partition of the order's first pass, which must span it all, and the partition's blocks.
func (f *passFixture) firstPass(t *testing.T, id string) (string, int64) {
	t.Helper()
	var name string
	var to *int64
	var blocks int64
	require.NoError(t, f.b.db.Pool.QueryRow(context.Background(), `SELECT partition_name, to_block,
  pg_relation_size(to_regclass(quote_ident(partition_name))) / current_setting('block_size')::bigint
FROM workorder_passes WHERE workorder_id = $1 ORDER BY store, partition_name, from_block LIMIT 1`, id).Scan(&name, &to, &blocks))
	require.Nil(t, to, "one open-ended pass")
	return name, blocks
}

// passRanges returns the block ranges of the order's passes of the partition, in order; nil for an open end.
func (f *passFixture) passRanges(t *testing.T, id, partition string) [][2]any {
	t.Helper()
	rows, err := f.b.db.Pool.Query(context.Background(), `SELECT from_block, to_block FROM workorder_passes
WHERE workorder_id = $1 AND partition_name = $2 ORDER BY from_block`, id, partition)
	require.NoError(t, err)
	var out [][2]any
	for rows.Next() {
		var from int64
		var to *int64
		require.NoError(t, rows.Scan(&from, &to))
		r := [2]any{from, nil}
		if to != nil {
			r[1] = *to
		}
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}
