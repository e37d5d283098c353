package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/demo"
)

// The identities run holds when its median is within the noise of the runs without identities: their slowest run,
// or their median plus minNoise, whichever is more.
func TestNoSlowerBeyondNoise(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		ours      []time.Duration
		base      []time.Duration
		holds     bool
		wantBound time.Duration
	}{
		{"FasterHolds", ms(300, 310, 900), ms(330, 340, 350), true, 374 * time.Millisecond},
		{"WithinTheSlowestBaseRunHolds", ms(440, 450, 460), ms(285, 334, 455), true, 455 * time.Millisecond},
		{"BeyondTheSlowestAndTheFloorFails", ms(460, 470, 480), ms(285, 334, 455), false, 455 * time.Millisecond},
		{"TightBaseGetsTheFloor", ms(360, 366, 370), ms(330, 333, 335), true, 366300 * time.Microsecond},
		{"BeyondTheFloorFails", ms(370, 370, 370), ms(330, 333, 335), false, 366300 * time.Microsecond},
		{"NoRunsFail", nil, ms(330), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			holds, bound := noSlowerBeyondNoise(tc.ours, tc.base)
			require.Equal(t, tc.holds, holds)
			require.InDelta(t, float64(tc.wantBound), float64(bound), float64(time.Microsecond))
		})
	}
}

// The order names every (people / n)-th person: n distinct people, all of the store.
func TestOrderPeople(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ people, n, last int }{{1_000_000, 100_000, 999_990}, {5000, 500, 4990}, {7, 3, 4}, {3, 5, 2}} {
		got := orderPeople(tc.people, tc.n)
		require.Len(t, got, min(tc.n, tc.people))
		require.Equal(t, 0, got[0])
		require.Equal(t, tc.last, got[len(got)-1])
		for i := 1; i < len(got); i++ {
			require.Greater(t, got[i], got[i-1])
		}
	}
}

// The people and the order scale with -rows (10 rows a person, a tenth of them ordered, within an order's bound)
// unless set, and an order larger than the service takes, or than the people, is refused.
func TestPeopleScaleWithRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		args          []string
		people, order int
	}{
		{"Default", nil, 1_000_000, 100_000},
		{"Moderate", []string{"-rows", "1000000"}, 100_000, 10_000},
		{"Smoke", []string{"-smoke"}, 5000, 500},
		{"OrderBoundedByTheService", []string{"-people", "5000000"}, 5_000_000, catalog.MaxWorkOrderIdentities},
		{"Set", []string{"-rows", "1000", "-people", "40", "-workorder-identities", "40"}, 40, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseFlags(tc.args, io.Discard)
			require.NoError(t, err)
			require.Equal(t, tc.people, c.people())
			require.Equal(t, tc.order, c.workOrderIdentities())
		})
	}
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		_, err := ParseFlags([]string{"-workorder-identities", "100001"}, io.Discard)
		require.ErrorContains(t, err, "-workorder-identities (100001) must be at most 100000")
		_, err = ParseFlags([]string{"-people", "10", "-workorder-identities", "11"}, io.Discard)
		require.ErrorContains(t, err, "at most -people (10)")
		_, err = ParseFlags([]string{"-people", "-1"}, io.Discard)
		require.ErrorContains(t, err, "-people (-1)")
	})
}

// An event with people carries one person's identityMap, which the service reads as that person's key, and is
// otherwise the event of the same seed without it.
func TestEventGenWithPeople(t *testing.T) {
	t.Parallel()
	from := time.Date(2024, 11, 27, 0, 0, 0, 0, time.UTC)
	lines := func(people int) []string {
		g := newEventGen(3, 7, 500, from, from.AddDate(2, 0, 0), true)
		if people > 0 {
			g.withPeople(people, 3, 7)
		}
		var buf bytes.Buffer
		g.body(&buf, 500)
		return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	}
	plain, with := lines(0), lines(20)
	require.Len(t, with, 500)
	persons := map[string]bool{}
	for i, line := range with {
		var event map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &event))
		keys, err := catalog.ParseIdentityMap(event["identityMap"])
		require.NoError(t, err)
		require.Len(t, keys, 1, "the primary e-mail alone")
		persons[keys[0]] = true
		delete(event, "identityMap")
		rest, err := json.Marshal(event)
		require.NoError(t, err)
		require.JSONEq(t, plain[i], string(rest))
	}
	require.Len(t, persons, 20, "500 events reach each of 20 people")
	for p := range 20 {
		require.True(t, persons[demo.PersonKeys(p)[0]], "person %d", p)
	}
}

