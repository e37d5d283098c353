package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// The property test of the expiry rule: on generated scenarios, what reads show, previews count and runs delete is
// exactly what the Go model (retention/expiry.go) says, and the counters and the ledger account for every row.
//
// A scenario is drawn whole from its seed before it is played (drawScenario), so a seed is a scenario: the first
// six are the six the test ran before it became a generator, drawn as they were; the others draw 1 to 4 datasets,
// a TTL history for each (set, shortened, lengthened, disabled with null, enabled again), rows with and without
// overrides (_expiresAt, _ttl, _ttl: -1), imported rows with their own _ingestedAt, re-sent _ids, a grace of P0D or
// more, a deleted dataset, runs cut off after a few batches and finished by a retry, and, one scenario in five,
// event times, TTLs and clock moves of decades and centuries. One dataset in three is a record dataset, whose TTLs
// count from each row's last write: its lines carry no timestamp, and a re-sent _id must restart its row's clock.
//
// make test runs the first proptestDefault seeds; PROPTEST_N sets how many (make proptest: 1,000), PROPTEST_SEED
// runs one. A failing scenario prints its seed and the command that runs it alone.

const (
	proptestDefault = 50
	classicSeeds    = 6 // the scenarios of the test before the generator, drawn by drawClassic
)

// scenarioStats is what the scenarios of one run exercised, for the summary line and the coverage checks.
type scenarioStats struct {
	scenarios, failures, rows, drops, interrupted, kept, removed, centuries, imports, resent, deletedDatasets, records atomic.Int64
	workOrders, erased, racingChanges                                                                                  atomic.Int64
}

// TestExpiryScenarios plays the generated scenarios, each on a database of its own.
func TestExpiryScenarios(t *testing.T) {
	t.Parallel()
	seeds := proptestSeeds(t)
	var stats scenarioStats
	start := time.Now()
	t.Run("Scenarios", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
				t.Parallel()
				defer func() {
					if t.Failed() {
						stats.failures.Add(1)
						t.Logf("scenario %d failed; run it alone with: PROPTEST_SEED=%d make test PKG=./postgres/ TESTFLAGS='-run TestExpiryScenarios -v'", seed, seed)
					}
				}()
				playScenario(t, drawScenario(seed), &stats)
			})
		}
	})
	t.Logf("expiry property test: %d scenarios, %d rows, %s, failures: %d (drops in %d, interrupted runs %d, centuries %d, record datasets %d, work orders %d erasing %d rows, changes at an ingestion's instant %d)",
		stats.scenarios.Load(), stats.rows.Load(), time.Since(start).Round(time.Second), stats.failures.Load(),
		stats.drops.Load(), stats.interrupted.Load(), stats.centuries.Load(), stats.records.Load(), stats.workOrders.Load(), stats.erased.Load(), stats.racingChanges.Load())
	if len(seeds) >= proptestDefault && !t.Failed() {
		for name, n := range map[string]int64{"whole-partition drops": stats.drops.Load(), "interrupted runs": stats.interrupted.Load(),
			"rows kept": stats.kept.Load(), "rows removed": stats.removed.Load(), "centuries": stats.centuries.Load(),
			"imported rows": stats.imports.Load(), "re-sent ids": stats.resent.Load(), "deleted datasets": stats.deletedDatasets.Load(),
			"record datasets": stats.records.Load(), "work orders": stats.workOrders.Load(), "rows erased by work orders": stats.erased.Load(),
			"changes at an ingestion's instant": stats.racingChanges.Load()} {
			require.Positive(t, n, "the scenarios exercise %s", name)
		}
	}
}

// proptestSeeds returns the seeds to play: PROPTEST_SEED alone, else the first PROPTEST_N (default proptestDefault).
func proptestSeeds(t *testing.T) []uint64 {
	t.Helper()
	if s := os.Getenv("PROPTEST_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PROPTEST_SEED")
		return []uint64{seed}
	}
	n := proptestDefault
	if s := os.Getenv("PROPTEST_N"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "PROPTEST_N")
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i)
	}
	return seeds
}

