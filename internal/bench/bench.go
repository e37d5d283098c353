// Package bench is the benchmark harness of `make bench` (docs/benchmarks.md): it builds the service, starts its own
// PostgreSQL, loads the same rows into the service and into a plain-table baseline, runs every scenario of the
// benchmarks issue against its baseline in the same run on the same machine, and reports one table.
//
// Benchmarks are measurements, not tests: the harness fails only when it cannot measure (a scenario errors, or the
// retention run and the baseline leave different rows), never because a goal does not hold. The table says which
// goals hold. SmokeConfig shrinks every size so that CI can check that the harness works.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Orgs of the harness. Each scenario's datasets live in an org of their own, so that a manual run (which covers
// the caller's org) sweeps only what the scenario means it to.
const (
	orgMain    = "BENCHMAIN000000000000001@AdobeOrg"
	orgTTL     = "BENCHTTL0000000000000001@AdobeOrg"
	orgLoad    = "BENCHLOAD000000000000001@AdobeOrg"
	orgHTTP    = "BENCHHTTP000000000000001@AdobeOrg"
	orgPreview = "BENCHPREVIEW000000000001@AdobeOrg"
)

// Harness databases (their names get a random prefix).
const (
	dbService  = "svc"     // the service's database for the clean retention run
	dbBaseline = "base"    // the plain-table baseline
	dbFloor    = "floor"   // a copy of dbService for the floor
	dbLoad     = "load"    // a copy of dbService for the run under load and the scenarios after it
	dbPgbench  = "pgbench" // pgbench -i
)

type harness struct {
	cfg    Config
	work   string
	root   string
	bins   binaries
	pg     *pgServer
	secret string
	report *Report
	errs   []error
	begin  time.Time

	from, to time.Time
	mainIDs  []string
	mainTTL  map[string]string // dataset id → TTL

	svc   *service
	noise *noiseMonitor

	cliRate, rawCopyRate float64      // rows/s of the 10M-row CLI load and of its raw-COPY baseline
	rawCopySamples       []workSample // the raw COPY's samples: the baseline table's, then a scratch table's
	cliNote              string
	floorTime            time.Duration
	floorNote            string
	// manifestTime is the deletion-manifest scenario's run, plainRunTime the retention run's median trial: the two
	// runs manifestCost compares; manifestRelease and plainRelease are the release jobs they queued.
	manifestTime, plainRunTime    time.Duration
	manifestRelease, plainRelease time.Duration

	// The identities store (identityStore): its datasets, their TTLs, its retentionctl load's time, or why it could
	// not be loaded.
	identIDs  []string
	identTTL  map[string]string
	identLoad time.Duration
	identErr  error

	// deleteJudgements are the rows whose baseline is a DELETE, judged on each other's samples too once all are
	// measured (judgeDeletes).
	deleteJudgements []deleteJudgement
}

// Run runs every scenario and returns the report. The error joins what kept scenarios from measuring; goals that
// do not hold are in the report, not in the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, report: &Report{Started: time.Now(), Command: cfg.Command}, begin: time.Now(), mainTTL: map[string]string{}}
	if h.report.Command == "" {
		h.report.Command = "go run ./cmd/retentionbench"
	}
	h.to = cfg.To
	if h.to.IsZero() {
		h.to = time.Now().UTC().Truncate(time.Millisecond)
	}
	h.from = cfg.From
	if h.from.IsZero() {
		h.from = h.to.AddDate(-2, 0, 0)
	}
	h.report.Sizes = fmt.Sprintf("%s rows in %d datasets (TTLs %s in turn) with event times from %s to %s; TTL-change dataset %s rows; "+
		"HTTP ingestion %s rows per variant into %d datasets by %d clients, %s rows a request; %d load clients, %v idle window; "+
		"API reads %d and %d connections for %v; pgbench scale %d; preview dataset %s rows; audit log %s events; org move %s rows",
		fmtInt(int64(cfg.Rows)), cfg.Datasets, strings.Join(cfg.TTLs, "/"), h.from.Format(time.DateOnly), h.to.Format(time.DateOnly),
		fmtInt(int64(cfg.TTLRows)), fmtInt(int64(cfg.HTTPRows)), cfg.HTTPDatasets, cfg.HTTPStreams, fmtInt(int64(cfg.HTTPBodyRows)),
		cfg.LoadConns, cfg.LoadDuration, cfg.APILatencyConns, cfg.APIConns, cfg.APIDuration, cfg.PgbenchScale, fmtInt(int64(cfg.PreviewRows)), fmtInt(int64(cfg.AuditEvents)), fmtInt(int64(cfg.MoveRows)))
	if cfg.Smoke {
		h.report.Sizes = "SMOKE (figures mean nothing): " + h.report.Sizes
	}
	err := h.run(ctx)
	h.report.Elapsed = time.Since(h.begin)
	if err != nil {
		h.errs = append(h.errs, err)
	}
	for _, s := range Scenarios {
		if !h.report.Has(s) {
			h.report.add(Row{Scenario: s, Holds: NotRun, Note: "not reached: an earlier step failed"})
		}
	}
	h.judgeDeletes()
	h.sortRows()
	return h.report, errors.Join(h.errs...)
}

