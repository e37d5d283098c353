package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/demo"
	"github.com/acme/retention/postgres"
)

const loadUsage = `usage: retentionctl load -org ORG [-sandbox prod] -dataset NAME_OR_ID [-ingested-at RFC3339] FILE.ndjson|- ...
       retentionctl load -org ORG -generate N [-datasets M] [-from DAY] [-to DAY] [-name-prefix synthetic]
                         [-orgs ORG2,ORG3] [-seed 1] [-ingested-at-event] [-workers 2] [-people N]
Flags go before the files.`

// loadFlags are the parsed flags of `retentionctl load`.
type loadFlags struct {
	org, sandbox, dataset, ingestedAt string
	generate, datasets, workers       int
	people                            int
	from, to, namePrefix, orgs        string
	seed                              uint64
	ingestedAtEvent, quiet            bool
	set                               map[string]bool // the flags given on the command line
	files                             []string
	env                               getenv // for who the load acts as (loadCaller)

	// Derived by validate.
	ingestedAtTime   *time.Time
	fromTime, toTime time.Time
	allOrgs          []string // -org, then -orgs
}

func runLoad(ctx context.Context, args []string, env getenv, stdin io.Reader, out, stderr io.Writer) error {
	f, err := parseLoadFlags(args, stderr)
	if err != nil {
		return err
	}
	f.env = env
	db, err := openDB(ctx, env, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	if f.set["generate"] {
		return loadGenerated(ctx, db, f, out, stderr)
	}
	return loadFiles(ctx, db, f, stdin, out, stderr)
}

func parseLoadFlags(args []string, stderr io.Writer) (*loadFlags, error) {
	f := &loadFlags{set: map[string]bool{}}
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, loadUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.org, "org", "", "the org (required)")
	fs.StringVar(&f.sandbox, "sandbox", catalog.DefaultSandbox, "the sandbox")
	fs.StringVar(&f.dataset, "dataset", "", "files: the dataset to load into, by name or id")
	fs.StringVar(&f.ingestedAt, "ingested-at", "", "an RFC 3339 ingestion time for the rows that have no _ingestedAt")
	fs.IntVar(&f.generate, "generate", 0, "generate this many synthetic rows instead of reading files")
	fs.IntVar(&f.datasets, "datasets", 1, "with -generate: how many time-series datasets share the rows (created if missing)")
	fs.StringVar(&f.from, "from", "", "with -generate: the first day of the events, YYYY-MM-DD or RFC 3339 (default: two years before -to)")
	fs.StringVar(&f.to, "to", "", "with -generate: the end of the events, exclusive, YYYY-MM-DD or RFC 3339 (default: now)")
	fs.StringVar(&f.namePrefix, "name-prefix", "synthetic", "with -generate: datasets are named PREFIX-000, PREFIX-001, ...")
	fs.StringVar(&f.orgs, "orgs", "", "with -generate: more orgs, comma-separated; the datasets go to -org and these in turn")
	fs.Uint64Var(&f.seed, "seed", 1, "with -generate: the seed of the generated timestamps and payloads")
	fs.BoolVar(&f.ingestedAtEvent, "ingested-at-event", false, "with -generate: ingest each row at its event time, as a migrated history")
	fs.IntVar(&f.workers, "workers", 2, "with -generate: how many datasets load at once")
	fs.IntVar(&f.people, "people", 0, "with -generate: each row carries the identityMap of one of this many synthetic people (person-N@example.com, primary, and an ECID)")
	fs.BoolVar(&f.quiet, "quiet", false, "show no progress bar")
	if err := fs.Parse(args); err != nil {
		return nil, errUsage
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	f.files = fs.Args()
	if err := f.validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// generateOnly are the flags that apply only to generated rows.
var generateOnly = []string{"datasets", "from", "to", "name-prefix", "orgs", "seed", "ingested-at-event", "workers", "people"}

func (f *loadFlags) validate() error {
	if f.org == "" {
		return errors.New("-org is required")
	}
	if f.sandbox == "" {
		return errors.New("-sandbox must not be empty")
	}
	if f.ingestedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, f.ingestedAt)
		if err != nil {
			return fmt.Errorf("-ingested-at must be an RFC 3339 time such as 2026-01-31T12:00:00Z, got %q", f.ingestedAt)
		}
		t = t.UTC()
		f.ingestedAtTime = &t
	}
	if !f.set["generate"] {
		for _, name := range generateOnly {
			if f.set[name] {
				return fmt.Errorf("-%s applies only with -generate", name)
			}
		}
		if f.dataset == "" {
			return errors.New("-dataset is required: the name or id of the dataset to load the files into")
		}
		if len(f.files) == 0 {
			return errors.New("name at least one NDJSON file to load, or - for stdin")
		}
		stdin := 0
		for _, name := range f.files {
			if name == "-" {
				stdin++
			} else if strings.HasPrefix(name, "-") {
				return fmt.Errorf("%q: flags go before the files", name)
			}
		}
		if stdin > 1 {
			return errors.New("- (stdin) can be named only once")
		}
		for _, name := range f.files {
			if name != "-" {
				if _, err := os.Stat(name); err != nil {
					return fmt.Errorf("cannot load %s: %w", name, err)
				}
			}
		}
		return nil
	}
	switch {
	case f.generate <= 0:
		return fmt.Errorf("-generate must be a positive number of rows, got %d", f.generate)
	case len(f.files) > 0:
		return fmt.Errorf("-generate reads no files, got %q", f.files)
	case f.dataset != "":
		return errors.New("-dataset does not apply with -generate, whose datasets are named by -name-prefix")
	case f.datasets < 1 || f.datasets > f.generate:
		return fmt.Errorf("-datasets must be between 1 and the -generate rows (%d), got %d", f.generate, f.datasets)
	case f.workers < 1:
		return fmt.Errorf("-workers must be at least 1, got %d", f.workers)
	case f.people < 0:
		return fmt.Errorf("-people must be 0 (rows without identities) or a number of people, got %d", f.people)
	case f.ingestedAtEvent && f.ingestedAtTime != nil:
		return errors.New("-ingested-at and -ingested-at-event exclude each other")
	case f.namePrefix == "" || len(f.namePrefix) > catalog.MaxNameLength-8 || !utf8.ValidString(f.namePrefix):
		return fmt.Errorf("-name-prefix must be 1 to %d bytes of UTF-8 text", catalog.MaxNameLength-8)
	}
	var err error
	f.toTime = time.Now().UTC().Truncate(time.Millisecond)
	if f.to != "" {
		if f.toTime, err = parseDay("-to", f.to); err != nil {
			return err
		}
	}
	f.fromTime = f.toTime.AddDate(-2, 0, 0)
	if f.from != "" {
		if f.fromTime, err = parseDay("-from", f.from); err != nil {
			return err
		}
	}
	if !f.toTime.After(f.fromTime) {
		return fmt.Errorf("-to %s must be after -from %s", f.toTime.Format(time.RFC3339), f.fromTime.Format(time.RFC3339))
	}
	f.allOrgs = []string{f.org}
	for _, o := range strings.Split(f.orgs, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		for _, seen := range f.allOrgs {
			if o == seen {
				return fmt.Errorf("-orgs names %s twice (counting -org)", o)
			}
		}
		f.allOrgs = append(f.allOrgs, o)
	}
	return nil
}

