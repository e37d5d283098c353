package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/bench"
	"github.com/acme/retention/internal/testdb"
)

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Ensure the harness runs every scenario end to end at smoke size, against the server of TEST_DATABASE_URL, and that
// the retention run leaves exactly the rows the baseline DELETE leaves. Figures are not checked: on a shared CI
// machine they mean nothing.
func TestSmoke(t *testing.T) {
	t.Parallel()
	cfg := bench.SmokeConfig()
	cfg.DatabaseURL = testdb.URL(t)
	cfg.BuildFlags = raceFlags
	cfg.WorkDir = t.TempDir()
	cfg.Progress = testWriter{t}
	// A bound that only turns a hang into a failure: the smoke run builds three binaries with -race, and under a load
	// of 40 on 2 cores the builds alone took over 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	report, err := bench.Run(ctx, cfg)
	require.NoError(t, err)
	require.True(t, report.RowsIdentical, "the retention run and the baseline left different rows")
	for _, s := range bench.Scenarios {
		rows := report.Find(s)
		require.NotEmpty(t, rows, "no row for scenario %q", s)
		for _, r := range rows {
			require.NotEqual(t, bench.Errored, r.Holds, "%s: %s", s, r.Note)
		}
	}
	for _, s := range []string{bench.ScenarioRetentionRun, bench.ScenarioWorkOrder, bench.ScenarioFloor, bench.ScenarioRunUnderLoad, bench.ScenarioTTLChange,
		bench.ScenarioIngestion, bench.ScenarioAPIReads, bench.ScenarioCellRouting, bench.ScenarioOrgMove, bench.ScenarioMemory} {
		for _, r := range report.Find(s) {
			require.NotEqual(t, bench.NotRun, r.Holds, "%s did not run: %s", s, r.Note)
		}
	}
	// The by-datasets cost curve reads the listing's row by its metric.
	require.True(t, slices.ContainsFunc(report.Find(bench.ScenarioAPIReads), func(r bench.Row) bool {
		return strings.HasPrefix(r.Metric, "GET /dataSets, first page of ") && r.Holds != bench.NotRun
	}), "no GET /dataSets row in %+v", report.Find(bench.ScenarioAPIReads))
	var text strings.Builder
	require.NoError(t, report.WriteText(&text))
	for _, s := range bench.Scenarios {
		require.Contains(t, text.String(), s)
	}
}

// Ensure -write-doc replaces only the generated part of the doc, keeping the hand-written text around it.
func TestWriteDocKeepsHandWrittenText(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	report := &bench.Report{Started: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Command: "make bench",
		Rows: []bench.Row{{Scenario: bench.ScenarioMemory, Metric: "peak RSS", Ours: "42 MB", Goal: "< 150 MB", Holds: bench.Holds, Note: "VmHWM | of retentiond"}}}
	require.NoError(t, report.WriteDoc(path))
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(first), "| memory: peak RSS [1] | 42 MB | — | — | < 150 MB | yes |")
	require.Contains(t, string(first), `VmHWM \| of retentiond`)

	begin := strings.Index(string(first), "<!--")
	require.GreaterOrEqual(t, begin, 0)
	doc := "# Benchmarks\n\nHand-written intro.\n\n" + string(first)[begin:] + "\n## Notes\n\nHand-written notes.\n"
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	report.Rows[0].Ours = "43 MB"
	require.NoError(t, report.WriteDoc(path))
	second, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(second), "Hand-written intro.")
	require.Contains(t, string(second), "## Notes\n\nHand-written notes.")
	require.Contains(t, string(second), "| 43 MB |")
	require.NotContains(t, string(second), "| 42 MB |")
	require.Equal(t, 1, strings.Count(string(second), "retentionbench:begin"))
}
