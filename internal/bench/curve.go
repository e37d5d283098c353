package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// A cost curve is how one figure grows with the work (issue #20): each point is one retentionbench invocation a
// reader can rerun, its report written as JSON (-json), and the curves are drawn from those files.

// CurvePoint is one invocation of a curve: its size on the curve's axis and the flags that measure it.
type CurvePoint struct {
	Curve string // which curve, also the panel of the plot
	X     int64  // the size on the curve's axis: rows, datasets or audit events
	Args  []string
}

// curveFigure is a figure a curve draws from a point's report: a row of a scenario whose metric starts with
// metric, its Ours figure (or its Baseline's, with baseline set).
type curveFigure struct {
	label, scenario, metric string
	baseline                bool
}

// curveSpec is one curve: its axis, its figures and its sizes.
type curveSpec struct {
	name, xLabel, yLabel string
	figures              []curveFigure
	sizes                []int64
	args                 func(x int64) []string
}

var runFigures = []curveFigure{
	{"run", ScenarioRetentionRun, "wall time", false},
	{"DELETE", ScenarioRetentionRun, "wall time", true},
}

// curveSpecs are the curves. Every invocation also measures memory, so each point gives retentiond's peak
// RSS.
var curveSpecs = []curveSpec{
	{name: "run-by-rows", xLabel: "rows (200 datasets)", yLabel: "s", figures: runFigures,
		sizes: []int64{1e6, 3e6, 10e6, 30e6},
		args: func(x int64) []string {
			return []string{"-only", "retention-run,memory", "-rows", itoa(x), "-datasets", "200"}
		}},
	{name: "by-datasets", xLabel: "datasets (10M rows)", yLabel: "s", sizes: []int64{200, 1000, 5000},
		figures: append(slices.Clone(runFigures), curveFigure{"TTL change", ScenarioTTLChange, "", false},
			curveFigure{"GET /dataSets first page", ScenarioAPIReads, listingMetric, false}),
		args: func(x int64) []string {
			return []string{"-only", "retention-run,ttl-change,api-reads,memory", "-rows", "10000000", "-datasets", itoa(x)}
		}},
	{name: "ingestion-by-store", xLabel: "rows in the store", yLabel: "rows/s", sizes: []int64{1e6, 10e6, 30e6},
		figures: []curveFigure{{"POST with _id", ScenarioIngestion, "POST rows, events with _id", false},
			{"POST without _id", ScenarioIngestion, "POST rows, events without _id", false},
			{"raw COPY", ScenarioIngestion, "POST rows, events with _id", true}},
		args: func(x int64) []string { return []string{"-only", "ingestion,memory", "-rows", itoa(x)} }},
	{name: "audit-by-events", xLabel: "audit events", yLabel: "s", sizes: []int64{1e6, 10e6, 30e6},
		figures: []curveFigure{{"filtered page", ScenarioAuditQuery, "", false}},
		args: func(x int64) []string {
			return []string{"-only", "audit-query,memory", "-rows", "1000000", "-audit-events", itoa(x)}
		}},
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// CurvePoints lists the points of every curve whose size is at most maxSize (0: all of them), smallest first.
func CurvePoints(maxSize int64) []CurvePoint {
	var out []CurvePoint
	for _, c := range curveSpecs {
		for _, x := range c.sizes {
			size := x
			if c.name == "by-datasets" {
				size = 10e6 // its rows
			}
			if maxSize > 0 && size > maxSize {
				continue
			}
			out = append(out, CurvePoint{Curve: c.name, X: x, Args: c.args(x)})
		}
	}
	return out
}

// file is where a point's report is written, in the curves folder.
func (p CurvePoint) file(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d.json", p.Curve, p.X))
}

// RunCurves measures each point that has no report in dir yet, one invocation of exe (retentionbench) each, with
// extra flags after the point's own, then draws the curves of every report in dir into png and writes their table
// to out.
func RunCurves(ctx context.Context, exe, dir, png string, maxSize int64, extra []string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for _, p := range CurvePoints(maxSize) {
		if _, err := os.Stat(p.file(dir)); err == nil {
			fmt.Fprintf(out, "%s: kept %s\n", p.Curve, p.file(dir))
			continue
		}
		args := append(append(slices.Clone(p.Args), extra...), "-json", p.file(dir))
		fmt.Fprintf(out, "%s: retentionbench %s\n", p.Curve, strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		// Interrupted, a point stops as a bench run does on Ctrl-C, stopping its own PostgreSQL; killed outright,
		// it would leave that cluster running and its folder behind.
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = time.Minute
		if err := cmd.Run(); err != nil {
			// A point that failed or was interrupted may still have written its report: measured again next time,
			// not kept as if it were whole.
			_ = os.Remove(p.file(dir))
			return fmt.Errorf("%s at %d: %w", p.Curve, p.X, err)
		}
	}
	return DrawCurves(dir, png, out)
}

// curveValue is one figure at one point.
type curveValue struct {
	x, y float64
}

// readCurves reads the reports in dir and returns, per curve and figure label, its values in size order, and per
// curve the peak RSS of retentiond at each point, in MB.
func readCurves(dir string) (map[string]map[string][]curveValue, error) {
	out := map[string]map[string][]curveValue{}
	for _, c := range curveSpecs {
		out[c.name] = map[string][]curveValue{}
		for _, x := range c.sizes {
			raw, err := os.ReadFile(CurvePoint{Curve: c.name, X: x}.file(dir))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			var r Report
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("read %s at %d: %w", c.name, x, err)
			}
			for _, f := range append(slices.Clone(c.figures), curveFigure{"peak RSS (MB)", ScenarioMemory, "", false}) {
				if v, ok := f.value(r); ok {
					out[c.name][f.label] = append(out[c.name][f.label], curveValue{float64(x), v})
				}
			}
		}
	}
	return out, nil
}

// value finds the figure in a report.
func (f curveFigure) value(r Report) (float64, bool) {
	for _, row := range r.Rows {
		if row.Scenario != f.scenario || !strings.HasPrefix(row.Metric, f.metric) || row.Holds == NotRun {
			continue
		}
		s := row.Ours
		if f.baseline {
			s = row.Baseline
		}
		if _, p99, ok := strings.Cut(s, "p99 "); ok {
			s = p99 // "1,234 req/s, p99 12 ms": the latency, not the rate
		}
		return parseFigure(s)
	}
	return 0, false
}

// parseFigure reads a figure as the report prints it ("3.48 s", "734 ms", "25,003 rows/s", "42 MB"), durations in
// seconds; anything after the unit (" (raw COPY)") is ignored.
func parseFigure(s string) (float64, bool) {
	fields := strings.Fields(strings.ReplaceAll(s, ",", ""))
	if len(fields) < 2 {
		return 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, false
	}
	switch fields[1] {
	case "ms":
		v /= 1000
	case "µs":
		v /= 1e6
	}
	return v, true
}

// DrawCurves draws the curves of the reports in dir into a PNG, one panel a curve and one for memory, on log-log
// axes (a straight line of slope k is a cost growing as size^k), and writes two Markdown tables to out: every
// point with its growth exponent from the point before, and what each figure's last segment predicts at 10× the
// largest size measured.
func DrawCurves(dir, png string, out io.Writer) error {
	curves, err := readCurves(dir)
	if err != nil {
		return err
	}
	var plots []*plot.Plot
	memory := newPlot("peak RSS of retentiond", "point size", "MB")
	var memLines []any
	var predictions []string
	fmt.Fprintln(out, "| curve | figure | size | value | exponent from the point before |\n| --- | --- | --- | --- | --- |")
	for _, c := range curveSpecs {
		p := newPlot(c.name, c.xLabel, c.yLabel)
		var lines []any
		for _, f := range append(slices.Clone(c.figures), curveFigure{label: "peak RSS (MB)"}) {
			vs := curves[c.name][f.label]
			for i, v := range vs {
				growth := "—"
				if i > 0 {
					growth = fmt.Sprintf("%.2f", exponent(vs[i-1], v))
				}
				fmt.Fprintf(out, "| %s | %s | %s | %.4g | %s |\n", c.name, f.label, fmtInt(int64(v.x)), v.y, growth)
			}
			if len(vs) >= 2 {
				last, k := vs[len(vs)-1], exponent(vs[len(vs)-2], vs[len(vs)-1])
				predictions = append(predictions, fmt.Sprintf("| %s | %s | %.4g at %s | %.2f | %.3g at %s |", c.name,
					f.label, last.y, fmtInt(int64(last.x)), k, last.y*math.Pow(10, k), fmtInt(int64(last.x*10))))
			}
			if len(vs) == 0 {
				continue
			}
			var pts plotter.XYs
			for _, v := range vs {
				if v.x > 0 && v.y > 0 { // a log axis has no place for 0; the table still lists it
					pts = append(pts, plotter.XY{X: v.x, Y: v.y})
				}
			}
			if len(pts) == 0 {
				continue
			}
			if f.scenario == "" {
				memLines = append(memLines, c.name, pts)
				continue
			}
			lines = append(lines, f.label, pts)
		}
		if err := addLogLogLines(p, lines); err != nil {
			return err
		}
		plots = append(plots, p)
	}
	fmt.Fprintln(out, "\n| curve | figure | largest measured | exponent of the last segment | predicted at 10× |\n| --- | --- | --- | --- | --- |")
	fmt.Fprintln(out, strings.Join(predictions, "\n"))
	if err := addLogLogLines(memory, memLines); err != nil {
		return err
	}
	return writePNG(append(plots, memory), png)
}

// exponent is the slope between two points on log-log axes: k where the figure grows as size^k between them.
func exponent(a, b curveValue) float64 {
	if a.x <= 0 || b.x <= 0 || a.y <= 0 || b.y <= 0 || a.x == b.x {
		return math.NaN()
	}
	return math.Log(b.y/a.y) / math.Log(b.x/a.x)
}

// newPlot is an empty panel with its title and axis labels.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	return p
}