// The work order's row is judged against the committed DELETE, holds within 2× only when every matching row is gone
// and the audit counts them, and says "baseline invalid" when the baseline removed other rows than the order or
// the two sides left different rows.
func TestReportWorkOrder(t *testing.T) {
	t.Parallel()
	sample := func(done int64, took time.Duration) workSample {
		return workSample{Done: done, Want: 1000, Took: took}
	}
	good := func() *orderDone {
		created := time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC)
		return &orderDone{id: "DI-1", status: "completed", rowsDeleted: 1000, created: created, started: created.Add(3 * time.Second),
			deleteEvents: 3, auditedRows: 1000, executeEvents: 1}
	}
	check := workOrderCheck{matching: 1000, matchingDatasets: 2, same: true, detail: "Rows left identical.", identities: 100}
	report := func(o *orderDone, ours time.Duration, samples []workSample, c workOrderCheck) []Row {
		h := &harness{report: &Report{}, identIDs: []string{"a", "b", "c"}, cfg: Config{Rows: 10_000}}
		h.reportWorkOrder(o, ours, 0, samples, "Delete on rows_ident → Bitmap Heap Scan", c)
		rows := h.report.Find(ScenarioWorkOrder)
		require.Len(t, rows, 2)
		return rows
	}
	t.Run("WithinTwiceHolds", func(t *testing.T) {
		t.Parallel()
		rows := report(good(), 3*time.Second, []workSample{sample(1000, 2*time.Second), sample(1000, 1600*time.Millisecond)}, check)
		require.Equal(t, Holds, rows[0].Holds)
		require.Equal(t, fmtDur(1600*time.Millisecond)+" (GIN + DELETE)", rows[0].Baseline, "the committed sample is the figure")
		require.Equal(t, "1.9×", rows[0].Ratio)
		require.Contains(t, rows[0].Note, "its first job was queued 3.00 s after the order was created")
		require.Equal(t, Holds, rows[1].Holds, "under 60 s")
	})
	t.Run("SlowerFails", func(t *testing.T) {
		t.Parallel()
		rows := report(good(), 70*time.Second, []workSample{sample(1000, 2*time.Second), sample(1000, 2*time.Second)}, check)
		require.Equal(t, Fails, rows[0].Holds)
		require.Equal(t, Fails, rows[1].Holds)
	})
	t.Run("RowsLeftOrAuditMissingFails", func(t *testing.T) {
		t.Parallel()
		leftOver := check
		leftOver.left = 1
		rows := report(good(), time.Second, []workSample{sample(1000, time.Second), sample(1000, time.Second)}, leftOver)
		require.Equal(t, Fails, rows[0].Holds)
		require.Contains(t, rows[0].Note, "NOT EXACT: the order removed 1,000 rows of 1,000 matching, 1 left")
		o := good()
		o.deleteEvents = 1 // fewer than the datasets with matching rows
		rows = report(o, time.Second, []workSample{sample(1000, time.Second), sample(1000, time.Second)}, check)
		require.Equal(t, Fails, rows[0].Holds)
		require.Contains(t, rows[0].Note, "audit: 1 Delete events (2 datasets with matching rows, 3 in all)")
	})
	t.Run("OtherRowsMakeTheBaselineInvalid", func(t *testing.T) {
		t.Parallel()
		rows := report(good(), time.Second, []workSample{sample(999, time.Second), sample(999, time.Second)}, check)
		require.True(t, rows[0].Holds.Invalid())
		require.Contains(t, string(rows[0].Holds), "sample 1 removed 999 rows, not the order's 1,000")
		differ := check
		differ.same, differ.detail = false, "rows left DIFFER: a"
		rows = report(good(), time.Second, []workSample{sample(1000, time.Second), sample(1000, time.Second)}, differ)
		require.Equal(t, Verdict("baseline invalid: the two sides left different rows: rows left DIFFER: a"), rows[0].Holds)
	})
}