// scenario is one drawn case: the steps that build its datasets, then one run at the end.
type scenario struct {
	seed      uint64
	classic   bool // one of the six scenarios of the test before the generator: it must exercise drops
	datasets  int
	records   []bool // per dataset: a record dataset, its TTLs counted from each row's last write
	steps     []step
	grace     retention.Period
	advance   time.Duration // from the last step to the run's evaluation time
	config    postgres.SweepConfig
	boundary  bool // the run walks the partitions placed by its time (SweepPlaced) before the per-dataset pass
	stopAfter int  // >0: the run is cut off after this many removal transactions, then retried to the end
	centuries bool
}

type stepKind int

const (
	stepSetTTL stepKind = iota
	stepIngest
	stepAdvance
	stepDelete
)

// step is one action of a scenario, on dataset ds (an index).
type step struct {
	kind    stepKind
	ds      int
	ttl     any      // setTTL: a period string, or nil for none
	lines   []string // ingest: NDJSON events
	resent  int      // ingest: how many of them carry an _id an earlier ingestion stored
	imports bool     // ingest: _ingestedAt allowed
	d       time.Duration
	behind  time.Duration // setTTL: the change's clock is this far behind the scenario's, as a replica's may be
}

// scenarioStart is the clock's time when a scenario begins, as setupSweep sets it.
var scenarioStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// drawScenario draws the scenario of a seed.
func drawScenario(seed uint64) scenario {
	if seed < classicSeeds {
		return drawClassic(seed)
	}
	rng := rand.New(rand.NewPCG(seed, 2017))
	sc := scenario{seed: seed, datasets: 1 + rng.IntN(4), centuries: rng.IntN(5) == 0}
	// Drawn apart, so that every draw of rng, and so every scenario drawn before record datasets, stays as it was.
	behaviors := rand.New(rand.NewPCG(seed, 2026))
	racing := rand.New(rand.NewPCG(seed, 3232))
	sc.records = make([]bool, sc.datasets)
	for i := range sc.records {
		sc.records[i] = behaviors.IntN(3) == 0
	}
	now := scenarioStart
	overrides := make([]bool, sc.datasets)
	imports := make([]bool, sc.datasets)
	for i := range sc.datasets {
		overrides[i], imports[i] = rng.IntN(3) != 0, rng.IntN(3) == 0
	}
	ttls := ttlChoices
	if sc.centuries {
		ttls = append(slices.Clone(ttlChoices), "P50Y", "P100Y", "P300Y")
	}
	for epoch := range 1 + rng.IntN(3) {
		for ds := range sc.datasets {
			if rng.IntN(2) == 0 {
				sc.steps = append(sc.steps, step{kind: stepSetTTL, ds: ds, ttl: ttls[rng.IntN(len(ttls))]})
			}
			if rng.IntN(5) != 0 {
				lines, resent := drawLines(rng, now, epoch, 5+rng.IntN(30), lineKind{overrides[ds], imports[ds], sc.centuries, sc.records[ds]})
				sc.steps = append(sc.steps, step{kind: stepIngest, ds: ds, lines: lines, resent: resent, imports: imports[ds]})
				if racing.IntN(4) == 0 {
					// A change at the ingestion's instant, or with a clock read before it: the rows were stored under
					// the setting it ends, which never judged them.
					behind := time.Duration(racing.IntN(3)) * time.Minute
					sc.steps = append(sc.steps, step{kind: stepSetTTL, ds: ds, ttl: ttls[racing.IntN(len(ttls))], behind: behind})
				}
			}
			d := time.Duration(rng.IntN(60*24)) * time.Hour
			if sc.centuries && rng.IntN(3) == 0 {
				d = time.Duration(rng.IntN(40*365)) * 24 * time.Hour
			}
			sc.steps = append(sc.steps, step{kind: stepAdvance, d: d})
			now = now.Add(d)
		}
	}
	if rng.IntN(2) == 0 {
		sc.steps = append(sc.steps, step{kind: stepDelete, ds: rng.IntN(sc.datasets)})
	}
	switch rng.IntN(3) {
	case 1:
		sc.grace = retention.Period{Days: 30}
	case 2:
		sc.grace = retention.Period{Days: int64(1 + rng.IntN(90))}
	}
	sc.advance = time.Duration(rng.IntN(200*24)) * time.Hour
	if sc.centuries && rng.IntN(2) == 0 {
		sc.advance = time.Duration(rng.IntN(200*365)) * 24 * time.Hour
	}
	sc.config = postgres.SweepConfig{BatchSize: 5 + rng.IntN(60), DropBatch: 1 + rng.IntN(3), Workers: 1 + rng.IntN(2)}
	sc.boundary = rng.IntN(3) != 0
	if rng.IntN(3) == 0 {
		sc.stopAfter = 1 + rng.IntN(6)
	}
	return sc
}