// addLogLogLines draws the lines (label, points, label, points…) on logarithmic axes, so that curves spanning 30×
// in size and growing at different rates stay readable side by side. A panel without points keeps linear axes:
// a logarithmic one has no range to draw.
func addLogLogLines(p *plot.Plot, lines []any) error {
	if len(lines) == 0 {
		return nil
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Scale, a.Tick.Marker = plot.LogScale{}, ticks125{}
		// One point, or one value: widen by a factor rather than by ±1 as a linear axis does, which could reach
		// below zero.
		if a.Min == a.Max {
			a.Min, a.Max = a.Min/2, a.Max*2
		}
		// Out to the 1-2-5 values around the range, so that even a panel spanning less than a decade (memory, a
		// flat latency) has labelled ticks at both ends.
		a.Min, a.Max = step125(a.Min, false), step125(a.Max, true)
	}
	return nil
}

// ticks125 marks a logarithmic axis at 1, 2 and 5 times each power of ten, labelled (powers of ten alone over more
// than three decades), and at the other integers times it, unlabelled: gonum's LogTicks labels powers of ten only,
// which leaves a panel within one decade bare.
type ticks125 struct{}

// Ticks implements plot.Ticker.
func (ticks125) Ticks(minV, maxV float64) []plot.Tick {
	var out []plot.Tick
	for k := math.Floor(math.Log10(minV)); k <= math.Ceil(math.Log10(maxV)); k++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, k)
			if v < minV*(1-1e-9) || v > maxV*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			// Over more than three decades (the memory panel's sizes), 2 and 5 would crowd the labels.
			if m == 1 || (m == 2 || m == 5) && maxV/minV <= 1000 {
				t.Label = tickLabel(v)
			}
			out = append(out, t)
		}
	}
	return out
}

// step125 returns the 1-2-5 value (1, 2 or 5 times a power of ten) at or below v, or at or above it with up.
func step125(v float64, up bool) float64 {
	k := math.Pow(10, math.Floor(math.Log10(v)))
	steps := []float64{1, 2, 5, 10}
	if up {
		for _, m := range steps {
			if m*k >= v*(1-1e-9) {
				return m * k
			}
		}
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i]*k <= v*(1+1e-9) {
			return steps[i] * k
		}
	}
	return k
}

// tickLabel writes a tick's value short: 2M, 500k, 20, 0.005.
func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// writePNG draws the panels on a grid of three columns.
func writePNG(plots []*plot.Plot, path string) error {
	const cols = 3
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range plots {
		grid[i/cols][i%cols] = p
	}
	img := vgimg.New(vg.Length(cols)*4*vg.Inch, vg.Length(rows)*3*vg.Inch)
	dc := draw.New(img)
	canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}, dc)
	for i, row := range grid {
		for j, p := range row {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path) //nolint:gosec // G304: the operator names the plot's file (-curves-png)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