// parseDay reads a day (midnight UTC) or an RFC 3339 time.
func parseDay(flagName, s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s must be a day such as 2024-11-23 or an RFC 3339 time, got %q", flagName, s)
	}
	return t.UTC(), nil
}

// loadCaller is who a load acts as: the CLI's identity (cliIdentity), so that the audit log names the same user as
// for what the same token does through the API.
func loadCaller(env getenv, org, sandbox string) *catalog.Caller {
	var b [8]byte
	_, _ = rand.Read(b[:])
	user, client := cliIdentity(env)
	return &catalog.Caller{User: user, ClientID: client, Org: org, Sandbox: sandbox, RequestID: "load-" + hex.EncodeToString(b[:])}
}

// loadFiles ingests each file in turn into one dataset, through the same validation as the HTTP API.
func loadFiles(ctx context.Context, db *postgres.DB, f *loadFlags, stdin io.Reader, out, stderr io.Writer) error {
	c := loadCaller(f.env, f.org, f.sandbox)
	ds, err := findLoadDataset(ctx, postgres.NewDatasetService(db), c, f.dataset)
	if err != nil {
		return err
	}
	rows := postgres.NewRowService(db, 0)
	bar := newProgress(stderr, -1, f.quiet)
	start := time.Now()
	var total catalog.IngestResult
	for _, name := range f.files {
		res, err := loadFile(ctx, rows, c, ds.ID, name, stdin, f.ingestedAtTime, bar)
		if err != nil {
			bar.abort()
			return err
		}
		total.Accepted += res.Accepted
		total.Rejected += res.Rejected
		total.ExpiredOnArrival += res.ExpiredOnArrival
		if res.Rejected > 0 {
			bar.clear()
			label := fileLabel(name)
			for _, e := range res.Errors {
				fmt.Fprintf(out, "%s:%d: %s\n", label, e.Line, e.Reason)
			}
			if res.Rejected > len(res.Errors) {
				fmt.Fprintf(out, "%s: %d more rejected lines not listed\n", label, res.Rejected-len(res.Errors))
			}
		}
	}
	bar.finish()
	printLoaded(out, &total, 1, time.Since(start))
	if total.Rejected > 0 {
		return fmt.Errorf("%d %s rejected (listed above); the other rows were stored", total.Rejected, plural(total.Rejected, "line was", "lines were"))
	}
	return nil
}

