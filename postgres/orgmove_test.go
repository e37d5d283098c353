package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// TestEveryOrgScopedTableIsMoved fails when a table of the schema belongs to an org (an org_id, dataset_id,
// expiration_id or run_id column, or a foreign key to such a table) and the move's registry neither copies it nor
// says why it stays: a new table of org data must be added to orgTables (postgres/orgtables.go).
func TestEveryOrgScopedTableIsMoved(t *testing.T) {
	t.Parallel()
	db := testdb.NewDB(t)
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT c.relname::text,
		EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		        AND a.attname IN ('org_id', 'dataset_id', 'expiration_id', 'run_id')),
		coalesce((SELECT array_agg(DISTINCT f.confrelid::regclass::text) FROM pg_constraint f
		          WHERE f.conrelid = c.oid AND f.contype = 'f'), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND c.relname NOT LIKE 'river\_%'`)
	require.NoError(t, err)
	scoped, refs := map[string]bool{}, map[string][]string{}
	var all []string
	var name string
	var direct bool
	var fks []string
	_, err = pgx.ForEachRow(rows, []any{&name, &direct, &fks}, func() error {
		all = append(all, name)
		scoped[name], refs[name] = direct, slices.Clone(fks)
		return nil
	})
	require.NoError(t, err)
	for changed := true; changed; { // reachable through a foreign key to an org's table
		changed = false
		for _, tbl := range all {
			if !scoped[tbl] && slices.ContainsFunc(refs[tbl], func(r string) bool { return scoped[r] }) {
				scoped[tbl], changed = true, true
			}
		}
	}
	moved, notMoved := postgres.OrgTableNames(), postgres.NotMovedTables()
	var missing []string
	for _, tbl := range all {
		_, why := notMoved[tbl]
		if scoped[tbl] && !slices.Contains(moved, tbl) && !why {
			missing = append(missing, tbl)
		}
		require.False(t, slices.Contains(moved, tbl) && why, "%s is both moved and not", tbl)
	}
	require.Empty(t, missing, "tables of an org's data that a move would leave behind: add them to orgTables")
	for _, tbl := range moved {
		require.Contains(t, all, tbl, "the registry names a table the schema lacks")
	}
	for tbl := range notMoved {
		require.Contains(t, all, tbl, "notMoved names a table the schema lacks")
	}
}

// mapRouter is the route table of a test: which cell each org's requests go to.
type mapRouter struct {
	mu     sync.Mutex
	routes map[string]string
}

func (r *mapRouter) Place(_ context.Context, org, cell string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[org] = cell
	return nil
}

func (r *mapRouter) cellOf(org string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.routes[org]
}

// moveBundle is two cells, each a database of the test cluster, and the org to move between them.
type moveBundle struct {
	src, dst     *sweepBundle
	router       *mapRouter
	live, held   string
	expirationID string
}

// setupMove fills the source cell with an org: a profile-enabled dataset with rows in both stores, TTLs changed
// twice, an expiration and a run's history; a held dataset with versions its hold kept; and an audit chain of it all.
func setupMove(t *testing.T, rowsPerDataset int) *moveBundle {
	t.Helper()
	ctx := context.Background()
	src := setupSweep(t)
	db := testdb.NewDB(t)
	dst := &sweepBundle{db: db, datasets: postgres.NewDatasetService(db), rows: postgres.NewRowService(db, 200),
		policies: postgres.NewPolicyService(db), now: src.now, caller: src.caller}
	dst.sweeper = postgres.MustSweeper(db, postgres.SweepConfig{BatchSize: 37})
	db.Now = func() time.Time { return dst.now }
	m := &moveBundle{src: src, dst: dst, router: &mapRouter{routes: map[string]string{src.caller.Org: "cell-a"}}}

	src.now = time.Date(2024, 10, 31, 0, 0, 0, 0, time.UTC)
	ds, err := src.datasets.CreateDataset(ctx, src.caller, catalog.DatasetCreate{Name: "events",
		Tags:           map[string][]string{"unifiedProfile": {"enabled:true"}},
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	m.live, m.held = ds.ID, src.newDataset(t, "held")
	src.setTTL(t, m.live, "P3M")
	src.setTTL(t, m.live, "P1M")
	src.setTTL(t, m.held, "P1M")
	src.ingestSeries(t, m.live, rowsPerDataset, 6*time.Hour)
	src.ingestSeries(t, m.held, rowsPerDataset, 12*time.Hour)
	// Rows with their own expiry, so that the copy carries which field set it (migration 0020) in both stores.
	src.ingestLines(t, m.live, `{"timestamp":"2024-10-30T00:00:00Z","_id":"own-ttl","_ttl":"P90D"}`,
		`{"timestamp":"2024-10-30T00:00:00Z","_id":"own-at","_expiresAt":"2025-01-28T00:00:00Z"}`)
	// A work order erases one of two people, so that its record and its parts move with the org.
	src.ingestLines(t, m.live,
		`{"timestamp":"2024-10-30T00:00:00Z","_id":"erased","identityMap":{"email":[{"id":"gone@example.com","primary":true}]}}`,
		`{"timestamp":"2024-10-30T00:00:00Z","_id":"kept","identityMap":{"email":[{"id":"stays@example.com","primary":true}]}}`)
	orders := postgres.NewWorkOrderService(src.db, postgres.WorkOrderLimits{})
	order, err := orders.CreateWorkOrder(ctx, src.caller, catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: m.live,
		Identities: []catalog.Identity{{Namespace: "email", Value: "gone@example.com"}}})
	require.NoError(t, err)
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(src.db, "k"), nil).Execute(ctx, order.ID))
	order, err = orders.FindWorkOrder(ctx, src.caller, order.ID)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderCompleted, order.Status, "reason: %s", order.Reason)
	require.EqualValues(t, 2, order.RowsDeleted, "the erased person's row in both stores")
	src.placeHold(t, m.held)
	src.resend(t, m.held, "r1", src.now.Add(-time.Hour), "second version")
	exp, err := postgres.NewExpirationService(src.db, 10).CreateExpiration(ctx, src.caller, catalog.ExpirationCreate{
		DatasetID: m.live, Expiry: src.now.AddDate(1, 0, 0), DisplayName: "end of pilot"})
	require.NoError(t, err)
	m.expirationID = exp.ID
	m.fullRun(t, src)
	var profile int64
	require.NoError(t, src.db.Pool.QueryRow(ctx, `SELECT count(*) FROM profile_rows`).Scan(&profile))
	require.Positive(t, profile, "the fixture has rows in both stores")
	return m
}

// fullRun runs a manual run of the org's lake at the bundle's time to its end: ledger, parts and Expire events.
func (m *moveBundle) fullRun(t *testing.T, b *sweepBundle) string {
	t.Helper()
	ctx := context.Background()
	runs := postgres.NewRunRepository(b.db)
	id, err := runs.CreateManualRun(ctx, b.caller, catalog.RunRequest{Store: catalog.LakeHouse}, retention.Period{})
	require.NoError(t, err)
	plan, err := runs.PrepareRun(ctx, id)
	require.NoError(t, err)
	sw := postgres.Sweep{RunID: id, Store: catalog.LakeHouse, At: b.now}
	for _, ds := range plan.Pending {
		_, err := b.sweeper.SweepDataset(ctx, sw, ds)
		require.NoError(t, err)
		_, err = runs.FinishDataset(ctx, id, ds, catalog.Outcome{})
		require.NoError(t, err)
	}
	return id
}

// orgContent is every row of the org's datasets in both stores, as "store dataset _id current own-expiry-source
// payload", sorted.
func orgContent(t *testing.T, db *postgres.DB, org string) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT r.store || ' ' || r.dataset_id || ' ' || r.row_id || ' ' || (r.replaced_at IS NULL)::text || ' ' ||
		       coalesce(r.own_expiry_source::text, '-') || ' ' || r.payload::text
		FROM (SELECT 'lake' AS store, dataset_id, row_id, replaced_at, own_expiry_source, payload FROM lake_rows
		      UNION ALL SELECT 'profile', dataset_id, row_id, replaced_at, own_expiry_source, payload FROM profile_rows) AS r
		WHERE r.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`, org)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// orgRowCounts counts the org's rows in each table of the registry.
