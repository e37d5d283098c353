package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/acme/retention/catalog"
)

// Config holds the sizes and settings of a harness run. DefaultConfig has the sizes; SmokeConfig shrinks
// them so that a run only checks that the harness works.
type Config struct {
	// Rows, Datasets and TTLs describe the retention-run data: Rows rows spread over Datasets datasets of one org,
	// dataset i getting TTLs[i % len(TTLs)], with event times uniform over [From, To) (To zero: now; From zero: two
	// years before To).
	Rows     int
	Datasets int
	TTLs     []string
	From, To time.Time
	Seed     uint64
	// LoadWorkers is retentionctl load's -workers, and the number of COPY streams of the raw-COPY baseline.
	LoadWorkers int
	// RunTrials is how many times the retention run and its baseline DELETE are timed, each pair on its own copy of
	// the data; the report takes the pair with the median ratio.
	RunTrials int

	// People is how many people the identities store's rows belong to (the retention-run data again, each row
	// carrying one person's identityMap); 0 means one for every 10 rows. WorkOrderIdentities is how many of them the
	// work order names; 0 means a tenth of the people, at most catalog.MaxWorkOrderIdentities.
	People, WorkOrderIdentities int

	// TTLRows is the size of the dataset whose TTL is shortened, then lengthened.
	TTLRows int
	// HTTPRows rows are posted in bodies of HTTPBodyRows rows by HTTPStreams clients at once, over HTTPDatasets
	// datasets, once with client _ids and once without.
	HTTPRows, HTTPDatasets, HTTPStreams, HTTPBodyRows int
	// LoadConns clients read GET /ttl/{id} during the run under load and the TTL change; LoadDuration is the idle
	// measurement of the run-under-load scenario.
	LoadConns    int
	LoadDuration time.Duration
	// APIConns clients read for APIDuration each endpoint, for the throughput goal; pgbench -S runs as long with as
	// many clients, or, when PgbenchTransactions is positive, until each client has run that many transactions: a
	// floor of work rather than of time, so that a slow or busy machine still measures something. APILatencyConns
	// clients read each endpoint as long before, for the latency goal.
	APIConns            int
	APILatencyConns     int
	APIDuration         time.Duration
	PgbenchScale        int
	PgbenchJobs         int
	PgbenchTransactions int
	// PreviewRows is the size of the dataset GET /ttl/{id}/preview is timed on; AuditEvents the size of the audit
	// log a filtered page of GET /audit/events is read from.
	PreviewRows int
	AuditEvents int
	// MoveRows is the size of the org that retentionctl org move moves between two cells.
	MoveRows int

	// DatabaseURL names an existing server (a superuser URL) to create the harness's databases on, instead of
	// starting a private cluster. The harness drops its databases when it ends.
	DatabaseURL string
	// PGSettings are the postgresql.conf settings of the private cluster.
	PGSettings map[string]string
	// BuildFlags are passed to go build, such as -race for the test under the race detector.
	BuildFlags []string
	// WorkDir holds the binaries, logs, exported rows and the private cluster; "" is a new temporary folder,
	// removed at the end unless Keep is set.
	WorkDir string
	Keep    bool

	// Only, when not empty, names the scenarios to measure (their names in lower case, spaces as dashes, such as
	// retention-run or ttl-change); the others are reported as not run. For working on one scenario: -write-doc
	// refuses a partial table.
	Only []string

	// CPUProfileDir, when set, receives a CPU profile of retentiond (PPROF_ADDR) during each API-reads
	// measurement at APIConns connections, one file an endpoint (ttl-64.pprof, dataSets-64.pprof), during the first
	// 8 s of each ingestion variant (ingest-http-id.pprof, ingest-http-ident.pprof, …) and during the work order
	// (workorder.pprof).
	CPUProfileDir string

	// JSONPath, when set, receives the report as JSON: a point of a cost curve.
	JSONPath string
	// CurvesDir, when set, turns the run into the cost curves' (RunCurves): each point one invocation of this
	// command, its report kept in CurvesDir, points above CurvesMaxSize rows or events skipped, the plot drawn
	// into CurvesPNG.
	CurvesDir     string
	CurvesPNG     string
	CurvesMaxSize int64

	Smoke    bool
	WriteDoc bool
	DocPath  string
	// Command is how the run was started, as the doc shows it.
	Command string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// DefaultPGSettings are the private cluster's settings: durable (fsync, synchronous commit and full-page writes
// on, as in production and in the reference measurements), with shared_buffers and max_wal_size as in the
// reference's §7, and room for pgbench's 64 clients beside the service's pool.
func DefaultPGSettings() map[string]string {
	return map[string]string{
		"shared_buffers":     "512MB",
		"max_wal_size":       "4GB",
		"fsync":              "on",
		"synchronous_commit": "on",
		"full_page_writes":   "on",
		"max_connections":    "300",
	}
}

// DefaultConfig returns the sizes.
func DefaultConfig() Config {
	return Config{
		Rows: 10_000_000, Datasets: 200, TTLs: []string{"P6M", "P12M", "P18M", "P24M", "P36M"}, Seed: 1, LoadWorkers: 2, RunTrials: 3,
		TTLRows:  1_000_000,
		HTTPRows: 1_000_000, HTTPDatasets: 10, HTTPStreams: 2, HTTPBodyRows: 5000,
		LoadConns: 4, LoadDuration: 10 * time.Second,
		APIConns: 64, APILatencyConns: 16, APIDuration: 10 * time.Second, PgbenchScale: 10, PgbenchJobs: 2,
		PreviewRows: 10_000_000, AuditEvents: 10_000_000, MoveRows: 1_000_000,
		PGSettings: DefaultPGSettings(),
		DocPath:    "docs/benchmarks.md",
	}
}

// SmokeConfig returns sizes small enough for the whole harness to finish in well under a minute: it checks that
// every scenario runs, not how fast.
func SmokeConfig() Config {
	c := DefaultConfig()
	c.Smoke = true
	c.Rows, c.Datasets = 50_000, 10
	c.RunTrials = 1
	c.TTLRows = 10_000
	c.HTTPRows, c.HTTPDatasets, c.HTTPBodyRows = 10_000, 2, 2000
	c.LoadConns, c.LoadDuration = 2, time.Second
	c.APIConns, c.APILatencyConns, c.APIDuration, c.PgbenchScale = 16, 4, time.Second, 1
	// A second of pgbench with 16 clients can end before any of them completes a transaction on a loaded machine.
	c.PgbenchTransactions = 50
	c.PreviewRows, c.AuditEvents, c.MoveRows = 10_000, 10_000, 10_000
	return c
}

func (c *Config) validate() error {
	var errs []error
	if c.Rows < 1 || c.Datasets < 1 || c.Datasets > c.Rows {
		errs = append(errs, fmt.Errorf("-rows (%d) and -datasets (%d) must be positive, with no more datasets than rows", c.Rows, c.Datasets))
	}
	if c.RunTrials%2 == 0 {
		errs = append(errs, fmt.Errorf("-run-trials must be odd, so that one trial is the median; got %d", c.RunTrials))
	}
	if len(c.TTLs) == 0 {
		errs = append(errs, errors.New("-ttls must name at least one period"))
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"-load-workers", c.LoadWorkers}, {"-run-trials", c.RunTrials}, {"-ttl-rows", c.TTLRows}, {"-http-rows", c.HTTPRows}, {"-http-datasets", c.HTTPDatasets},
		{"-http-streams", c.HTTPStreams}, {"-http-body-rows", c.HTTPBodyRows}, {"-load-conns", c.LoadConns}, {"-api-conns", c.APIConns}, {"-api-latency-conns", c.APILatencyConns},
		{"-pgbench-scale", c.PgbenchScale}, {"-pgbench-jobs", c.PgbenchJobs}, {"-preview-rows", c.PreviewRows}, {"-audit-events", c.AuditEvents},
		{"-move-rows", c.MoveRows}} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", n.name, n.v))
		}
	}
	if c.People < 0 || c.WorkOrderIdentities < 0 {
		errs = append(errs, fmt.Errorf("-people (%d) and -workorder-identities (%d) must be 0 (scaled with -rows) or positive", c.People, c.WorkOrderIdentities))
	} else if c.Rows > 0 {
		if n := c.workOrderIdentities(); n > catalog.MaxWorkOrderIdentities || n > c.people() {
			errs = append(errs, fmt.Errorf("-workorder-identities (%d) must be at most %d (an order's bound) and at most -people (%d)",
				n, catalog.MaxWorkOrderIdentities, c.people()))
		}
	}
	if c.PgbenchTransactions < 0 {
		errs = append(errs, fmt.Errorf("-pgbench-transactions must be 0 (run for -api-duration) or more, got %d", c.PgbenchTransactions))
	}
	if c.LoadDuration <= 0 || c.APIDuration <= 0 {
		errs = append(errs, errors.New("-load-duration and -api-duration must be positive"))
	}
	for _, key := range c.Only {
		if !slices.ContainsFunc(Scenarios, func(s string) bool { return scenarioKey(s) == key }) {
			errs = append(errs, fmt.Errorf("-only: no scenario %q (the scenarios: %s)", key, strings.Join(scenarioKeys(), ", ")))
		}
	}
	if len(c.Only) > 0 && c.WriteDoc {
		errs = append(errs, errors.New("-only and -write-doc do not go together: the doc keeps the whole table"))
	}
	if !c.From.IsZero() && !c.To.IsZero() && !c.To.After(c.From) {
		errs = append(errs, errors.New("-to must be after -from"))
	}
	return errors.Join(errs...)
}