func fileLabel(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

func loadFile(ctx context.Context, rows *postgres.RowService, c *catalog.Caller, datasetID, name string, stdin io.Reader, ingestedAt *time.Time, bar *progress) (*catalog.IngestResult, error) {
	r := stdin
	if name != "-" {
		file, err := os.Open(name) //nolint:gosec // G304: the operator names the file to load; that is the command's purpose
		if err != nil {
			return nil, err
		}
		defer func() { _ = file.Close() }()
		r = file
	}
	res := &catalog.IngestResult{}
	if err := ingestFile(ctx, rows, c, datasetID, r, ingestedAt, bar, res); err != nil {
		return nil, fmt.Errorf("load %s: %w (%d rows of it were stored)", fileLabel(name), err, res.Accepted)
	}
	return res, nil
}

// ingestFile ingests the NDJSON events of r as the API does, through catalog's event reader, with its line limit and
// its validation: -ingested-at dates the events that have no _ingestedAt of their own.
func ingestFile(ctx context.Context, rows *postgres.RowService, c *catalog.Caller, datasetID string, r io.Reader, ingestedAt *time.Time, bar *progress, res *catalog.IngestResult) error {
	w, err := rows.BeginIngest(ctx, c, datasetID, catalog.IngestOptions{AllowIngestedAt: true, ChunkCommitted: bar.add})
	if err != nil {
		return err
	}
	rules := w.Rules()
	rules.DefaultIngestedAt = ingestedAt
	events := catalog.NewEventReader(r, catalog.NDJSON, rules)
	if err := w.Write(ctx, events.Rows(res), res); err != nil {
		return err
	}
	return events.Err()
}

// findLoadDataset finds the dataset by id, or else by name.
func findLoadDataset(ctx context.Context, svc *postgres.DatasetService, c *catalog.Caller, nameOrID string) (*catalog.Dataset, error) {
	if catalog.ValidateDatasetID(nameOrID) == nil {
		ds, err := svc.FindDatasetByID(ctx, c, nameOrID)
		if err == nil {
			return ds, nil
		}
		if catalog.ErrorCode(err) != catalog.ENOTFOUND {
			return nil, err
		}
	}
	found, err := svc.FindDatasets(ctx, c, catalog.DatasetFilter{Names: []string{nameOrID}, IncludeAll: true})
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("-dataset: no dataset has the id or name %q in org %s, sandbox %s", nameOrID, c.Org, c.Sandbox)
	}
	return found[0], nil
}