func orgRowCounts(t *testing.T, db *postgres.DB, org string) map[string]int64 {
	t.Helper()
	out, err := postgres.OrgRowCounts(context.Background(), db, org)
	require.NoError(t, err)
	return out
}

// routed is the cell the router sends the org's requests to.
func (m *moveBundle) routed() *sweepBundle {
	if m.router.cellOf(m.src.caller.Org) == "cell-b" {
		return m.dst
	}
	return m.src
}

// writer ingests one row at a time into a dataset until stopped, and keeps the lines each write was acknowledged
// or refused for.
type writer struct {
	mu       sync.Mutex
	acked    []string
	refused  int
	failures []error
}

func (w *writer) write(b *sweepBundle, ds string, i int) {
	ts := b.now.Add(-time.Duration(i) * time.Minute)
	id := fmt.Sprintf("w%d", i)
	line := fmt.Sprintf(`{"timestamp":%q,"_id":%q,"v":"written during the move"}`, ts.Format(time.RFC3339), id)
	res, err := ingest(context.Background(), b.rows, b.caller, ds, rawEvents(line), catalog.IngestOptions{})
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil && res.Accepted == 1:
		w.acked = append(w.acked, id)
	case catalog.ErrorCode(err) == catalog.EUNAVAILABLE:
		w.refused++
	default:
		w.failures = append(w.failures, fmt.Errorf("write %s: %w (%+v)", id, err, res))
	}
}

