package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// steadyPgbench is a pgbench sample of 64 clients as a quiet machine gives it: ten even seconds, the latency
// Little's law says.
func steadyPgbench(tps float64) pgbenchSample {
	const clients = 64
	s := pgbenchSample{TPS: tps, Clients: clients, LatencyAvg: time.Duration(float64(clients) / tps * float64(time.Second))}
	for range 10 {
		s.PerSecond = append(s.PerSecond, tps)
	}
	return s
}

// A baseline is judged only when both its samples pass every check; each check names what failed.
func TestCheckPgbench(t *testing.T) {
	t.Parallel()
	t.Run("SteadySamplesPass", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, checkPgbench([]pgbenchSample{steadyPgbench(30578), steadyPgbench(24000)}))
	})
	t.Run("OneSampleIsNotEnough", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "1 sample(s), 2 needed", checkPgbench([]pgbenchSample{steadyPgbench(30578)}))
	})
	t.Run("SamplesMustAgree", func(t *testing.T) {
		t.Parallel()
		why := checkPgbench([]pgbenchSample{steadyPgbench(2322), steadyPgbench(30578)})
		require.Contains(t, why, "samples disagree: 2,322 and 30,578 TPS (13× apart, at most 1.5×)")
		require.Empty(t, checkPgbench([]pgbenchSample{steadyPgbench(1000), steadyPgbench(1500)}), "1.5× is within the bound")
	})
	t.Run("LatencyMustFitTheRate", func(t *testing.T) {
		t.Parallel()
		s := steadyPgbench(30000) // 2.13 ms by Little's law
		s.LatencyAvg = 27553 * time.Microsecond
		why := checkPgbench([]pgbenchSample{steadyPgbench(30000), s})
		require.Contains(t, why, "sample 2's latency 28 ms is not 64 clients / 30,000 TPS = 2.1 ms")
		s.LatencyAvg = 2600 * time.Microsecond // 22% over
		require.Empty(t, checkPgbench([]pgbenchSample{steadyPgbench(30000), s}))
	})
	t.Run("AStalledSecondFails", func(t *testing.T) {
		t.Parallel()
		s := steadyPgbench(20000)
		s.PerSecond[0] = 0 // the clients connecting: not judged
		require.Empty(t, checkPgbench([]pgbenchSample{s, steadyPgbench(20000)}))
		s.PerSecond[3] = 2000 // a stall
		why := checkPgbench([]pgbenchSample{s, steadyPgbench(20000)})
		require.Contains(t, why, "sample 1 stalled: its slowest second served 2,000 TPS, its median second 20,000")
		s.PerSecond = s.PerSecond[:3]
		s.PerSecond[1] = 2000
		require.Empty(t, checkPgbench([]pgbenchSample{s, steadyPgbench(20000)}), "two seconds after the first are too few to judge")
	})
	t.Run("OtherProcessesMustLeaveTheMachineAlone", func(t *testing.T) {
		t.Parallel()
		s := steadyPgbench(20000)
		s.OtherCPU = 0.35
		require.Equal(t, "other processes took 35% of the CPU during sample 2", checkPgbench([]pgbenchSample{steadyPgbench(20000), s}))
		s.OtherCPU = maxOtherCPU
		require.Empty(t, checkPgbench([]pgbenchSample{steadyPgbench(20000), s}))
	})
	t.Run("NoFiguresFail", func(t *testing.T) {
		t.Parallel()
		require.Contains(t, checkPgbench([]pgbenchSample{{Clients: 64}, steadyPgbench(20000)}), "sample 1 printed no rate or latency")
	})
}

// A DELETE or COPY baseline must do the run's rows, and its samples' rates must agree.
func TestCheckWork(t *testing.T) {
	t.Parallel()
	sample := func(done, want int64, took time.Duration) workSample {
		return workSample{Done: done, Want: want, Took: took}
	}
	checkDeletes := func(s []workSample) string { return checkWork(s, "removed", "the run's") }
	t.Run("AgreeingSamplesPass", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, checkDeletes([]workSample{sample(2_991_835, 2_991_835, 15500*time.Millisecond),
			sample(2_991_835, 2_991_835, 14*time.Second), sample(2_991_835, 2_991_835, 12800*time.Millisecond)}))
	})
	t.Run("RowsMustBeTheRuns", func(t *testing.T) {
		t.Parallel()
		why := checkDeletes([]workSample{sample(10, 10, time.Second), sample(9, 10, time.Second)})
		require.Equal(t, "sample 2 removed 9 rows, not the run's 10", why)
	})
	t.Run("RatesMustAgree", func(t *testing.T) {
		t.Parallel()
		why := checkDeletes([]workSample{sample(1000, 1000, time.Second), sample(1000, 1000, 1600*time.Millisecond)})
		require.Equal(t, "samples disagree: 625 to 1,000 rows/s (1.6× apart, at most 1.5×)", why)
	})
	t.Run("OtherProcessesMustLeaveTheMachineAlone", func(t *testing.T) {
		t.Parallel()
		s := sample(1000, 1000, time.Second)
		s.OtherCPU = 0.2
		require.Equal(t, "other processes took 20% of the CPU during sample 1", checkDeletes([]workSample{s, sample(1000, 1000, time.Second)}))
	})
	t.Run("OneSampleIsNotEnough", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "1 sample(s), 2 needed", checkDeletes([]workSample{sample(1, 1, time.Second)}))
	})
}