var ttlChoices = []any{"P1M", "P3M", "P6M", "P12M", "P2Y", "P45D", nil}

// drawClassic draws one of the six scenarios of the test before the generator, with the same random draws in the
// same order: four datasets over four epochs, 60 rows each time, the second without overrides, the third with
// imports, the fourth deleted at the end.
func drawClassic(seed uint64) scenario {
	rng := rand.New(rand.NewPCG(seed, 99))
	sc := scenario{seed: seed, classic: true, datasets: 4, records: make([]bool, 4), boundary: seed%3 != 0,
		config: postgres.SweepConfig{BatchSize: 37, DropBatch: 1 + int(seed%3), Workers: 1 + int(seed/2)}}
	now := scenarioStart
	for epoch := range 4 {
		for ds := range 4 {
			if rng.IntN(2) == 0 {
				sc.steps = append(sc.steps, step{kind: stepSetTTL, ds: ds, ttl: ttlChoices[rng.IntN(len(ttlChoices))]})
			}
			lines, resent := drawLines(rng, now, epoch, 60, lineKind{overrides: ds != 1, imports: ds == 2})
			sc.steps = append(sc.steps, step{kind: stepIngest, ds: ds, lines: lines, resent: resent, imports: ds == 2})
			d := time.Duration(rng.IntN(60*24)) * time.Hour
			sc.steps = append(sc.steps, step{kind: stepAdvance, d: d})
			now = now.Add(d)
		}
	}
	sc.steps = append(sc.steps, step{kind: stepDelete, ds: 3})
	if seed%2 == 1 {
		sc.grace = retention.Period{Days: 30}
	}
	sc.advance = time.Duration(rng.IntN(200*24)) * time.Hour
	return sc
}

// lineKind is what drawLines may put in the lines of one dataset.
type lineKind struct {
	overrides, imports, centuries bool
	// record: lines of a record dataset, without a timestamp: the row's write is its clock, and an _expiresAt is
	// drawn after it.
	record bool
}