// requireMoved holds the end of a move: the target holds what the source held plus the acknowledged writes, the
// source nothing of the org, the route points at the target, the chain verifies there, and the next run on the
// target deletes exactly the rows the rule expires.
func (m *moveBundle) requireMoved(t *testing.T, before []string, counts map[string]int64, w *writer) {
	t.Helper()
	ctx := context.Background()
	org := m.src.caller.Org
	w.mu.Lock()
	require.Empty(t, w.failures)
	acked := slices.Clone(w.acked)
	w.mu.Unlock()
	var kept, written []string
	for _, line := range orgContent(t, m.dst.db, org) {
		var store, ds, id string
		_, err := fmt.Sscan(line, &store, &ds, &id)
		require.NoError(t, err)
		if strings.HasPrefix(id, "w") {
			written = append(written, store+" "+id)
			continue
		}
		kept = append(kept, line)
	}
	require.Equal(t, before, kept, "the target holds every row the source held")
	var want []string
	for _, id := range acked {
		want = append(want, "lake "+id, "profile "+id)
	}
	sort.Strings(want)
	sort.Strings(written)
	require.Equal(t, want, written, "the target holds every acknowledged write, once, and no refused one")
	for table, n := range orgRowCounts(t, m.src.db, org) {
		require.Zero(t, n, "the source keeps no row of %s", table)
	}
	after := orgRowCounts(t, m.dst.db, org)
	for _, table := range []string{"datasets", "ttl_settings", "row_expirations", "dataset_holds", "dataset_expirations",
		"dataset_expiration_history", "retention_runs", "retention_run_datasets", "retention_deletions", "ttl_policies",
		"workorders", "workorder_parts"} {
		require.Equal(t, counts[table], after[table], "%s moved whole", table)
	}
	require.Greater(t, after["audit_events"], counts["audit_events"], "the move's events joined the chain")
	require.Equal(t, "cell-b", m.router.cellOf(org))
	v, err := postgres.NewAuditService(m.dst.db).Verify(ctx, org)
	require.NoError(t, err)
	require.True(t, v.Valid, "%+v", v.FirstBroken)
	require.Equal(t, after["audit_events"], v.Events)

	_, err = m.src.datasets.CreateDataset(ctx, m.src.caller, catalog.DatasetCreate{Name: "late",
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.Error(t, err, "the source refuses writes of an org that moved")
	require.Equal(t, catalog.EUNAVAILABLE, catalog.ErrorCode(err))
	_, err = ingest(ctx, m.src.rows, m.src.caller, m.live, rawEvents(`{"timestamp":"2024-10-30T00:00:00Z"}`), catalog.IngestOptions{})
	require.Equal(t, catalog.EUNAVAILABLE, catalog.ErrorCode(err), "a request for a dataset that moved is sent again, not told it is gone: %v", err)
	ds, err := postgres.NewDatasetService(m.dst.db).FindDatasetByID(ctx, m.dst.caller, m.live)
	require.NoError(t, err, "the dataset reads on the target")
	require.Equal(t, "events", ds.Name)
	m.requireNextRunExact(t)
}

// requireNextRunExact runs the target two months on: the run deletes exactly the rows the rule expires of the live
// dataset, and nothing of the held one.
func (m *moveBundle) requireNextRunExact(t *testing.T) {
	t.Helper()
	m.dst.now = m.src.now.AddDate(0, 2, 0)
	rows, history := m.dst.allRows(t), m.dst.history(t)
	wantDeleted := map[string]int64{}
	for _, r := range rows {
		if r.dataset == m.live && retention.Expired(r.row, history[r.dataset], m.dst.now) {
			wantDeleted[r.dataset]++
		}
	}
	require.Positive(t, wantDeleted[m.live])
	removed := m.dst.sweep(t, "00000000-0000-0000-0000-00000000e0e0", retention.Period{}, true)
	require.Equal(t, wantDeleted[m.live], removed[m.live], "the next run on the target deletes exactly the expired rows")
	require.Zero(t, removed[m.held], "the hold came along")
	m.dst.requireCountersExact(t)
}

// TestMoveCopiesAnOrgWhileAClientWrites moves an org while a client writes: writes before the fence are in the
// copy, writes while fenced are refused with EUNAVAILABLE (503 and Retry-After in the API) and reads go on.
func TestMoveCopiesAnOrgWhileAClientWrites(t *testing.T) {
	t.Parallel()
	m := setupMove(t, 400)
	ctx := context.Background()
	org := m.src.caller.Org
	before, counts := orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
	w := &writer{}
	w.write(m.src, m.live, 0)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
				w.write(m.routed(), m.live, i) // the client follows the org's route, as the proxy sends it
			}
		}
	}()
	var fencedWrite, fencedRead, fencedPolicy error
	move := &postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router,
		AfterStep: func(step string) error {
			if step == "fenced" {
				_, fencedWrite = ingest(ctx, m.src.rows, m.src.caller, m.live, rawEvents(`{"timestamp":"2024-10-30T00:00:00Z"}`), catalog.IngestOptions{})
				fencedPolicy = m.src.policies.SetLimits(ctx, org, catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer},
					catalog.Limits{Min: period(t, "P2D"), Default: period(t, "P6M")})
				_, fencedRead = m.src.rows.FindRows(ctx, m.src.caller, m.live, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 10})
			}
			return nil
		}}
	rep, err := move.Run(ctx)
	close(stop)
	<-done
	require.NoError(t, err)
	require.Equal(t, []string{"precopied", "fenced", "copied", "verified", "switched", "done", "completed"}, rep.Steps)
	require.Equal(t, catalog.EUNAVAILABLE, catalog.ErrorCode(fencedWrite), "a write while fenced is refused: %v", fencedWrite)
	require.Equal(t, catalog.EUNAVAILABLE, catalog.ErrorCode(fencedPolicy), "an operator's change of the org's limits too: %v", fencedPolicy)
	require.NoError(t, fencedRead, "reads go on while fenced")
	require.NotEmpty(t, w.acked)
	require.Equal(t, 2, rep.Datasets)
	m.requireMoved(t, before, counts, w)
}