// ParseFlags reads the command line of retentionbench: -smoke picks the smoke sizes as the defaults, and any other
// flag overrides one of them.
func ParseFlags(args []string, output io.Writer) (Config, error) {
	c := DefaultConfig()
	if slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimLeft(a, "-")
		return a == "smoke" || a == "smoke=true"
	}) {
		c = SmokeConfig()
	}
	fs := flag.NewFlagSet("retentionbench", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintln(output, "usage: retentionbench [-smoke] [-write-doc] [flags]\n\nRuns the benchmark scenarios of docs/benchmarks.md against their baselines and prints one table.")
		fs.PrintDefaults()
	}
	fs.BoolVar(&c.Smoke, "smoke", c.Smoke, "use the smoke sizes (checks the harness in under a minute; the figures mean nothing)")
	fs.IntVar(&c.Rows, "rows", c.Rows, "rows of the retention-run data")
	fs.IntVar(&c.Datasets, "datasets", c.Datasets, "datasets sharing those rows")
	ttls := fs.String("ttls", strings.Join(c.TTLs, ","), "the datasets' TTLs, assigned in turn")
	from := fs.String("from", "", "first day of the events, YYYY-MM-DD (default: two years before -to)")
	to := fs.String("to", "", "end of the events, exclusive, YYYY-MM-DD (default: now)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the generated rows")
	fs.IntVar(&c.LoadWorkers, "load-workers", c.LoadWorkers, "retentionctl load -workers, and COPY streams of the raw-COPY baseline")
	fs.IntVar(&c.RunTrials, "run-trials", c.RunTrials, "times the retention run and its baseline are timed, each on a copy of the data (the median is reported)")
	fs.IntVar(&c.People, "people", c.People, "people the identities store's rows belong to (0: -rows / 10)")
	fs.IntVar(&c.WorkOrderIdentities, "workorder-identities", c.WorkOrderIdentities, "identities the work order names (0: a tenth of -people, at most 100,000)")
	fs.IntVar(&c.TTLRows, "ttl-rows", c.TTLRows, "rows of the dataset whose TTL changes")
	fs.IntVar(&c.HTTPRows, "http-rows", c.HTTPRows, "rows posted through POST /dataSets/{id}/rows, per variant (with and without _id)")
	fs.IntVar(&c.HTTPDatasets, "http-datasets", c.HTTPDatasets, "datasets those rows go to")
	fs.IntVar(&c.HTTPStreams, "http-streams", c.HTTPStreams, "concurrent ingestion requests")
	fs.IntVar(&c.HTTPBodyRows, "http-body-rows", c.HTTPBodyRows, "rows per ingestion request")
	fs.IntVar(&c.LoadConns, "load-conns", c.LoadConns, "clients reading GET /ttl/{id} during the run under load and the TTL change")
	fs.DurationVar(&c.LoadDuration, "load-duration", c.LoadDuration, "idle measurement of the run-under-load scenario")
	fs.IntVar(&c.APIConns, "api-conns", c.APIConns, "connections of the API-reads throughput rows and of pgbench")
	fs.IntVar(&c.APILatencyConns, "api-latency-conns", c.APILatencyConns, "connections of the API-reads latency rows (p99 < 20 ms)")
	fs.DurationVar(&c.APIDuration, "api-duration", c.APIDuration, "duration of each API-reads measurement and of pgbench")
	fs.IntVar(&c.PgbenchScale, "pgbench-scale", c.PgbenchScale, "pgbench -i scale")
	fs.IntVar(&c.PgbenchJobs, "pgbench-jobs", c.PgbenchJobs, "pgbench -j")
	fs.IntVar(&c.PgbenchTransactions, "pgbench-transactions", c.PgbenchTransactions, "pgbench -t: transactions per client instead of -api-duration (0: run for -api-duration)")
	fs.IntVar(&c.PreviewRows, "preview-rows", c.PreviewRows, "rows of the dataset the preview is timed on")
	fs.IntVar(&c.AuditEvents, "audit-events", c.AuditEvents, "audit events the audit query reads from")
	fs.IntVar(&c.MoveRows, "move-rows", c.MoveRows, "rows of the org retentionctl org move moves between two cells")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "use this server (superuser URL) instead of a private cluster")
	only := fs.String("only", "", "measure only these scenarios, comma-separated: "+strings.Join(scenarioKeys(), ", "))
	settings := fs.String("pg", "", "extra or overriding settings of the private cluster, NAME=VALUE,NAME=VALUE")
	buildFlags := fs.String("build-flags", "", "flags for go build of the binaries, space-separated (such as -race)")
	fs.StringVar(&c.WorkDir, "work-dir", c.WorkDir, "folder for binaries, logs, exports and the cluster (default: a new temporary folder)")
	fs.BoolVar(&c.Keep, "keep", c.Keep, "keep the work folder (logs, cluster) afterwards")
	fs.BoolVar(&c.WriteDoc, "write-doc", c.WriteDoc, "write the table into -doc")
	fs.StringVar(&c.DocPath, "doc", c.DocPath, "the Markdown file -write-doc updates")
	fs.StringVar(&c.CPUProfileDir, "cpuprofile", c.CPUProfileDir, "write retentiond's CPU profiles of each API-reads throughput measurement, of each ingestion variant's first 8 s and of the work order into this folder (go tool pprof reads them)")
	fs.StringVar(&c.JSONPath, "json", c.JSONPath, "also write the report as JSON to this file (a point of a cost curve)")
	fs.StringVar(&c.CurvesDir, "curves", c.CurvesDir, "measure the cost curves instead: one invocation a point, reports kept in this folder (a point already there is not measured again), then the plot")
	fs.StringVar(&c.CurvesPNG, "curves-png", "docs/cost-curves.png", "the plot -curves draws")
	fs.Int64Var(&c.CurvesMaxSize, "curves-max-size", 1000000, "with -curves, skip points of more rows or audit events than this (0: none skipped)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.TTLs = splitList(*ttls)
	if *only != "" {
		c.Only = splitList(*only)
	}
	var err error
	if *from != "" {
		if c.From, err = time.Parse(time.DateOnly, *from); err != nil {
			return c, fmt.Errorf("-from must be YYYY-MM-DD, got %q", *from)
		}
	}
	if *to != "" {
		if c.To, err = time.Parse(time.DateOnly, *to); err != nil {
			return c, fmt.Errorf("-to must be YYYY-MM-DD, got %q", *to)
		}
	}
	for _, kv := range splitList(*settings) {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return c, fmt.Errorf("-pg takes NAME=VALUE pairs, got %q", kv)
		}
		c.PGSettings[name] = value
	}
	c.BuildFlags = strings.Fields(*buildFlags)
	c.Command = "go run ./cmd/retentionbench " + strings.Join(args, " ")
	return c, c.validate()
}

// people is the number of people of the identities store: Config.People, or one for every 10 rows.
func (c *Config) people() int {
	if c.People > 0 {
		return c.People
	}
	return max(c.Rows/10, 1)
}

// workOrderIdentities is the number of identities the work order names: Config.WorkOrderIdentities, or a tenth of
// the people, within an order's bound.
func (c *Config) workOrderIdentities() int {
	if c.WorkOrderIdentities > 0 {
		return c.WorkOrderIdentities
	}
	return max(min(c.people()/10, catalog.MaxWorkOrderIdentities), 1)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// scenarioKey is a scenario's name as -only takes it.
func scenarioKey(name string) string { return strings.ReplaceAll(strings.ToLower(name), " ", "-") }

func scenarioKeys() []string {
	keys := make([]string, 0, len(Scenarios))
	for _, s := range Scenarios {
		keys = append(keys, scenarioKey(s))
	}
	return keys
}