func (h *harness) run(ctx context.Context) (err error) {
	h.work = h.cfg.WorkDir
	if h.work == "" {
		if h.work, err = os.MkdirTemp("", "retentionbench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(h.work, 0o755); err != nil { //nolint:gosec // the harness's own folder
		return err
	}
	if h.work, err = filepath.Abs(h.work); err != nil {
		return err
	}
	defer func() {
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if stopErr := h.svc.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if h.pg != nil {
			if closeErr := h.pg.close(cleanupCtx); closeErr != nil {
				err = errors.Join(err, closeErr)
			}
		}
		if h.cfg.Keep || err != nil {
			h.step("work folder kept: %s", h.work)
			return
		}
		_ = os.RemoveAll(h.work)
	}()

	if h.root, err = moduleRoot(ctx); err != nil {
		return err
	}
	h.step("building retentiond and retentionctl")
	if h.bins, err = build(ctx, h.root, filepath.Join(h.work, "bin"), h.cfg.BuildFlags); err != nil {
		return err
	}
	h.step("starting PostgreSQL")
	if h.pg, err = startServer(ctx, h.cfg.DatabaseURL, filepath.Join(h.work, "pgdata"), h.cfg.PGSettings); err != nil {
		return err
	}
	roots := []int{os.Getpid()}
	if h.pg.cluster != nil {
		if pid, err := postmasterPID(h.pg.cluster.DataDir()); err == nil {
			roots = append(roots, pid)
		}
	}
	h.noise = startNoiseMonitor(roots...)
	defer func() {
		h.noise.close()
		summary := h.noise.summary()
		if h.pg.cluster == nil {
			summary += "; the given server's processes count as other load"
		}
		h.report.Machine = append(h.report.Machine, summary)
	}()
	h.secret = randomHex(32)
	h.report.Machine = machineFacts()
	if facts, err := h.pg.settingsFacts(ctx); err == nil {
		h.report.Machine = append(h.report.Machine, facts...)
	}

	// Every later scenario works on the data loaded here; without it nothing can be measured.
	if err := h.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	h.scenario([]string{ScenarioFloor}, func() error { return h.floor(ctx) })
	h.scenario([]string{ScenarioHeldDataset}, func() error { return h.heldRun(ctx) })
	h.scenario([]string{ScenarioManifest}, func() error { return h.manifestRun(ctx) })
	if err := h.pg.cloneDatabase(ctx, dbService, dbLoad); err != nil {
		return err
	}
	h.scenario([]string{ScenarioRetentionRun, ScenarioMemory}, func() error { return h.retentionRun(ctx) })
	h.manifestCost()
	h.scenario([]string{ScenarioWorkOrder}, func() error { return h.workOrder(ctx) })

	if err := h.useService(ctx, dbLoad, "retentiond-load.log"); err != nil {
		return err
	}
	h.scenario([]string{ScenarioRunUnderLoad}, func() error { return h.runUnderLoad(ctx) })
	h.scenario([]string{ScenarioTTLChange}, func() error { return h.ttlChange(ctx) })
	h.scenario([]string{ScenarioAPIReads}, func() error { return errors.Join(h.apiReads(ctx), h.datasetListing(ctx)) })
	h.scenario([]string{ScenarioCellRouting}, func() error { return h.cellRouting(ctx) })
	h.scenario([]string{ScenarioOrgMove}, func() error { return h.orgMove(ctx) })
	h.scenario([]string{ScenarioBacklog}, func() error { return h.expiredBacklog(ctx) })
	h.scenario([]string{ScenarioIngestion}, func() error { return h.ingestion(ctx) })
	h.scenario([]string{ScenarioPreview}, func() error { return h.preview(ctx) })
	h.scenario([]string{ScenarioAuditQuery}, func() error { return h.auditQuery(ctx) })
	h.scenario([]string{ScenarioAuditChain}, func() error { return h.auditChain(ctx) })
	return nil
}

// scenario runs one scenario; a failure is recorded in its rows and the harness goes on with the next one.
func (h *harness) scenario(names []string, fn func() error) {
	if len(h.cfg.Only) > 0 && !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(h.cfg.Only, scenarioKey(n)) }) {
		for _, n := range names {
			h.report.add(notRun(n, "", "-only", "not measured in this run"))
		}
		return
	}
	start := time.Now()
	first := len(h.report.Rows)
	err := fn()
	if share := h.noise.share(start, time.Now()); share >= 0.05 {
		for i := first; i < len(h.report.Rows); i++ {
			r := &h.report.Rows[i]
			r.Note = strings.TrimSpace(r.Note + fmt.Sprintf(" (Other processes on the machine used %s of its CPU during this scenario: the figures are pessimistic.)", fmtPct(share)))
		}
	}
	if err == nil {
		h.step("%s: done in %s", strings.Join(names, ", "), fmtDur(time.Since(start)))
		return
	}
	h.step("%s: FAILED: %v", strings.Join(names, ", "), err)
	h.errs = append(h.errs, fmt.Errorf("%s: %w", strings.Join(names, ", "), err))
	for _, s := range names {
		if !h.report.Has(s) {
			h.report.add(Row{Scenario: s, Holds: Errored, Note: "could not measure: " + err.Error()})
		}
	}
}