// An invalid baseline replaces the verdict, whether the goal held or not.
func TestJudge(t *testing.T) {
	t.Parallel()
	require.Equal(t, Holds, judge(true, ""))
	require.Equal(t, Fails, judge(false, ""))
	for _, ok := range []bool{true, false} {
		v := judge(ok, "samples disagree")
		require.Equal(t, Verdict("baseline invalid: samples disagree"), v)
		require.True(t, v.Invalid())
	}
	require.False(t, Holds.Invalid())
}

// The retention run's DELETEs and the held dataset's are each other's second samples: one trial of each is judged,
// a lone one is not, and a held DELETE far off the trials' rate makes both rows invalid.
func TestJudgeDeletes(t *testing.T) {
	t.Parallel()
	sample := func(rows int64, took time.Duration) workSample { return workSample{Done: rows, Want: rows, Took: took} }
	harnessWith := func(js ...deleteJudgement) *harness {
		h := &harness{report: &Report{}}
		for i := range js {
			js[i].row = i
			h.report.add(Row{Scenario: ScenarioRetentionRun, Holds: Holds})
		}
		h.deleteJudgements = js
		return h
	}
	t.Run("OneTrialAndTheHeldDatasetAreJudged", func(t *testing.T) {
		t.Parallel()
		h := harnessWith(deleteJudgement{holds: true, own: []workSample{sample(2_991_835, 14*time.Second)}},
			deleteJudgement{holds: false, own: []workSample{sample(2_954_420, 13100*time.Millisecond)}})
		h.judgeDeletes()
		require.Equal(t, Holds, h.report.Rows[0].Holds)
		require.Equal(t, Fails, h.report.Rows[1].Holds)
		require.Contains(t, h.report.Rows[0].Note, "checked on 2 DELETE samples")
	})
	t.Run("ALoneDeleteIsNotJudged", func(t *testing.T) {
		t.Parallel()
		h := harnessWith(deleteJudgement{holds: true, own: []workSample{sample(10, time.Second)}})
		h.judgeDeletes()
		require.Equal(t, Verdict("baseline invalid: 1 sample(s), 2 needed"), h.report.Rows[0].Holds)
	})
	t.Run("TwoOwnDeletesAreJudgedAlone", func(t *testing.T) {
		t.Parallel()
		// The deletion manifest's row, measured without the retention run or the held dataset (-only
		// deletion-manifest): its DELETE rolled back, then committed.
		h := harnessWith(deleteJudgement{holds: true, own: []workSample{sample(2_991_884, 19*time.Second), sample(2_991_884, 16800*time.Millisecond)}})
		h.judgeDeletes()
		require.Equal(t, Holds, h.report.Rows[0].Holds)
	})
	t.Run("DisagreeingDeletesInvalidateBoth", func(t *testing.T) {
		t.Parallel()
		h := harnessWith(deleteJudgement{holds: true, own: []workSample{sample(1000, time.Second), sample(1000, time.Second)}},
			deleteJudgement{holds: true, own: []workSample{sample(1000, 3*time.Second)}})
		h.judgeDeletes()
		for _, r := range h.report.Rows {
			require.True(t, r.Holds.Invalid(), r.Holds)
			require.Contains(t, string(r.Holds), "samples disagree")
		}
	})
}

func TestRoutingRow(t *testing.T) {
	t.Parallel()
	at := func(rates ...float64) []readMeasure {
		var ms []readMeasure
		for _, r := range rates {
			ms = append(ms, readMeasure{stats: latencyStats{perSec: r}})
		}
		return ms
	}
	for _, tc := range []struct {
		name           string
		direct, routed []readMeasure
		want           Verdict
		ratio          string
	}{
		{"AboveEightyPercent", at(1000, 1100), at(900, 950), Holds, "88%"},
		{"BelowEightyPercent", at(1000, 1000), at(700, 780), Fails, "74%"},
		{"FailedRequestFails", at(1000, 1000), []readMeasure{{stats: latencyStats{perSec: 990, errors: 1}}, {stats: latencyStats{perSec: 990}}}, Fails, "99%"},
		{"DriftingBaselineIsInvalid", at(500, 1000), at(700, 700), "baseline invalid: the direct samples are 500 req/s and 1,000 req/s, more than 1.5 times apart", "93%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := routingRow(tc.direct, tc.routed, 16, "10s")
			require.Equal(t, tc.want, row.Holds)
			require.Equal(t, tc.ratio, row.Ratio)
		})
	}
}