// The retention run on the identities store is reported at the medians of its trials against the trials without
// identities, and fails the harness when a run removed other rows than the expiry rule says.
func TestReportIdentityRun(t *testing.T) {
	t.Parallel()
	trial := func(n int, ours time.Duration) runTrial {
		run := &runDoc{}
		run.Progress.RowsDeleted = 500
		return runTrial{n: n, run: run, ours: ours, baseDeleted: 500}
	}
	trials := []runTrial{trial(1, 330*time.Millisecond), trial(2, 340*time.Millisecond), trial(3, 350*time.Millisecond)}
	exact := func(n int, ours time.Duration) identityRun {
		return identityRun{n: n, ours: ours, deleted: 500, gone: 500, want: 500}
	}
	t.Run("Medians", func(t *testing.T) {
		t.Parallel()
		h := &harness{report: &Report{}, cfg: Config{Rows: 5000}}
		require.NoError(t, h.reportIdentityRun(trials, []identityRun{exact(1, 360*time.Millisecond), exact(2, 300*time.Millisecond), exact(3, 1000*time.Millisecond)}))
		rows := h.report.Find(ScenarioRetentionRun)
		require.Len(t, rows, 1)
		require.Equal(t, fmtDur(360*time.Millisecond), rows[0].Ours)
		require.Equal(t, fmtDur(340*time.Millisecond)+" (no identities)", rows[0].Baseline)
		require.Equal(t, Holds, rows[0].Holds, "360 ms is within 340 ms and a tenth of it")
	})
	t.Run("AWrongRunFails", func(t *testing.T) {
		t.Parallel()
		h := &harness{report: &Report{}, cfg: Config{Rows: 5000}}
		wrong := exact(2, 300*time.Millisecond)
		wrong.late = 3
		err := h.reportIdentityRun(trials, []identityRun{exact(1, 300*time.Millisecond), wrong, exact(3, 300*time.Millisecond)})
		require.ErrorContains(t, err, "removed other rows")
		rows := h.report.Find(ScenarioRetentionRun)
		require.Equal(t, Fails, rows[0].Holds)
		require.Contains(t, rows[0].Note, "WRONG")
	})
}

// The ingestion of events with identities is judged against the faster of the two samples of the same events with
// their identityMap unread, which must agree; the row against the events without identityMap is shown, not judged,
// unless its samples disagree.
func TestReportIdentityIngestion(t *testing.T) {
	t.Parallel()
	s := func(took time.Duration) workSample { return workSample{Done: 100_000, Want: 100_000, Took: took} }
	report := func(ours workSample, base, unread []workSample) []Row {
		h := &harness{report: &Report{}, cfg: Config{Rows: 1000, HTTPRows: 100_000}}
		h.reportIdentityIngestion(ours, base, unread, "")
		rows := h.report.Find(ScenarioIngestion)
		require.Len(t, rows, 2)
		require.Equal(t, identityIngestMetric, rows[0].Metric)
		require.Equal(t, identityUnreadMetric, rows[1].Metric)
		return rows
	}
	unread := []workSample{s(2100 * time.Millisecond), s(2000 * time.Millisecond)}
	rows := report(s(2200*time.Millisecond), []workSample{s(1600 * time.Millisecond), s(1500 * time.Millisecond)}, unread)
	require.Equal(t, "91%", rows[1].Ratio, "against the faster unread sample, 2 s")
	require.Equal(t, Holds, rows[1].Holds)
	require.Equal(t, "68%", rows[0].Ratio, "against the faster sample without identityMap, 1.5 s")
	require.Equal(t, NoGoal, rows[0].Holds, "shown, not judged")
	require.Contains(t, rows[0].Note, "without it: 75%", "the bytes alone: 1.5 s against 2 s")

	rows = report(s(2600*time.Millisecond), []workSample{s(1600 * time.Millisecond), s(1500 * time.Millisecond)}, unread)
	require.Equal(t, Fails, rows[1].Holds, "77 percent of the faster unread sample")

	rows = report(s(2*time.Second), []workSample{s(time.Second), s(3 * time.Second)}, []workSample{s(time.Second), s(3 * time.Second)})
	require.Contains(t, string(rows[0].Holds), "baseline invalid: samples disagree")
	require.Contains(t, string(rows[1].Holds), "baseline invalid: samples disagree")
}