// TestMoveKilledAtEachStepResumes cuts a move after each of four steps, as a kill of the tool would (every step
// commits before the next begins), and runs it again: it ends moved, with nothing lost or twice. Cut after the copy
// made before the fence, the org's writes pass, and the one acknowledged then is caught up.
func TestMoveKilledAtEachStepResumes(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"precopied", "fenced", "copied", "switched"} {
		t.Run(cases[cut], func(t *testing.T) {
			t.Parallel()
			m := setupMove(t, 60)
			ctx := context.Background()
			org := m.src.caller.Org
			before, counts := orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
			killed := errors.New("killed")
			move := &postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router,
				AfterStep: func(step string) error {
					if step == cut {
						return killed
					}
					return nil
				}}
			_, err := move.Run(ctx)
			require.ErrorIs(t, err, killed)
			w := &writer{}
			w.write(m.src, m.live, 1)
			if cut == "precopied" {
				require.Len(t, w.acked, 1, "before the fence, the org's writes pass")
			} else {
				require.Empty(t, w.acked, "the org's writes stay refused while the move is cut")
				require.Equal(t, 1, w.refused)
			}
			move.AfterStep = nil
			rep, err := move.Run(ctx)
			require.NoError(t, err)
			require.Equal(t, "completed", rep.Steps[len(rep.Steps)-1])
			m.requireMoved(t, before, counts, w)
		})
	}
}

