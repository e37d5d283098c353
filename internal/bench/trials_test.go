package bench

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The retention run's row is the trial with the median ratio, whatever order the trials ran in, and a goal that
// holds only when every trial left the baseline's rows.
func TestReportRunTakesTheMedianTrial(t *testing.T) {
	t.Parallel()
	trial := func(n int, ours, baseline time.Duration, same bool) runTrial {
		return runTrial{n: n, run: &runDoc{}, ours: ours, baseline: baseline, same: same, detail: "d"}
	}
	t.Run("MedianRatio", func(t *testing.T) {
		t.Parallel()
		h := &harness{report: &Report{}}
		h.reportRun([]runTrial{
			trial(1, time.Second, 9*time.Second, true),                  // 9×
			trial(2, 800*time.Millisecond, 9600*time.Millisecond, true), // 12×
			trial(3, 900*time.Millisecond, 9450*time.Millisecond, true), // 10.5×
		})
		rows := h.report.Find(ScenarioRetentionRun)
		require.Len(t, rows, 1)
		require.Equal(t, fmtDur(900*time.Millisecond), rows[0].Ours)
		require.Equal(t, fmtDur(9450*time.Millisecond), rows[0].Baseline)
		require.Equal(t, Holds, rows[0].Holds)
		require.Contains(t, rows[0].Note, "1: 1.00 s vs 9.00 s")
		require.True(t, h.report.RowsIdentical)
	})
	t.Run("AnyTrialWithOtherRowsFails", func(t *testing.T) {
		t.Parallel()
		h := &harness{report: &Report{}}
		h.reportRun([]runTrial{
			trial(1, time.Second, 20*time.Second, true),
			trial(2, time.Second, 30*time.Second, false),
			trial(3, time.Second, 25*time.Second, true),
		})
		rows := h.report.Find(ScenarioRetentionRun)
		require.Len(t, rows, 1)
		require.Equal(t, Fails, rows[0].Holds)
		require.False(t, h.report.RowsIdentical)
	})
}

func TestRunTrialsMustBeOdd(t *testing.T) {
	t.Parallel()
	_, err := ParseFlags([]string{"-run-trials", "2"}, io.Discard)
	require.ErrorContains(t, err, "-run-trials")
	c, err := ParseFlags([]string{"-run-trials", "5"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 5, c.RunTrials)
}
