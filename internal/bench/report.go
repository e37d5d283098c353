package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Scenario names, one per row group of the table (the first column). The test checks that a run reports
// every one of them.
const (
	ScenarioRetentionRun = "retention run"
	ScenarioHeldDataset  = "held dataset"
	ScenarioManifest     = "deletion manifest"
	ScenarioWorkOrder    = "work order"
	ScenarioRunUnderLoad = "run under load"
	ScenarioFloor        = "floor"
	ScenarioTTLChange    = "TTL change"
	ScenarioIngestion    = "ingestion"
	ScenarioAPIReads     = "API reads"
	ScenarioPreview      = "preview"
	ScenarioAuditQuery   = "audit query"
	ScenarioAuditChain   = "audit chain"
	ScenarioMemory       = "memory"
	ScenarioCellRouting  = "cell routing"
	ScenarioOrgMove      = "org move"
	ScenarioBacklog      = "expired backlog"
)

// Scenarios lists the scenarios in the order of the table.
var Scenarios = []string{
	ScenarioRetentionRun, ScenarioHeldDataset, ScenarioManifest, ScenarioWorkOrder, ScenarioRunUnderLoad, ScenarioFloor, ScenarioTTLChange,
	ScenarioIngestion, ScenarioAPIReads, ScenarioCellRouting, ScenarioOrgMove, ScenarioBacklog, ScenarioPreview, ScenarioAuditQuery,
	ScenarioAuditChain, ScenarioMemory,
}

// Verdict says whether a row's goal holds.
type Verdict string

// Verdicts.
const (
	Holds   Verdict = "yes"
	Fails   Verdict = "NO"
	NoGoal  Verdict = "n/a"
	NotRun  Verdict = "not run"
	Errored Verdict = "error"
)

func verdict(ok bool) Verdict {
	if ok {
		return Holds
	}
	return Fails
}

// Row is one line of the table: one figure of a scenario against its baseline and goal.
type Row struct {
	Scenario string // one of Scenarios
	Metric   string // what the figures measure, such as "wall time" or "GET /ttl/{id}"
	Ours     string
	Baseline string
	Ratio    string
	Goal     string
	Holds    Verdict
	Note     string // how it was measured, or why the goal does not hold
}

// Report is the outcome of a harness run.
type Report struct {
	Rows []Row
	// RowsIdentical is true when the retention run left exactly the rows the baseline DELETE left (count and
	// checksum per dataset).
	RowsIdentical bool
	Started       time.Time
	Elapsed       time.Duration
	Machine       []string // facts about the machine and the Postgres server, one per line
	Command       string
	Sizes         string
}

func (r *Report) add(row Row) { r.Rows = append(r.Rows, row) }

// Has reports whether the report holds a row of the scenario.
func (r *Report) Has(scenario string) bool {
	for _, row := range r.Rows {
		if row.Scenario == scenario {
			return true
		}
	}
	return false
}

// Find returns the rows of the scenario.
func (r *Report) Find(scenario string) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Scenario == scenario {
			out = append(out, row)
		}
	}
	return out
}

func (row Row) label() string {
	if row.Metric == "" {
		return row.Scenario
	}
	return row.Scenario + ": " + row.Metric
}

// WriteText prints the table and its notes for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tours\tbaseline\tratio\tgoal\tholds\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", row.label(), dash(row.Ours), dash(row.Baseline), dash(row.Ratio), dash(row.Goal), row.Holds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(w, "[%d] %s: %s\n", i+1, row.label(), row.Note)
		}
	}
	return nil
}

// Markdown renders the generated part of docs/benchmarks.md: when and how it ran, the machine, the table and the
// notes of each row.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Latest run: %s UTC, %s of wall time for the whole harness.\n\n", r.Started.UTC().Format("2006-01-02 15:04"), r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	if r.Sizes != "" {
		fmt.Fprintf(&b, "Sizes: %s\n\n", r.Sizes)
	}
	b.WriteString("Machine:\n\n")
	for _, m := range r.Machine {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	b.WriteString("\n| scenario | ours | baseline | ratio | goal | holds |\n| --- | --- | --- | --- | --- | --- |\n")
	for i, row := range r.Rows {
		label := mdEscape(row.label())
		if row.Note != "" {
			label += fmt.Sprintf(" [%d]", i+1)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", label, mdEscape(dash(row.Ours)), mdEscape(dash(row.Baseline)),
			mdEscape(dash(row.Ratio)), mdEscape(dash(row.Goal)), mdVerdict(row.Holds))
	}
	b.WriteString("\n")
	for i, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(&b, "%d. %s: %s\n", i+1, mdEscape(row.label()), mdEscape(row.Note))
		}
	}
	return b.String()
}

func mdVerdict(v Verdict) string {
	if v == Fails {
		return "**no**"
	}
	return string(v)
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// Markers delimit the generated part of docs/benchmarks.md; the text around them is written by hand.
const (
	docBegin = "<!-- retentionbench:begin (generated by `make bench`; edit outside these markers) -->"
	docEnd   = "<!-- retentionbench:end -->"
)

// WriteDoc replaces the generated part of the Markdown file at path with the report, keeping the hand-written text
// around it. A file without the markers gets them appended.
func (r *Report) WriteDoc(path string) error {
	old, err := os.ReadFile(path) //nolint:gosec // the caller names the doc
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	text := string(old)
	block := docBegin + "\n\n" + r.Markdown() + "\n" + docEnd
	i, j := strings.Index(text, docBegin), strings.Index(text, docEnd)
	switch {
	case i >= 0 && j > i:
		text = text[:i] + block + text[j+len(docEnd):]
	case text == "":
		text = "# Benchmarks\n\n" + block + "\n"
	default:
		text = strings.TrimRight(text, "\n") + "\n\n" + block + "\n"
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil { //nolint:gosec // a document in the repository
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Formatting of figures.

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

func fmtRate(perSec float64, unit string) string {
	return fmtInt(int64(perSec+0.5)) + " " + unit
}

func fmtInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtRatio(x float64) string {
	switch {
	case x >= 10:
		return fmt.Sprintf("%.0f×", x)
	case x >= 1:
		return fmt.Sprintf("%.1f×", x)
	default:
		return fmt.Sprintf("%.2f×", x)
	}
}

func fmtPct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func fmtBytes(n int64) string {
	return fmt.Sprintf("%.0f MB", float64(n)/(1<<20))
}

// WriteJSON writes the report to path as JSON, which DrawCurves reads.
func (r *Report) WriteJSON(path string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