var cases = map[string]string{"precopied": "BeforeTheFence", "fenced": "AfterTheFence", "copied": "AfterTheCatchUp",
	"switched": "AfterTheSwitch"}

// TestMoveRefusesATargetHoldingTheOrg: a move goes only into a cell holding nothing of the org.
func TestMoveRefusesATargetHoldingTheOrg(t *testing.T) {
	t.Parallel()
	m := setupMove(t, 10)
	m.dst.newDataset(t, "already here")
	move := &postgres.OrgMove{Org: m.src.caller.Org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router}
	_, err := move.Run(context.Background())
	require.Equal(t, catalog.ECONFLICT, catalog.ErrorCode(err), "%v", err)
	w := &writer{}
	w.write(m.src, m.live, 1)
	require.Len(t, w.acked, 1, "a refused move leaves the org's writes alone")
}

// TestMoveWaitsForARunInFlight: a run that listed the org's datasets before the fence ends on the source before the
// copy, and its history and Expire events move with the org; a run listed while the org drains leaves it out.
func TestMoveWaitsForARunInFlight(t *testing.T) {
	t.Parallel()
	m := setupMove(t, 100)
	ctx := context.Background()
	org := m.src.caller.Org
	runs := postgres.NewRunRepository(m.src.db)
	m.src.now = m.src.now.Add(24 * time.Hour)
	inFlight, err := runs.CreateManualRun(ctx, m.src.caller, catalog.RunRequest{Store: catalog.LakeHouse}, retention.Period{})
	require.NoError(t, err)
	plan, err := runs.PrepareRun(ctx, inFlight)
	require.NoError(t, err)
	require.NotEmpty(t, plan.Pending)
	var expiresBefore int
	require.NoError(t, m.src.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE org_id = $1 AND action = 'Expire'`, org).Scan(&expiresBefore))
	var waited int
	var later *catalog.Plan
	move := &postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router,
		RunPoll: time.Millisecond, RunWait: time.Minute, // the bound turns a run that never ends into a failure, not a hang
		Logf: func(format string, args ...any) {
			if !strings.Contains(fmt.Sprintf(format, args...), "waiting for runs") {
				return
			}
			waited++
			// A run listed now, while the org drains, leaves its datasets out.
			id, _, err := runs.CreateScheduledRun(ctx, catalog.Profile, m.src.now, retention.Period{})
			require.NoError(t, err)
			later, err = runs.PrepareRun(ctx, id)
			require.NoError(t, err)
			sw := postgres.Sweep{RunID: inFlight, Store: catalog.LakeHouse, At: m.src.now}
			for _, ds := range plan.Pending {
				_, err := m.src.sweeper.SweepDataset(ctx, sw, ds)
				require.NoError(t, err)
				_, err = runs.FinishDataset(ctx, inFlight, ds, catalog.Outcome{})
				require.NoError(t, err)
			}
			plan.Pending = nil
		}}
	_, err = move.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, waited, "the move waited for the run once, and went on when it ended")
	require.NotNil(t, later)
	require.Empty(t, later.Pending, "a run listed while the org drains leaves its datasets out")
	var status string
	var parts, expires int
	require.NoError(t, m.dst.db.Pool.QueryRow(ctx, `SELECT r.status, (SELECT count(*) FROM retention_run_datasets d WHERE d.run_id = r.id),
		(SELECT count(*) FROM audit_events e WHERE e.org_id = $2 AND e.action = 'Expire')
		FROM retention_runs r WHERE r.id = $1`, inFlight, org).Scan(&status, &parts, &expires))
	require.Equal(t, "succeeded", status, "the run ended on the source and its record moved")
	require.Equal(t, 2, parts)
	require.Equal(t, expiresBefore+2, expires, "the run's Expire events moved with the chain")
	v, err := postgres.NewAuditService(m.dst.db).Verify(ctx, org)
	require.NoError(t, err)
	require.True(t, v.Valid)
}

// TestMoveOfAHundredThousandRows is the move of an org with 100,000 rows (50,000 a dataset, with a hold, an
// expiration and a run's history) while a client writes (the benchmark moves 1M).
func TestMoveOfAHundredThousandRows(t *testing.T) {
	t.Parallel()
	m := setupMove(t, 50_000)
	ctx := context.Background()
	org := m.src.caller.Org
	before, counts := orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
	w := &writer{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				w.write(m.routed(), m.live, i)
			}
		}
	}()
	rep, err := (&postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router}).Run(ctx)
	close(stop)
	<-done
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Copied["lake_rows"], counts["lake_rows"])
	m.requireMoved(t, before, counts, w)
}

// chunksToCatchUp counts the chunks of the org's rows (one dataset, one partition and one of 64 buckets of the _id's
// hash, as the move names them) that differ between the source and the target's copy, by the catch-up's rule: on
// the source, a row whose xmin is at or after the watermark the copy recorded on the target, or a count that
// differs from the target's. The test clusters are young, so xmin has not wrapped.
func chunksToCatchUp(t *testing.T, src, dst *postgres.DB, org string) int {
	t.Helper()
	ctx := context.Background()
	var watermark int64
	require.NoError(t, dst.Pool.QueryRow(ctx, `SELECT (counts->>'watermark')::bigint FROM org_moves
		WHERE org_id = $1 AND role = 'target' AND step <> 'done'`, org).Scan(&watermark))
	type chunk struct {
		rows  int64
		fresh bool
	}
	read := func(db *postgres.DB) map[string]chunk {
		rows, err := db.Pool.Query(ctx, `SELECT c, count(*), bool_or(x >= $2) FROM (
			SELECT t.tableoid::regclass::text || '/' || t.dataset_id || '/' || (hashtext(t.row_id) & 63)::text AS c, t.xmin::text::bigint AS x
			FROM lake_rows t WHERE t.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)
			UNION ALL
			SELECT t.tableoid::regclass::text || '/' || t.dataset_id || '/' || (hashtext(t.row_id) & 63)::text, t.xmin::text::bigint
			FROM profile_rows t WHERE t.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)) r GROUP BY c`, org, watermark%(1<<32))
		require.NoError(t, err)
		out := map[string]chunk{}
		var k string
		var c chunk
		_, err = pgx.ForEachRow(rows, []any{&k, &c.rows, &c.fresh}, func() error { out[k] = c; return nil })
		require.NoError(t, err)
		return out
	}
	theirs, ours := read(src), read(dst)
	n := 0
	for k, c := range theirs {
		if c.fresh || c.rows != ours[k].rows {
			n++
		}
	}
	for k := range ours {
		if _, ok := theirs[k]; !ok {
			n++
		}
	}
	return n
}

// orgQuery runs a query of one text column over the org's data and returns its lines, sorted.
func orgQuery(t *testing.T, db *postgres.DB, org, sql string) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), sql, org)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// Each row of the org with the TTL setting it was stored under (ids differ between cells; what they name may not),
// the org's TTL settings, its row partitions, and its audit events as the chain links them.
const (
	rowSettingsSQL = `SELECT r.row_id || ' ' || coalesce(s.ttl::text, 'none') || ' ' || s.effective_from::text || ' ' || r.tableoid::regclass::text
		FROM lake_rows r JOIN ttl_settings s ON s.id = r.setting_id WHERE r.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`
	settingsSQL = `SELECT s.dataset_id || ' ' || s.store || ' ' || coalesce(s.ttl::text, 'none') || ' ' || s.effective_from::text || ' ' ||
		coalesce(s.effective_until::text, 'current') FROM ttl_settings s WHERE s.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`
	partitionsSQL = `SELECT DISTINCT r.tableoid::regclass::text FROM lake_rows r WHERE r.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`
	eventsSQL     = `SELECT lpad(e.seq::text, 8, '0') || ' ' || coalesce(e.hash, 'unchained') FROM audit_events e WHERE e.org_id = $1`
)

// TestMoveCatchesUpWhatChangedBeforeTheFence changes the org between the copy made before the fence and the fence:
// a row sent again with its _id and timestamp (its chunk keeps its count, only its content changes), a row deleted,
// a TTL changed, rows stored under the new TTL (one into a partition the copy did not have), and a new dataset with
// rows. The target ends equal to the source as it was at the fence: rows, the setting each is stored under,
// settings, counts of every table and the audit chain; the catch-up copied again only the chunks that changed; the
// move's audit events say what it caught up and how long writes were refused; and the next run on the target
// deletes exactly what the rule expires.
func TestMoveCatchesUpWhatChangedBeforeTheFence(t *testing.T) {
	t.Parallel()
	m := setupMove(t, 300)
	ctx := context.Background()
	org := m.src.caller.Org
	var r7 time.Time
	require.NoError(t, m.src.db.Pool.QueryRow(ctx, `SELECT ts FROM lake_rows WHERE dataset_id = $1 AND row_id = 'r7'`, m.live).Scan(&r7))
	var partitionsCopied, content, rowSettings, settings, events []string
	var counts map[string]int64
	var toCatchUp int
	move := &postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: m.router,
		AfterStep: func(step string) error {
			switch step {
			case "precopied":
				partitionsCopied = orgQuery(t, m.dst.db, org, partitionsSQL)
				m.src.resend(t, m.live, "r7", r7, "sent again after the copy")
				require.NoError(t, m.src.rows.DeleteRow(ctx, m.src.caller, m.live, "r9"))
				m.src.setTTL(t, m.live, "P2M")
				m.src.ingestLines(t, m.live, `{"timestamp":"2024-10-30T12:00:00Z","_id":"late-1","v":"after the copy"}`,
					`{"timestamp":"2024-10-30T13:00:00Z","_id":"late-far","_ttl":"P3Y"}`)
				fresh := m.src.newDataset(t, "created after the copy")
				m.src.ingestLines(t, fresh, `{"timestamp":"2024-10-30T12:00:00Z","_id":"new-1"}`, `{"timestamp":"2024-10-29T12:00:00Z","_id":"new-2"}`)
			case "fenced":
				toCatchUp = chunksToCatchUp(t, m.src.db, m.dst.db, org)
				content, counts = orgContent(t, m.src.db, org), orgRowCounts(t, m.src.db, org)
				rowSettings, settings = orgQuery(t, m.src.db, org, rowSettingsSQL), orgQuery(t, m.src.db, org, settingsSQL)
				events = orgQuery(t, m.src.db, org, eventsSQL)
			}
			return nil
		}}
	rep, err := move.Run(ctx)
	require.NoError(t, err)
	far := orgQuery(t, m.dst.db, org, `SELECT r.tableoid::regclass::text FROM lake_rows r
		WHERE r.row_id = 'late-far' AND r.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`)
	require.Len(t, far, 1)
	require.NotContains(t, partitionsCopied, far[0], "a row went into a partition the copy lacked")
	require.True(t, slices.ContainsFunc(content, func(line string) bool {
		return strings.HasPrefix(line, "lake "+m.live+" r7 ") && strings.Contains(line, "sent again after the copy")
	}), "the row sent again is in the source at the fence")

	require.Equal(t, content, orgContent(t, m.dst.db, org), "the target holds the rows the source held at the fence")
	require.Equal(t, rowSettings, orgQuery(t, m.dst.db, org, rowSettingsSQL), "each row under the setting it was stored under")
	require.Equal(t, settings, orgQuery(t, m.dst.db, org, settingsSQL), "the TTL settings as at the fence")
	after := orgRowCounts(t, m.dst.db, org)
	for table, n := range counts {
		if table != "audit_events" {
			require.Equal(t, n, after[table], "%s as at the fence", table)
		}
	}
	moved := orgQuery(t, m.dst.db, org, eventsSQL)
	require.Len(t, moved, len(events)+2, "the chain as at the fence, then the verified and completed events")
	require.Equal(t, events, moved[:len(events)])

	// Exactly the chunks that differ by the catch-up's rule are copied again. How many that is depends on the whole
	// cluster: the watermark is the oldest transaction running anywhere in it, and other tests' transactions can
	// hold it back to before this org's first row, when every chunk counts as changed (a false alarm that costs
	// time, never a row); on an idle cluster it is fewer than all.
	require.Positive(t, rep.ChunksChanged)
	require.Equal(t, toCatchUp, rep.ChunksChanged, "the catch-up copied again the chunks that changed, and only those")
	require.Positive(t, rep.CaughtUp["lake_rows"])
	require.LessOrEqual(t, rep.CaughtUp["lake_rows"], counts["lake_rows"])
	require.Positive(t, rep.CaughtUp["audit_events"], "the events written since the copy")

	var verified, completed map[string]any
	require.NoError(t, m.dst.db.Pool.QueryRow(ctx, `SELECT
		(SELECT details FROM audit_events WHERE org_id = $1 AND action = 'Move' AND details->>'step' = 'verified'),
		(SELECT details FROM audit_events WHERE org_id = $1 AND action = 'Move' AND details->>'step' = 'completed')`, org).Scan(&verified, &completed))
	require.EqualValues(t, rep.ChunksChanged, verified["chunksChanged"])
	require.EqualValues(t, rep.CaughtUp["lake_rows"], verified["caughtUp"].(map[string]any)["lake_rows"])
	require.Contains(t, verified, "writesRefusedSoFarMs")
	require.EqualValues(t, rep.Fenced.Milliseconds(), completed["writesRefusedMs"], "the completed event says how long writes were refused")
	var precopied int
	require.NoError(t, m.dst.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE org_id = $1 AND action = 'Move' AND details->>'step' = 'precopied'`, org).Scan(&precopied))
	require.Equal(t, 1, precopied, "the source's event of the copy came along")
	m.requireNextRunExact(t)
}