// drawLines draws n events at now: event times up to two years back (a century and a half with centuries),
// overrides one row in eight each when allowed, an original ingestion time one row in three with imports, and a
// re-sent _id (replacing an earlier epoch's row) one row in ten; it returns them and how many are re-sent. Record
// lines draw the same, so that a scenario's other draws do not depend on its datasets' behaviors.
func drawLines(rng *rand.Rand, now time.Time, epoch, n int, kind lineKind) (lines []string, resent int) {
	overrides, imports, centuries := kind.overrides, kind.imports, kind.centuries
	lines = make([]string, 0, n)
	for i := range n {
		back := time.Duration(rng.IntN(2*365*24)) * time.Hour
		if centuries {
			back = time.Duration(rng.IntN(150*365)) * 24 * time.Hour
		}
		ts := now.Add(-back)
		if earliest := time.Date(1900, 1, 2, 0, 0, 0, 0, time.UTC); ts.Before(earliest) {
			ts = earliest
		}
		extra, written := "", now
		if imports && rng.IntN(3) == 0 {
			written = now.Add(-time.Duration(rng.IntN(200*24)) * time.Hour)
			extra = fmt.Sprintf(`,"_ingestedAt":%q`, written.Format(time.RFC3339))
		}
		if kind.record {
			ts = written // an _expiresAt counts from the row's clock start, as the limits do
		}
		choice := rng.IntN(8)
		if !overrides {
			choice = 7
		}
		switch choice {
		case 0:
			days := 1 + rng.IntN(400)
			if centuries {
				days *= 1 + rng.IntN(300)
			}
			extra += fmt.Sprintf(`,"_expiresAt":%q`, ts.AddDate(0, 0, days).Format(time.RFC3339))
		case 1:
			extra += fmt.Sprintf(`,"_ttl":"P%dD"`, 1+rng.IntN(300))
		case 2:
			extra += `,"_ttl":-1`
		}
		rowID := fmt.Sprintf("e%d-%d", epoch, i)
		if rng.IntN(10) == 0 {
			rowID = fmt.Sprintf("e0-%d", i) // re-sent: replaces the earlier row
			if epoch > 0 {
				resent++
			}
		}
		extra += fmt.Sprintf(`,"identityMap":{"email":[{"id":"p%d@example.com"}]}`, personOf(rowID))
		if kind.record {
			lines = append(lines, fmt.Sprintf(`{"_id":%q%s}`, rowID, extra))
			continue
		}
		lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"_id":%q%s}`, ts.Format(time.RFC3339), rowID, extra))
	}
	return lines, resent
}

// playScenario builds the scenario's datasets, then checks reads and previews against the Go rule, runs a sweep
// (cut off and retried when the scenario says so), and checks what it left, counted and recorded.
func playScenario(t *testing.T, sc scenario, stats *scenarioStats) {
	b := setupSweep(t)
	b.sweeper = postgres.MustSweeper(b.db, sc.config)
	ids, deleted, writes := b.build(t, sc, stats)
	b.requireSentFields(t, sentFields(t, sc, ids))
	for _, key := range b.playWorkOrder(t, sc, ids, deleted, stats) {
		delete(writes, key) // erased: no longer stored
	}
	b.now = b.now.Add(sc.advance)
	before := b.allRows(t)
	requireLastWriteClocks(t, before, writes)
	if len(writes) > 0 {
		stats.records.Add(1)
	}
	stats.scenarios.Add(1)
	stats.rows.Add(int64(len(before)))
	history := b.history(t)
	var wantKept, wantVisible []string
	wantRemoved := map[string]int64{}
	for _, r := range before {
		key := r.dataset + "/" + r.id
		if !deleted[r.dataset] && !retention.Expired(r.row, history[r.dataset], b.now) {
			wantVisible = append(wantVisible, key)
		}
		if deleted[r.dataset] || retention.Deletable(r.row, history[r.dataset], b.now, sc.grace) {
			wantRemoved[r.dataset]++
			continue
		}
		wantKept = append(wantKept, key)
	}
	if sc.classic {
		require.NotEmpty(t, wantKept)
		require.NotEmpty(t, wantRemoved)
	}
	var live []string
	for _, id := range ids {
		if !deleted[id] {
			live = append(live, id)
		}
	}
	var visible []string
	for _, id := range live {
		page, err := b.rows.FindRows(context.Background(), b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 100000})
		require.NoError(t, err)
		for _, r := range page.Rows {
			visible = append(visible, id+"/"+r.ID)
		}
	}
	require.ElementsMatch(t, wantVisible, visible, "reads hide exactly the expired rows")

	b.requirePreviewsExact(t, live, before, history, sc.grace)
	for _, id := range live {
		b.requireBacklog(t, id)
	}

	// A partition detached by a run that stopped before dropping it goes with this sweep's drops.
	_, err := b.db.Pool.Exec(context.Background(), `CREATE TABLE lake_rows_p200001_gone1 (LIKE lake_rows)`)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(context.Background(), `INSERT INTO detached_partitions VALUES ('lake_rows_p200001_gone1', $1)`, b.now.Add(-time.Hour))
	require.NoError(t, err)
	runID := fmt.Sprintf("00000000-0000-0000-0000-%012d", sc.seed)
	removed, stopped := b.sweepScenario(t, sc, runID)
	var waiting int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM detached_partitions`).Scan(&waiting))
	released := b.release(t)
	var drops int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT partition_name) FILTER (WHERE dropped) FROM retention_deletions WHERE run_id = $1`, runID).Scan(&drops))
	t.Logf("seed %d: rows %d, kept %d, removed %v, partitions dropped %d, run cut off and retried %v", sc.seed, len(before), len(wantKept), wantRemoved, drops, stopped)
	if sc.classic {
		require.Positive(t, drops, "the scenario exercises whole-partition drops")
	}
	require.GreaterOrEqual(t, waiting, drops+1, "every partition the sweep dropped waits for its release, as does the leftover")
	require.Equal(t, waiting, released, "the release drops them all")
	var leftover int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM detached_partitions)
				+ (SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'lake\_rows\_p%\_gone%')`).Scan(&leftover))
	require.Zero(t, leftover, "every detached partition is dropped")
	var kept []string
	for _, r := range b.allRows(t) {
		kept = append(kept, r.dataset+"/"+r.id)
	}
	slices.Sort(kept)
	slices.Sort(wantKept)
	require.Equal(t, wantKept, kept, "the sweep deletes exactly the deletable rows%s", b.leftLate(t, wantKept, kept))
	for ds, n := range wantRemoved {
		require.Equal(t, n, removed[ds], "sweep result of %s", ds)
		var ledger int64
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT coalesce(sum(rows_deleted), 0) FROM retention_deletions WHERE run_id = $1 AND dataset_id = $2`, runID, ds).Scan(&ledger))
		require.Equal(t, n, ledger, "ledger of %s", ds)
	}
	b.requireCountersExact(t)
	again := b.sweep(t, strings.Replace(runID, "0000-0000-0000", "0000-0000-0001", 1), sc.grace, false)
	for ds, n := range again {
		require.Zero(t, n, "a second sweep at the same time finds nothing more in %s", ds)
	}

	stats.kept.Add(int64(len(wantKept)))
	stats.removed.Add(int64(len(before) - len(wantKept)))
	if drops > 0 {
		stats.drops.Add(1)
	}
	if stopped {
		stats.interrupted.Add(1)
	}
	if sc.centuries {
		stats.centuries.Add(1)
	}
}

// leftLate describes, for a failure message, the first row the sweep kept that the rule says it may delete: its
// columns, its partition and the settings of its dataset.
func (b *sweepBundle) leftLate(t *testing.T, wantKept, kept []string) string {
	t.Helper()
	for _, k := range kept {
		if slices.Contains(wantKept, k) {
			continue
		}
		ds, id, _ := strings.Cut(k, "/")
		var row, settings string
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `
			SELECT format('%s: ts %s, ingested %s, own expiry %s, never %s, placed %s in %s under setting %s',
			              r.row_id, r.ts, r.ingested_at, r.own_expiry, r.never_expires, r.placed_expiry, r.tableoid::regclass, r.setting_id),
			       (SELECT string_agg(format('%s: %s from %s until %s', h.id, coalesce(h.ttl::text, 'null'), h.effective_from, h.effective_until), '; ' ORDER BY h.id)
			        FROM ttl_settings h WHERE h.dataset_id = r.dataset_id AND h.store = 'adobe_lakeHouse')
			FROM lake_rows r WHERE r.dataset_id = $1 AND r.row_id = $2`, ds, id).Scan(&row, &settings))
		return fmt.Sprintf(" (at %s, %s left %s; settings %s)", b.now.Format(time.RFC3339), ds, row, settings)
	}
	return ""
}

// build plays the scenario's steps and returns its datasets' ids, which of them it deleted, and the last write of
// each row of its record datasets ("dataset/_id"), which their clocks must start from.
func (b *sweepBundle) build(t *testing.T, sc scenario, stats *scenarioStats) (ids []string, deleted map[string]bool, writes map[string]time.Time) {
	t.Helper()
	for i := range sc.datasets {
		behavior := catalog.TimeSeries
		if sc.records[i] {
			behavior = catalog.Record
		}
		ids = append(ids, b.newDatasetOf(t, fmt.Sprintf("ds%d", i), behavior))
	}
	deleted, writes = map[string]bool{}, map[string]time.Time{}
	for i, s := range sc.steps {
		switch s.kind {
		case stepSetTTL:
			now := b.now
			b.now = now.Add(-s.behind)
			b.setTTL(t, ids[s.ds], s.ttl)
			b.now = now
			if i > 0 && sc.steps[i-1].kind == stepIngest && sc.steps[i-1].ds == s.ds {
				stats.racingChanges.Add(1)
			}
		case stepIngest:
			b.ingestEvents(t, ids[s.ds], s.lines, s.imports)
			if sc.records[s.ds] {
				noteWrites(t, writes, ids[s.ds], s.lines, b.now)
			}
			for _, l := range s.lines {
				if strings.Contains(l, `"_ingestedAt"`) {
					stats.imports.Add(1)
				}
			}
			stats.resent.Add(int64(s.resent))
		case stepAdvance:
			b.now = b.now.Add(s.d)
		case stepDelete:
			_, err := b.datasets.FindDatasetByID(context.Background(), b.caller, ids[s.ds])
			require.NoError(t, err)
			require.NoError(t, b.datasets.DeleteDataset(context.Background(), b.caller, ids[s.ds]))
			deleted[ids[s.ds]] = true
			stats.deletedDatasets.Add(1)
		}
	}
	return ids, deleted, writes
}

// noteWrites records the write of each record line the dataset stored at now: its _ingestedAt when imported, else
// now. A later write of an _id replaces the earlier.
func noteWrites(t *testing.T, writes map[string]time.Time, id string, lines []string, now time.Time) {
	t.Helper()
	for _, l := range lines {
		var line struct {
			ID         string     `json:"_id"`
			IngestedAt *time.Time `json:"_ingestedAt"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &line))
		written := now
		if line.IngestedAt != nil {
			written = *line.IngestedAt
		}
		writes[id+"/"+line.ID] = written
	}
}