// genJob is the rows of one generated dataset.
type genJob struct {
	index  int
	caller *catalog.Caller
	ds     *catalog.Dataset
	rows   int
}

// loadGenerated spreads synthetic rows over time-series datasets, creating the missing ones, and stores them
// through the trusted fast path: no JSON parsing, no client _id to replace.
func loadGenerated(ctx context.Context, db *postgres.DB, f *loadFlags, out, stderr io.Writer) error {
	svc := postgres.NewDatasetService(db)
	callers := map[string]*catalog.Caller{}
	for _, org := range f.allOrgs {
		callers[org] = loadCaller(f.env, org, f.sandbox)
	}
	jobs := make([]genJob, f.datasets)
	for i := range jobs {
		c := callers[f.allOrgs[i%len(f.allOrgs)]]
		ds, err := ensureGenDataset(ctx, svc, c, fmt.Sprintf("%s-%03d", f.namePrefix, i))
		if err != nil {
			return err
		}
		n := f.generate / f.datasets
		if i < f.generate%f.datasets {
			n++
		}
		jobs[i] = genJob{index: i, caller: c, ds: ds, rows: n}
	}

	rows := postgres.NewRowService(db, 0)
	bar := newProgress(stderr, int64(f.generate), f.quiet)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	var total catalog.IngestResult
	next := make(chan genJob)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(f.workers, len(jobs)) {
		wg.Go(func() {
			for job := range next {
				gen := demo.Synthetic{N: job.rows, From: f.fromTime, To: f.toTime, Seed: f.seed, Stream: uint64(job.index), //nolint:gosec // G115: a worker index, never negative
					IngestedAtEvent: f.ingestedAtEvent, IngestedAt: f.ingestedAtTime, People: f.people}
				res, err := rows.IngestRows(ctx, job.caller, job.ds.ID, gen.Rows(), catalog.IngestOptions{AllowIngestedAt: true, ChunkCommitted: bar.add})
				mu.Lock()
				if res != nil {
					total.Accepted += res.Accepted
					total.ExpiredOnArrival += res.ExpiredOnArrival
				}
				mu.Unlock()
				if err != nil {
					cancel(fmt.Errorf("load %s (%s): %w", job.ds.Name, job.ds.ID, err))
				}
			}
		})
	}
feed:
	for _, job := range jobs {
		select {
		case next <- job:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		bar.abort()
		return fmt.Errorf("%w; %d rows were stored before it", err, total.Accepted)
	}
	bar.finish()
	printLoaded(out, &total, len(jobs), time.Since(start))
	return nil
}

// ensureGenDataset finds the generated dataset of this name, or creates it.
func ensureGenDataset(ctx context.Context, svc *postgres.DatasetService, c *catalog.Caller, name string) (*catalog.Dataset, error) {
	for range 2 {
		found, err := svc.FindDatasets(ctx, c, catalog.DatasetFilter{Names: []string{name}, IncludeAll: true})
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			if !found[0].IsTimeSeries() {
				return nil, fmt.Errorf("-name-prefix: dataset %s (%s) of org %s is not time-series; choose another prefix", name, found[0].ID, c.Org)
			}
			return found[0], nil
		}
		desc := "Synthetic rows of retentionctl load -generate."
		ds, err := svc.CreateDataset(ctx, c, catalog.DatasetCreate{
			Name: name, Description: &desc, Tags: map[string][]string{"generator": {"retentionctl-load"}},
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer},
		})
		if catalog.ErrorCode(err) == catalog.ECONFLICT {
			continue // created meanwhile by someone else: find it
		}
		if err != nil {
			return nil, fmt.Errorf("create dataset %s: %w", name, err)
		}
		return ds, nil
	}
	return nil, fmt.Errorf("dataset %s was created and deleted meanwhile; run again", name)
}