// drainingRouter is a mapRouter that can drain, as HAProxy's Router does; it records what the source held when the
// move drained it, and fails each drain with err when set.
type drainingRouter struct {
	*mapRouter
	src              *postgres.DB
	org              string
	err              error
	drains           []string
	routedTo         []string
	datasetsAtDrains []int
}

func (r *drainingRouter) Drain(ctx context.Context, keep string) (int, error) {
	var datasets int
	if err := r.src.Pool.QueryRow(ctx, `SELECT count(*) FROM datasets WHERE org_id = $1`, r.org).Scan(&datasets); err != nil {
		return 0, err
	}
	r.drains, r.routedTo = append(r.drains, keep), append(r.routedTo, r.cellOf(r.org))
	r.datasetsAtDrains = append(r.datasetsAtDrains, datasets)
	return 1, r.err
}

// TestMoveDrainsTheSourceBeforeRemovingTheOrg: after the switch, and before the org leaves the source, the move
// waits for the requests the router forwarded to other cells, so that a read routed to the source just before the
// switch still finds the org there; a drain that fails delays nothing it guards and stops no move.
func TestMoveDrainsTheSourceBeforeRemovingTheOrg(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{{"Drained", nil}, {"NotDrainedInTime", context.DeadlineExceeded}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := setupMove(t, 10)
			ctx := context.Background()
			org := m.src.caller.Org
			r := &drainingRouter{mapRouter: m.router, src: m.src.db, org: org, err: tc.err}
			var logged []string
			_, err := (&postgres.OrgMove{Org: org, Source: m.src.db, Target: m.dst.db, TargetCell: "cell-b", Router: r,
				Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}).Run(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"cell-b"}, r.drains, "one drain, keeping the target's requests")
			require.Equal(t, []string{"cell-b"}, r.routedTo, "drained after the switch")
			require.Equal(t, []int{2}, r.datasetsAtDrains, "drained before the org left the source")
			var left int
			require.NoError(t, m.src.db.Pool.QueryRow(ctx, `SELECT count(*) FROM datasets WHERE org_id = $1`, org).Scan(&left))
			require.Zero(t, left, "the org left the source after the drain")
			want := "1 requests in flight to other cells at the switch, ended"
			if tc.err != nil {
				want = "not all ended (context deadline exceeded): removing the org from the source all the same"
			}
			require.True(t, slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, want) }), "%q", logged)
		})
	}
}