// step prints a progress line.
func (h *harness) step(format string, args ...any) {
	if h.cfg.Progress == nil {
		return
	}
	el := time.Since(h.begin).Round(time.Second)
	fmt.Fprintf(h.cfg.Progress, "[%02d:%02d] %s\n", int(el.Minutes()), int(el.Seconds())%60, fmt.Sprintf(format, args...))
}

// useService stops the running retentiond, if any, and starts a fresh one on the database.
func (h *harness) useService(ctx context.Context, db, logName string) error {
	if err := h.svc.stop(); err != nil {
		return err
	}
	h.svc = nil
	var extra map[string]string
	if h.cfg.CPUProfileDir != "" {
		addr, err := freeAddr(ctx)
		if err != nil {
			return err
		}
		extra = map[string]string{"PPROF_ADDR": addr}
	}
	svc, err := startService(ctx, h.bins.retentiond, h.pg.url(db), h.secret, filepath.Join(h.work, logName), extra)
	if err != nil {
		return err
	}
	h.svc = svc
	return nil
}

func (h *harness) stopService() error {
	err := h.svc.stop()
	h.svc = nil
	return err
}

// client returns an API client of the org on the running retentiond.
func (h *harness) client(org string) (*apiClient, error) {
	if h.svc == nil {
		return nil, errors.New("no retentiond is running")
	}
	return newAPIClient(h.svc.base, h.secret, org)
}

// sortRows puts the rows in the order of Scenarios, keeping each scenario's rows in the order they came.
func (h *harness) sortRows() {
	var out []Row
	for _, s := range Scenarios {
		out = append(out, h.report.Find(s)...)
	}
	h.report.Rows = out
}

// postmasterPID reads the server's process id from its lock file.
func postmasterPID(dataDir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid")) //nolint:gosec // the cluster's lock file
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// machineFacts describes the machine the figures come from.
func machineFacts() []string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	kernel := "unknown"
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(data))
	}
	return []string{
		fmt.Sprintf("CPU: %d cores (%s), memory %s, Linux %s", runtime.NumCPU(), model, mem, kernel),
		fmt.Sprintf("Go: %s; the harness, retentiond, retentionctl and Postgres all run on this machine and share its cores", runtime.Version()),
	}
}