// requireLastWriteClocks checks the last-write clock of the record datasets' rows: each stored row is the latest
// write of its _id, and its clock starts at that write (ts = ingested_at = the write), so that a re-sent _id
// restarts it.
func requireLastWriteClocks(t *testing.T, rows []storedRow, writes map[string]time.Time) {
	t.Helper()
	seen := 0
	for _, r := range rows {
		written, ok := writes[r.dataset+"/"+r.id]
		if !ok {
			continue
		}
		seen++
		require.True(t, written.Equal(r.row.IngestedAt), "%s/%s: stored with ingestion time %s, last written %s", r.dataset, r.id, r.row.IngestedAt, written)
		require.True(t, retention.LastWrite.Start(time.Time{}, written).Equal(r.row.Timestamp), "%s/%s: its clock starts at %s, not at its last write %s",
			r.dataset, r.id, r.row.Timestamp, written)
	}
	require.Equal(t, len(writes), seen, "every record written is stored once")
}

// ingestEvents stores the NDJSON events in the dataset, all of which must be accepted.
func (b *sweepBundle) ingestEvents(t *testing.T, id string, lines []string, imports bool) {
	t.Helper()
	events := func(yield func([]byte) bool) {
		for _, l := range lines {
			if !yield([]byte(l)) {
				return
			}
		}
	}
	res, err := ingest(context.Background(), b.rows, b.caller, id, events, catalog.IngestOptions{AllowIngestedAt: imports})
	require.NoError(t, err)
	require.Zero(t, res.Rejected, "%v", res.Errors)
}

