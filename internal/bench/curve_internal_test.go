package bench

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseFigure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"3.48 s", 3.48, true},
		{"734 ms", 0.734, true},
		{"25,003 rows/s (raw COPY)", 25003, true},
		{"42 MB", 42, true},
		{"not run: -only", 0, false},
		{"", 0, false},
	} {
		got, ok := parseFigure(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.InDelta(t, tc.want, got, 1e-9, tc.in)
	}
}

// TestDrawCurvesFromReports checks that the curves are drawn from the points' reports, a missing point left out:
// the table lists each figure found, and the PNG decodes.
func TestDrawCurvesFromReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, x := range []int64{1e6, 3e6} {
		r := &Report{Rows: []Row{
			{Scenario: ScenarioRetentionRun, Metric: "wall time", Ours: []string{"0.77 s", "2.10 s"}[i], Baseline: []string{"8.5 s", "26.0 s"}[i], Holds: Holds},
			{Scenario: ScenarioMemory, Metric: "peak RSS of retentiond", Ours: "42 MB", Holds: Holds},
			{Scenario: ScenarioAuditQuery, Metric: "filtered page", Ours: "not run: -only", Holds: NotRun},
		}}
		require.NoError(t, r.WriteJSON(CurvePoint{Curve: "run-by-rows", X: x}.file(dir)))
	}
	listing := &Report{Rows: []Row{{Scenario: ScenarioAPIReads, Metric: listingMetric + " of 200 datasets", Ours: "12 ms", Holds: Holds}}}
	require.NoError(t, listing.WriteJSON(CurvePoint{Curve: "by-datasets", X: 200}.file(dir)))
	var out bytes.Buffer
	path := filepath.Join(dir, "curves.png")
	require.NoError(t, DrawCurves(dir, path, &out))
	// 0.77 s to 2.10 s for 3× the rows: log(2.1/0.77)/log(3) = 0.91; 10× more predicts 2.1 × 10^0.913 = 17.2 s.
	require.Contains(t, out.String(), "| run-by-rows | run | 3,000,000 | 2.1 | 0.91 |")
	require.Contains(t, out.String(), "| run-by-rows | DELETE | 1,000,000 | 8.5 | — |")
	require.Contains(t, out.String(), "| run-by-rows | peak RSS (MB) | 1,000,000 | 42 | — |")
	require.Contains(t, out.String(), "| run-by-rows | run | 2.1 at 3,000,000 | 0.91 | 17.2 at 30,000,000 |")
	require.Contains(t, out.String(), "| run-by-rows | peak RSS (MB) | 42 at 3,000,000 | 0.00 | 42 at 30,000,000 |")
	require.NotContains(t, out.String(), "audit-by-events")
	// The listing's figure is its latency as printed; a p99 figure would be read after its "p99 ".
	require.Contains(t, out.String(), "| by-datasets | GET /dataSets first page | 200 | 0.012 |")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dx(), 500)
}

// TestCurvePointsSkipBigSizes checks that -curves-max-size leaves out the points above it, and that every point
// measures memory too.
func TestCurvePointsSkipBigSizes(t *testing.T) {
	t.Parallel()
	small := CurvePoints(1e6)
	require.NotEmpty(t, small)
	for _, p := range small {
		require.LessOrEqual(t, p.X, int64(1e6), p.Curve)
		require.Contains(t, p.Args[1], "memory")
	}
	require.Greater(t, len(CurvePoints(0)), len(small))
}

// TestTicksLabelEveryPanel holds the axes of the plot readable within a decade: the range goes out to the 1-2-5
// values around it, and those values are labelled.
func TestTicksLabelEveryPanel(t *testing.T) {
	t.Parallel()
	require.Equal(t, 20.0, step125(23, false))
	require.Equal(t, 100.0, step125(70, true))
	require.Equal(t, 0.005, step125(0.0064, false))
	require.Equal(t, 0.01, step125(0.0067, true))
	require.Equal(t, 1e6, step125(1e6, false))
	var labels []string
	for _, tk := range (ticks125{}).Ticks(20, 100) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	require.Equal(t, []string{"20", "50", "100"}, labels)
	require.Equal(t, "3M", tickLabel(3e6))
	require.Equal(t, "500k", tickLabel(5e5))
	require.Equal(t, "0.005", tickLabel(0.005))
}
