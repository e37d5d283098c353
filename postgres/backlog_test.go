package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// backlogRow is a stored lake row with what the backlog's definition reads of it: its counter group and the range
// of the partition it is placed in.
type backlogRow struct {
	storedRow
	partition string
	setting   int64
	counted   bool      // its group is counted: a TTL, the range ended, the setting in force to its end and when its rows arrived
	expiredBy time.Time // the end of its partition's range; in the past partition, its group's (backlogRows)
	placed    time.Time
	lower     time.Time // the start of its partition's range; zero in the past partition
}

// backlogRows reads every lake row with the definition of the backlog evaluated on the row itself, not on the
// counters: the brute force the counters' figures are held to.
func (b *sweepBundle) backlogRows(t *testing.T) []backlogRow {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `
		SELECT r.dataset_id, r.row_id, r.ts, r.ingested_at, r.own_expiry, r.never_expires, p.name, r.setting_id,
		       h.ttl IS NOT NULL AND p.upper_bound <= $1 AND (h.effective_until IS NULL OR h.effective_until >= p.upper_bound
		           AND h.effective_until > (SELECT max(g.ingested_at) FROM lake_rows g
		                                    WHERE g.tableoid = r.tableoid AND g.dataset_id = r.dataset_id AND g.setting_id = r.setting_id)),
		       CASE WHEN p.lower_bound = '-infinity' THEN r.ts + h.ttl WHEN p.upper_bound = 'infinity' THEN NULL ELSE p.upper_bound END,
		       CASE WHEN r.placed_expiry = '-infinity' THEN '0001-01-01' WHEN r.placed_expiry = 'infinity' THEN '9999-01-01'
		            ELSE r.placed_expiry END,
		       CASE WHEN p.lower_bound = '-infinity' THEN NULL ELSE p.lower_bound END
		FROM lake_rows r JOIN row_partitions p ON p.name = r.tableoid::regclass::text
		JOIN ttl_settings h ON h.id = r.setting_id`, b.now)
	require.NoError(t, err)
	defer rows.Close()
	var out []backlogRow
	for rows.Next() {
		var r backlogRow
		var expiredBy, lower *time.Time
		require.NoError(t, rows.Scan(&r.dataset, &r.id, &r.row.Timestamp, &r.row.IngestedAt, &r.row.OwnExpiry, &r.row.Never,
			&r.partition, &r.setting, &r.counted, &expiredBy, &r.placed, &lower))
		if expiredBy != nil {
			r.expiredBy = expiredBy.UTC()
		}
		if lower != nil {
			r.lower = lower.UTC()
		}
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	// In the past partition, a group's rows count from its latest ingestion, or its earliest ts + TTL when later.
	type key struct {
		dataset string
		setting int64
	}
	latest, first := map[key]time.Time{}, map[key]time.Time{}
	for _, r := range out {
		if r.partition == "lake_rows_ppast" {
			k := key{r.dataset, r.setting}
			latest[k] = maxTime(latest[k], r.row.IngestedAt)
			if f, ok := first[k]; !ok || r.expiredBy.Before(f) {
				first[k] = r.expiredBy
			}
		}
	}
	for i, r := range out {
		if r.partition == "lake_rows_ppast" {
			k := key{r.dataset, r.setting}
			out[i].expiredBy = minTime(maxTime(latest[k], first[k]), b.now)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// datasetBacklog reads the lake backlog GET /dataSets/{id} shows.
func (b *sweepBundle) datasetBacklog(t *testing.T, id string) catalog.Backlog {
	t.Helper()
	ds, err := b.datasets.FindDatasetByID(context.Background(), b.caller, id)
	require.NoError(t, err)
	require.Contains(t, ds.Backlog, catalog.LakeHouse)
	require.Contains(t, ds.Backlog, catalog.Profile)
	return ds.Backlog[catalog.LakeHouse]
}

// backlogCheck is what requireBacklog found: the figure, and the dataset's expired rows by the Go rule, of which
// those placed in the current month (or later) are the ones a figure of a setting still in force leaves out.
type backlogCheck struct {
	figure, expired, expiredThisMonth int64
}

// requireBacklog checks the dataset's lake backlog against the rows: its count is the rows of counted groups, every
// one of them expired under the Go rule (a lower bound of the expired rows); its oldestExpiredAt is the earliest
// expiredBy of them, and every counted row of a partition with a range was placed within that range, so it had
// expired no longer before it was counted than the range is long (a month, for partitions placed near their time).
func (b *sweepBundle) requireBacklog(t *testing.T, id string) backlogCheck {
	t.Helper()
	got := b.datasetBacklog(t, id)
	history := b.history(t)[id]
	monthStart := time.Date(b.now.Year(), b.now.Month(), 1, 0, 0, 0, 0, time.UTC)
	var c backlogCheck
	var oldest *time.Time
	for _, r := range b.backlogRows(t) {
		if r.dataset != id {
			continue
		}
		expired := retention.Expired(r.row, history, b.now)
		if expired {
			c.expired++
			if !r.placed.Before(monthStart) {
				c.expiredThisMonth++
			}
		}
		if !r.counted {
			continue
		}
		require.True(t, expired, "row %s is counted, so it has expired", r.id)
		c.figure++
		oldest = earliest(oldest, r.expiredBy)
		if r.partition != "lake_rows_ppast" {
			require.False(t, r.placed.Before(r.lower), "row %s is placed within its partition's range", r.id)
			require.True(t, r.placed.Before(r.expiredBy), "row %s expired before its partition's range ended", r.id)
		}
	}
	require.Equal(t, c.figure, got.ExpiredRows, "expiredRowCount of %s", id)
	require.LessOrEqual(t, got.ExpiredRows, c.expired, "a lower bound of the expired rows")
	if oldest == nil {
		require.Nil(t, got.OldestExpiredAt, "no row counted, no oldestExpiredAt")
		return c
	}
	require.NotNil(t, got.OldestExpiredAt)
	require.Equal(t, oldest.UTC(), got.OldestExpiredAt.UTC(), "oldestExpiredAt of %s", id)
	require.False(t, got.OldestExpiredAt.After(b.now), "never ahead of now")
	return c
}

func earliest(cur *time.Time, t time.Time) *time.Time {
	if cur == nil || t.Before(*cur) {
		return &t
	}
	return cur
}

// ingestSeriesAs stores n rows without overrides, one every step back from b.now, with _ids prefix0, prefix1, ….
func (b *sweepBundle) ingestSeriesAs(t *testing.T, id, prefix string, n int, step time.Duration) {
	t.Helper()
	events := func(yield func([]byte) bool) {
		for i := range n {
			ts := b.now.Add(-time.Duration(i)*step - 17*time.Minute)
			if !yield(fmt.Appendf(nil, `{"timestamp":%q,"_id":"%s%d"}`, ts.Format(time.RFC3339), prefix, i)) {
				return
			}
		}
	}
	res, err := ingest(context.Background(), b.rows, b.caller, id, events, catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, n, res.Accepted)
}

// TestBacklogFollowsIngestionAndTime: rows that arrive expired are counted at once; rows that expire in the current
// month are counted from its end, all of them, and only they are left out.
func TestBacklogFollowsIngestionAndTime(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "ingested")
	b.setTTL(t, id, "P1M")
	empty := b.requireBacklog(t, id)
	require.Zero(t, empty.figure)

	b.now = time.Date(2025, 3, 20, 9, 0, 0, 0, time.UTC)
	b.ingestSeries(t, id, 4*120, 6*time.Hour) // event times from 120 days ago to now: expiries from January to April
	c := b.requireBacklog(t, id)
	require.Positive(t, c.figure, "rows that arrived expired are counted at once")
	require.Positive(t, c.expiredThisMonth, "some rows expired in March, after they were stored")
	require.Equal(t, c.expired-c.expiredThisMonth, c.figure, "only the current month's expired rows are left out")

	b.now = time.Date(2025, 3, 31, 23, 0, 0, 0, time.UTC)
	late := b.requireBacklog(t, id)
	require.Equal(t, c.figure, late.figure, "March's rows wait for its end")
	require.Greater(t, late.expired, c.expired)

	b.now = time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	april := b.requireBacklog(t, id)
	require.Greater(t, april.figure, late.figure, "at March's end the rows expired in March are counted")
	require.Equal(t, april.expired-april.expiredThisMonth, april.figure, "all of them")

	b.ingestSeriesAs(t, id, "april", 40, 24*time.Hour) // 8 days of rows expired on arrival, and some to come
	more := b.requireBacklog(t, id)
	require.Equal(t, more.expired-more.expiredThisMonth, more.figure, "new rows that arrive expired count at once")
	require.Greater(t, more.figure, april.figure)
}

// TestDatasetReadProbesTheCountersOnce: GET /dataSets/{id} reads its lake shares and its backlog from one scan of
// the dataset's counters, and reads a group's setting only where the group's partition has ended, since no other
// group can be wholly expired: of rows spanning months to come under two settings, the settings of the ended
// partitions' groups, not of every group.
func TestDatasetReadProbesTheCountersOnce(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	id := b.newDataset(t, "probed")
	b.setTTL(t, id, "P1M")
	b.now = time.Date(2025, 3, 20, 9, 0, 0, 0, time.UTC)
	b.ingestSeries(t, id, 4*120, 6*time.Hour) // expiries from January to April
	b.now = b.now.Add(time.Hour)
	b.setTTL(t, id, "P2M")
	b.ingestSeriesAs(t, id, "later", 40, 24*time.Hour)
	var groups, ended int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE p.upper_bound <= $2)
		FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name WHERE st.dataset_id = $1 AND st.row_count > 0`,
		id, b.now).Scan(&groups, &ended))
	require.Positive(t, ended, "some groups are in partitions that have ended")
	require.Greater(t, groups, ended+1, "more are in partitions to come")

	with, _ := postgres.DatasetReadStatements()
	var plan []map[string]any
	require.NoError(t, b.db.Pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+with,
		pgx.QueryExecModeExec, b.caller.Org, b.caller.Sandbox, id, b.now).Scan(&plan))
	counters, settings := readsOf(plan[0]["Plan"], "row_stats"), readsOf(plan[0]["Plan"], "ttl_settings")
	require.Equal(t, 1, counters.scans, "one scan of the counters for the shares and the backlog")
	require.Equal(t, groups, counters.rows, "each group read once")
	require.LessOrEqual(t, settings.rows, ended, "a setting read only for a group of an ended partition")
	require.Positive(t, b.requireBacklog(t, id).figure, "the backlog is the rule's")
}

// relationReads are the scans of a relation in an executed plan, and the rows they returned over all their loops.
type relationReads struct{ scans, rows int }

// readsOf sums the scans of relation in the plan node (EXPLAIN (ANALYZE, FORMAT JSON)) and its children.
func readsOf(node any, relation string) relationReads {
	var r relationReads
	n, _ := node.(map[string]any)
	if n["Relation Name"] == relation {
		loops, _ := n["Actual Loops"].(float64)
		rows, _ := n["Actual Rows"].(float64)
		r.scans++
		r.rows += int(loops * rows)
	}
	children, _ := n["Plans"].([]any)
	for _, c := range children {
		sub := readsOf(c, relation)
		r.scans += sub.scans
		r.rows += sub.rows
	}
	return r
}

// TestBacklogAfterTTLChanges: a shortened TTL leaves the rows it expired uncounted until their month ends after it
// (the counters know them by their old placement), a lengthened one takes away no counted row, and both stay exact
// against the rows.
func TestBacklogAfterTTLChanges(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "changed")
	b.setTTL(t, id, "P3M")
	b.now = time.Date(2025, 1, 10, 0, 0, 0, 0, time.UTC)
	b.ingestSeries(t, id, 200, 24*time.Hour)
	b.now = time.Date(2025, 2, 2, 0, 0, 0, 0, time.UTC)
	before := b.requireBacklog(t, id)

	b.setTTL(t, id, "P1M")
	shortened := b.requireBacklog(t, id)
	require.Equal(t, before.figure, shortened.figure, "the rows the shorter TTL expired are placed in months to come")
	require.Greater(t, shortened.expired, before.expired, "yet they have expired")

	b.now = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	march := b.requireBacklog(t, id)
	require.Equal(t, shortened.figure, march.figure, "February's rows were placed under the old setting, replaced before February ended")

	b.setTTL(t, id, "P1Y")
	lengthened := b.requireBacklog(t, id)
	require.Equal(t, march.figure, lengthened.figure, "a longer TTL brings no row back")
	b.now = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	b.requireBacklog(t, id)
}

// TestBacklogAfterRunsAndDeletes: a row deleted by its _id leaves the figure, and after a run without grace nothing
// expired is left, counted or not; with a grace the rows within it stay counted.
func TestBacklogAfterRunsAndDeletes(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "swept")
	b.setTTL(t, id, "P1M")
	b.now = time.Date(2024, 11, 20, 0, 0, 0, 0, time.UTC)
	b.ingestSeries(t, id, 60, 24*time.Hour)
	b.now = time.Date(2025, 1, 5, 0, 0, 0, 0, time.UTC)
	b.ingestSeriesAs(t, id, "jan", 60, 24*time.Hour)
	first := b.requireBacklog(t, id)
	require.Positive(t, first.figure)

	// r0 of the first series: placed in December 2024, counted.
	require.NoError(t, b.rows.DeleteRow(context.Background(), b.caller, id, "r0"))
	afterDelete := b.requireBacklog(t, id)
	require.Less(t, afterDelete.figure, first.figure)

	removed := b.sweep(t, "00000000-0000-0000-0000-0000000017a1", retention.Period{Days: 30}, true)
	require.Positive(t, removed[id])
	graced := b.requireBacklog(t, id)
	require.Positive(t, graced.figure, "the rows ingested within the grace stay, expired and counted")

	b.now = b.now.Add(time.Hour)
	removed = b.sweep(t, "00000000-0000-0000-0000-0000000017a2", retention.Period{}, true)
	require.Positive(t, removed[id])
	after := b.requireBacklog(t, id)
	require.Zero(t, after.figure, "a run without grace leaves nothing counted")
	require.Zero(t, after.expired, "nor anything expired")
	b.requireCountersExact(t)
}

// requireServiceBacklog checks ServiceBacklog against the rows, group by group: each store and state has the rows of
// its counted groups (held: under an active hold; grace: a row of the group ingested within the lake's grace;
// deleted datasets' rows deletable since their deletion), and the oldest time of each.
func (b *sweepBundle) requireServiceBacklog(t *testing.T, grace retention.Period, held map[string]bool, deleted map[string]time.Time) map[postgres.BacklogState]postgres.StoreBacklog {
	t.Helper()
	type key struct {
		partition, dataset string
		setting            int64
	}
	maxIngested := map[key]time.Time{}
	rows := b.backlogRows(t)
	for _, r := range rows {
		k := key{r.partition, r.dataset, r.setting}
		if r.row.IngestedAt.After(maxIngested[k]) {
			maxIngested[k] = r.row.IngestedAt
		}
	}
	want := map[postgres.BacklogState]postgres.StoreBacklog{}
	add := func(state postgres.BacklogState, since time.Time) {
		w := want[state]
		w.Rows++
		if w.Oldest == nil || since.Before(*w.Oldest) {
			s := since
			w.Oldest = &s
		}
		want[state] = w
	}
	for _, r := range rows {
		if at, ok := deleted[r.dataset]; ok {
			add(postgres.BacklogDeletable, at)
			continue
		}
		if !r.counted {
			continue
		}
		deletableAt := grace.AddTo(maxIngested[key{r.partition, r.dataset, r.setting}])
		switch {
		case held[r.dataset]:
			add(postgres.BacklogHeld, r.expiredBy)
		case !deletableAt.After(b.now):
			add(postgres.BacklogDeletable, maxTime(r.expiredBy, deletableAt))
		default:
			add(postgres.BacklogGrace, r.expiredBy)
		}
	}
	got, err := b.db.ServiceBacklog(context.Background(), b.now, grace)
	require.NoError(t, err)
	require.Len(t, got, 6, "every store and state")
	out := map[postgres.BacklogState]postgres.StoreBacklog{}
	for _, g := range got {
		if g.Store == catalog.Profile {
			require.Zero(t, g.Rows, "no profile rows in these tests")
			continue
		}
		w := want[g.State]
		require.Equal(t, w.Rows, g.Rows, "rows in state %s", g.State)
		if w.Oldest == nil {
			require.Nil(t, g.Oldest, "state %s", g.State)
		} else {
			require.NotNil(t, g.Oldest, "state %s", g.State)
			require.Equal(t, w.Oldest.UTC(), g.Oldest.UTC(), "oldest of state %s", g.State)
		}
		out[g.State] = g
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestServiceBacklogReportsHeldRowsApart: the service's backlog puts a held dataset's expired rows in the held
// state, through a run that leaves them and after the release; rows within the grace in the grace state; a deleted
// dataset's rows are deletable from its deletion; and the per-dataset figures add up to the service's.
func TestServiceBacklogReportsHeldRowsApart(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	held, other, gone := b.newDataset(t, "held"), b.newDataset(t, "other"), b.newDataset(t, "gone")
	for _, id := range []string{held, other, gone} {
		b.setTTL(t, id, "P1M")
	}
	b.now = time.Date(2024, 10, 31, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{held, other, gone} {
		b.ingestSeries(t, id, 100, 24*time.Hour)
	}
	holdID := b.placeHold(t, held)
	b.now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	grace := retention.Period{Days: 30}
	heldSet := map[string]bool{held: true}
	got := b.requireServiceBacklog(t, grace, heldSet, nil)
	require.Equal(t, b.requireBacklog(t, held).figure, got[postgres.BacklogHeld].Rows)
	require.Equal(t, b.requireBacklog(t, other).figure+b.requireBacklog(t, gone).figure, got[postgres.BacklogDeletable].Rows)

	b.sweep(t, "00000000-0000-0000-0000-0000000017b1", grace, true)
	got = b.requireServiceBacklog(t, grace, heldSet, nil)
	require.Zero(t, got[postgres.BacklogDeletable].Rows, "a run leaves nothing deletable")
	require.Equal(t, int64(100), got[postgres.BacklogHeld].Rows, "the held rows, carried by the drop, are all counted")
	require.Equal(t, int64(100), b.requireBacklog(t, held).figure, "and shown on the held dataset")

	b.ingestSeriesAs(t, other, "late", 40, 24*time.Hour) // some expired on arrival, within the grace
	got = b.requireServiceBacklog(t, grace, heldSet, nil)
	require.Positive(t, got[postgres.BacklogGrace].Rows)

	_, err := b.datasets.ReleaseHold(context.Background(), b.caller, held, holdID)
	require.NoError(t, err)
	require.NoError(t, b.datasets.DeleteDataset(context.Background(), b.caller, gone))
	got = b.requireServiceBacklog(t, grace, nil, map[string]time.Time{gone: b.now})
	require.Equal(t, int64(100), got[postgres.BacklogDeletable].Rows-int64(b.rowsOf(t, gone)), "released, the held rows are deletable")
	require.Zero(t, got[postgres.BacklogHeld].Rows)
	require.Equal(t, int64(100), b.requireBacklog(t, held).figure, "a release changes what may go, not what has expired")
}

// racingChange stores 500 rows at P3M, one a day back from 2025-03-10, then lengthens the TTL to P1Y with a clock
// behind the ingestion's by behind (0: the same instant), as a replica's may be or as a change that read its clock
// before an ingestion committed first, and returns the dataset and the ingestion's time; the clock is then two
// hours later. between, when set, runs after the ingestion and after the change, the clock at the ingestion's time.
func (b *sweepBundle) racingChange(t *testing.T, behind time.Duration, between func(id string)) (string, time.Time) {
	t.Helper()
	id := b.newDataset(t, "racing")
	b.setTTL(t, id, "P3M")
	b.now = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)
	b.ingestSeries(t, id, 500, 24*time.Hour)
	ingestedAt := b.now
	if between != nil {
		between(id)
	}
	b.now = ingestedAt.Add(-behind)
	b.setTTL(t, id, "P1Y")
	b.now = ingestedAt
	if between != nil {
		between(id)
	}
	b.now = ingestedAt.Add(2 * time.Hour)
	return id, ingestedAt
}

// requireRuleHolds checks the backlog, the previews and a run against the Go rule on the dataset's rows, and
// returns the rows the rule keeps and how many it expires.
func (b *sweepBundle) requireRuleHolds(t *testing.T, id string) (keep []string, expired int64) {
	t.Helper()
	history := b.history(t)[id]
	for _, r := range b.allRows(t) {
		if retention.Expired(r.row, history, b.now) {
			expired++
			continue
		}
		keep = append(keep, r.id)
	}
	check := b.requireBacklog(t, id)
	require.Equal(t, expired, check.expired)
	b.requirePreviewsExact(t, []string{id}, b.allRows(t), b.history(t), retention.Period{})
	removed := b.sweep(t, "00000000-0000-0000-0000-0000000018a1", retention.Period{}, true)
	b.release(t)
	require.Equal(t, expired, removed[id], "the run removes exactly the expired rows")
	var kept []string
	for _, r := range b.allRows(t) {
		kept = append(kept, r.id)
	}
	require.ElementsMatch(t, keep, kept)
	b.requireCountersExact(t)
	return keep, expired
}

// TestAChangeEndsItsSettingAfterTheIngestionsStoredUnderIt: a TTL change at an ingestion's instant, or with a
// clock behind it, ends the setting the rows were stored under just after them, and the new setting starts there:
// the rows that had expired on arrival under P3M stay expired when P1Y lengthens it (a lengthening never brings a
// row back), and reads show the same rows before and after the change.
func TestAChangeEndsItsSettingAfterTheIngestionsStoredUnderIt(t *testing.T) {
	t.Parallel()
	for name, behind := range map[string]time.Duration{"SameInstant": 0, "ChangeClockBehind": 3 * time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupSweep(t)
			var visible []int // the rows reads show, before the change and after it
			id, ingestedAt := b.racingChange(t, behind, func(id string) {
				page, err := b.rows.FindRows(context.Background(), b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 1000})
				require.NoError(t, err)
				visible = append(visible, len(page.Rows))
			})
			require.Equal(t, []int{90, 90}, visible, "the rows of the last 90 days, within P3M: lengthening brings no row back")

			history := b.history(t)[id]
			require.Len(t, history, 3, "the default, P3M, P1Y")
			require.Equal(t, ingestedAt.Add(time.Microsecond), history[1].Until.UTC(), "P3M ends just after the rows it stored")
			require.Equal(t, *history[1].Until, history[2].From, "P1Y starts where P3M ended")
			keep, expired := b.requireRuleHolds(t, id)
			require.Len(t, keep, 90)
			require.Equal(t, int64(410), expired)
		})
	}
}

// TestAChangeMovesAtMostAMinuteForAnImportFromTheFuture: an import whose _ingestedAt is ahead of the clock holds a
// change back by at most settingEndSlack.
func TestAChangeMovesAtMostAMinuteForAnImportFromTheFuture(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "imported")
	b.setTTL(t, id, "P3M")
	b.now = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)
	b.ingestEvents(t, id, []string{`{"timestamp":"2025-03-01T00:00:00Z","_id":"late","_ingestedAt":"2026-01-01T00:00:00Z"}`}, true)
	b.setTTL(t, id, "P1Y")
	history := b.history(t)[id]
	require.Len(t, history, 3)
	require.Equal(t, b.now.Add(time.Minute), history[1].Until.UTC())
	require.Equal(t, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), history[0].Until.UTC(), "a setting that stored no row ends at the change's time")
}

// TestRowsStoredAfterTheirSettingEndedFollowTheNextSetting: in a history written before changes ended their
// setting after its ingestions (endSetting), rows may be stored under a setting that ended at or before they
// arrived. The rule never judged them by it (retention.Expired): the rows that arrived expired under P3M, lengthened
// to P1Y, stay until P1Y expires them, and neither the backlog counts them nor a preview or a run's drop of their
// partition takes them, whatever the counters of their group say.
func TestRowsStoredAfterTheirSettingEndedFollowTheNextSetting(t *testing.T) {
	t.Parallel()
	for name, behind := range map[string]time.Duration{"SameInstant": 0, "ChangeClockBehind": 3 * time.Minute} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupSweep(t)
			id, ingestedAt := b.racingChange(t, 0, nil)
			_, err := b.db.Pool.Exec(context.Background(), `
				WITH ended AS (UPDATE ttl_settings SET effective_until = $2 WHERE dataset_id = $1 AND effective_until > $2)
				UPDATE ttl_settings SET effective_from = $2 WHERE dataset_id = $1 AND effective_from > $2`, id, ingestedAt.Add(-behind))
			require.NoError(t, err)
			history := b.history(t)[id]
			require.False(t, history[1].Until.After(ingestedAt), "P3M ended as the rows arrived")
			keep, expired := b.requireRuleHolds(t, id)
			require.Len(t, keep, 365, "a year of rows is within P1Y")
			require.Equal(t, int64(135), expired, "the rows older than a year")
		})
	}
}