// sweepScenario runs the scenario's sweep at b.now and returns what each dataset lost by it. A run the scenario
// cuts off stops once stopAfter removal transactions have committed (its context is cancelled, as a replica's
// shutdown would, so the next statement of every worker fails and rolls back), and the same run is then tried
// again to the end; what the cut-off attempt had committed is read from the ledger, so the result is the whole
// run's. stopped reports whether the cut came before the end.
//
// It is the one place the test drives the sweeper.
func (b *sweepBundle) sweepScenario(t *testing.T, sc scenario, runID string) (removed map[string]int64, stopped bool) {
	t.Helper()
	ctx := context.Background()
	b.startRun(t, runID, sc.grace)
	sw := postgres.Sweep{RunID: runID, Store: catalog.LakeHouse, At: b.now, Grace: sc.grace}
	var all []string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT array_agg(id) FROM datasets`).Scan(&all))
	committed := map[string]int64{}
	if sc.stopAfter > 0 {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var done atomic.Int64
		var cut atomic.Bool
		b.db.OnRemovalCommit(func() {
			if done.Add(1) == int64(sc.stopAfter) {
				cut.Store(true)
				cancel()
			}
		})
		_, err := runSweep(cctx, b.sweeper, sw, sc.boundary, all)
		b.db.OnRemovalCommit(nil)
		if stopped = cut.Load(); !stopped {
			require.NoError(t, err)
		}
		b.awaitOrphanedCommits(t)
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT coalesce(jsonb_object_agg(dataset_id, n), '{}') FROM (
			SELECT dataset_id, sum(rows_deleted)::bigint AS n FROM retention_deletions WHERE run_id = $1 GROUP BY 1) x`, runID).Scan(&committed))
	}
	removed, err := runSweep(ctx, b.sweeper, sw, sc.boundary, all)
	require.NoError(t, err)
	for ds, n := range committed {
		removed[ds] += n
	}
	return removed, stopped
}

// awaitOrphanedCommits waits until no other session of the test's database is busy. A cut-off attempt may return
// while a COMMIT it sent is still being done by the server (pgx gives up on the cancelled context and closes the
// connection; the server commits anyway): its ledger rows count, and are only visible once that session ends.
// The service never loses them (a run's totals are read from the ledger); this test's sum of attempts would.
func (b *sweepBundle) awaitOrphanedCommits(t *testing.T) {
	t.Helper()
	testwait.For(t, time.Minute, func() (bool, string) {
		var busy int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'`).Scan(&busy))
		return busy == 0, fmt.Sprintf("%d sessions still busy", busy)
	})
}