func printLoaded(out io.Writer, res *catalog.IngestResult, datasets int, elapsed time.Duration) {
	if res.ExpiredOnArrival > 0 {
		fmt.Fprintf(out, "%d %s already expired under the dataset's TTL on arrival: stored, hidden, and left to the next retention run\n",
			res.ExpiredOnArrival, plural(res.ExpiredOnArrival, "row was", "rows were"))
	}
	secs := elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(res.Accepted) / secs
	}
	fmt.Fprintf(out, "loaded %d %s into %d %s in %.1f s (%.0f rows/s)\n",
		res.Accepted, plural(res.Accepted, "row", "rows"), datasets, plural(datasets, "dataset", "datasets"), secs, rate)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// progress is the row count on stderr. On a terminal it redraws one line in place; elsewhere, such as a CI log, it
// writes a plain line every few seconds instead of carriage returns. A nil progress shows nothing.
type progress struct{ bar *progressbar.ProgressBar }

// Redraw intervals of the bar: a terminal is redrawn often, a log gets a line now and then.
const (
	terminalThrottle = 100 * time.Millisecond
	logThrottle      = 5 * time.Second
)

// newProgress returns a bar counting rows up to total, or without a total when it is -1.
func newProgress(w io.Writer, total int64, quiet bool) *progress {
	if quiet {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetDescription("rows"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("rows"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetSpinnerChangeInterval(0), // redraw only as rows arrive: no goroutine to stop
		progressbar.OptionSetRenderBlankState(true),   // starts the clock, so the first rate is not absurd
	}
	if isTerminal(w) {
		opts = append(opts, progressbar.OptionSetWriter(rateWriter{w}), progressbar.OptionThrottle(terminalThrottle), progressbar.OptionClearOnFinish())
	} else {
		opts = append(opts, progressbar.OptionSetWriter(lineWriter{w}), progressbar.OptionThrottle(logThrottle),
			progressbar.OptionSetTheme(progressbar.ThemeASCII))
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// add counts stored rows; it is the ChunkCommitted hook of an ingestion, called from the workers.
func (p *progress) add(rows int) {
	if p != nil {
		_ = p.bar.Add(rows)
	}
}

// clear removes the bar's line so that other output starts at the beginning of a line; the next add redraws it.
func (p *progress) clear() {
	if p != nil {
		_ = p.bar.Clear()
	}
}

func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Finish()
	}
}

// abort leaves the count where it stopped and the line clear for the error.
func (p *progress) abort() {
	if p != nil {
		_ = p.bar.Clear()
		_ = p.bar.Exit()
	}
}

// noRateYet takes out of a redraw the rate the bar shows before any row is stored ("0 rows/hr"): it is no rate.
func noRateYet(s string) string {
	return strings.Replace(s, ", 0 rows/hr)", ")", 1)
}

// rateWriter is a terminal's writer with noRateYet applied to each redraw (each starts with a carriage return and
// clears the line, so a shorter first one leaves nothing behind).
type rateWriter struct{ w io.Writer }

func (r rateWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, noRateYet(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lineWriter turns the bar's redraws, which start with a carriage return and are cleared with spaces, into one
// line each, for output that is not a terminal.
type lineWriter struct{ w io.Writer }

func (l lineWriter) Write(p []byte) (int, error) {
	s := strings.Trim(noRateYet(string(p)), "\r ")
	if s == "" {
		return len(p), nil
	}
	if _, err := io.WriteString(l.w, s+"\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}