// runSweep is one attempt at a run's part: the drops beside the boundary walk across datasets followed by the
// per-dataset pass over later partitions (as the run job does), or the drops and then the per-dataset pass alone.
func runSweep(ctx context.Context, sweeper *postgres.Sweeper, sw postgres.Sweep, boundary bool, datasets []string) (map[string]int64, error) {
	removed := map[string]int64{}
	if boundary {
		placed, err := sweeper.SweepPlaced(ctx, sw)
		if err != nil {
			return nil, err
		}
		for ds, r := range placed.Dropped.Datasets {
			removed[ds] += r.Rows
		}
		for ds, r := range placed.Swept {
			removed[ds] += r.Rows
		}
		sw.Walked = placed.Walked
	} else {
		dropped, err := sweeper.DropPartitions(ctx, sw)
		if err != nil {
			return nil, err
		}
		for ds, r := range dropped.Datasets {
			removed[ds] += r.Rows
		}
	}
	for _, ds := range datasets {
		r, err := sweeper.SweepDataset(ctx, sw, ds)
		if err != nil {
			return nil, err
		}
		removed[ds] += r.Rows
	}
	return removed, nil
}

// scenarioPeople is how many people the scenarios' rows belong to: each row's identityMap names one, by its _id, so
// that a re-sent _id stays the same person's.
const scenarioPeople = 5

// personOf is the person a scenario row with this _id belongs to.
func personOf(rowID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(rowID))
	return int(h.Sum32() % scenarioPeople)
}

// playWorkOrder, in one scenario in two (drawn from a stream of its own, so that the scenario's other draws stay
// as they were), erases one or two people from one live dataset or from ALL with a work order, before the run, and
// checks that it removed exactly their rows in its scope (every other row left as it was), completed, and counted
// them. The run that follows is then checked against the rule on the rows left.
func (b *sweepBundle) playWorkOrder(t *testing.T, sc scenario, ids []string, deleted map[string]bool, stats *scenarioStats) (erasedKeys []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(sc.seed, 0x3131))
	var live []string
	for _, id := range ids {
		if !deleted[id] {
			live = append(live, id)
		}
	}
	if rng.IntN(2) == 0 || len(live) == 0 {
		return nil
	}
	people := map[int]bool{rng.IntN(scenarioPeople): true, rng.IntN(scenarioPeople): true}
	target := catalog.AllDatasets
	if rng.IntN(2) == 0 {
		target = live[rng.IntN(len(live))]
	}
	var identities []catalog.Identity
	for p := range people {
		identities = append(identities, catalog.Identity{Namespace: "email", Value: fmt.Sprintf("P%d@example.com", p)})
	}
	if rng.IntN(2) == 0 { // an order of many identities, removed in passes
		for i := range 70 {
			identities = append(identities, catalog.Identity{Namespace: "email", Value: fmt.Sprintf("nobody%d@example.com", i)})
		}
	}
	ctx := context.Background()
	var want []string
	var erased int64
	for _, r := range b.allRows(t) {
		inScope := !deleted[r.dataset] && (target == catalog.AllDatasets || target == r.dataset)
		if inScope && people[personOf(r.id)] {
			erased++
			erasedKeys = append(erasedKeys, r.dataset+"/"+r.id)
			continue
		}
		want = append(want, r.dataset+"/"+r.id)
	}
	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{})
	w, err := svc.CreateWorkOrder(ctx, b.caller, catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: target, Identities: identities})
	require.NoError(t, err)
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, "k"), nil).Execute(ctx, w.ID))
	w, err = svc.FindWorkOrder(ctx, b.caller, w.ID)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderCompleted, w.Status, "reason: %s", w.Reason)
	var left []string
	for _, r := range b.allRows(t) {
		left = append(left, r.dataset+"/"+r.id)
	}
	require.ElementsMatch(t, want, left, "the work order removes exactly its people's rows in its scope")
	require.Equal(t, erased, w.RowsDeleted)
	b.requireCountersExact(t)
	stats.workOrders.Add(1)
	stats.erased.Add(erased)
	return erasedKeys
}
