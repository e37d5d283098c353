// Command retentiond is the row-retention service: the REST API and the retention scheduler in one process (each
// can be turned off, so replicas can split roles). This file only wires the packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/config"
	"github.com/acme/retention/internal/demo"
	"github.com/acme/retention/internal/pgcluster"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/riverjobs"
)

func main() { os.Exit(exitCode()) }

// exitCode runs the server and returns its exit status, so that deferred cleanups run before main exits.
func exitCode() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Output piped to a program that is gone (`make run | tee log`, where Ctrl-C ends tee first) must not kill the
	// process on its next log line before it has stopped its PostgreSQL: with SIGPIPE notified, such a write fails
	// with EPIPE instead, and the shutdown goes on.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "retentiond:", err)
		return 1
	}
	return 0
}

// run is the whole program, apart from signals and the exit code, so that tests can start it.
func run(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("retentiond", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dev := flags.Bool("dev", false, "development mode: start a private PostgreSQL when DATABASE_URL is unset, load demo data, accept the dev token secret")
	addr := flags.String("addr", "", "listen address (overrides HTTP_ADDR)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *addr != "" {
		// The flag overrides the variable before validation, so a bad -addr is refused like a bad HTTP_ADDR.
		env := getenv
		getenv = func(name string) string {
			if name == "HTTP_ADDR" {
				return *addr
			}
			return env(name)
		}
	}
	cfg, err := config.Load(getenv, *dev)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := newLogger(stderr, cfg.LogLevel)
	logger.Info("starting", slog.Any("config", cfg))

	var cluster *pgcluster.Dev
	if cfg.DatabaseURL == "" {
		if cluster, err = startDevCluster(ctx, getenv, logger, stdout); err != nil {
			return err
		}
		defer func() {
			if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
				logger.Error("could not stop postgres", slog.Any("error", err))
			}
		}()
		cfg.DatabaseURL = cluster.URL()
	}
	return serve(ctx, cfg, logger, stdout, cluster)
}

// newLogger returns the service's JSON logger. Durations are written as milliseconds, under their key with "_ms"
// appended ("took_ms":2868), rather than as the nanoseconds slog writes by default ("took":2868000000).
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationInMilliseconds}))
}

// durationInMilliseconds is the loggers' ReplaceAttr: a duration becomes KEY_ms, a number of milliseconds with
// microseconds as its fraction.
func durationInMilliseconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	return slog.Float64(a.Key+"_ms", float64(a.Value.Duration().Microseconds())/1000)
}

// startDevCluster starts the private cluster of the checkout (RETENTION_CHECKOUT, else the one holding the current
// folder), takes over one that a killed retentiond left running, and says where its data is and what it did.
func startDevCluster(ctx context.Context, getenv config.Getenv, logger *slog.Logger, stdout io.Writer) (*pgcluster.Dev, error) {
	checkout := getenv("RETENTION_CHECKOUT")
	if checkout == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("find the checkout: %w", err)
		}
		checkout = pgcluster.DevCheckout(wd)
	}
	dir, why, err := pgcluster.DevDataDir(checkout)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stdout, why)
	dev, err := pgcluster.StartDev(ctx, dir, "retention", logger)
	if err != nil {
		return nil, err
	}
	switch {
	case dev.TookOver():
		fmt.Fprintln(stdout, "PostgreSQL was still running there, left by a retentiond that did not stop it (killed?): this one took it over and stops it on exit.")
	case !dev.Owned():
		fmt.Fprintln(stdout, "PostgreSQL there is run by another retentiond of this checkout, which stops it when it ends; this one leaves it running.")
	}
	return dev, nil
}

func serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdout io.Writer, dev *pgcluster.Dev) error {
	pools, err := openPools(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pools.close()
	db, jobsDB := pools.requests, pools.jobs
	applied, err := postgres.MigrateUp(ctx, jobsDB.Pool)
	if err != nil {
		return err
	}
	if err := riverjobs.Migrate(ctx, jobsDB.Pool); err != nil {
		return err
	}
	logger.Info("migrations applied", slog.Int("count", applied))

	datasets := postgres.NewDatasetService(db)
	rows := postgres.NewRowService(db, 0)
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for name, p := range map[string]*postgres.DB{"requests": db, "jobs": jobsDB, "health": pools.health} {
		registry.MustRegister(p.PoolCollector(prometheus.Labels{"db_name": p.Pool.Config().ConnConfig.Database, "pool": name}))
	}
	// The expired backlog, read from the counters at scrape time on the requests' pool, at most once in 10 s.
	registry.MustRegister(db.BacklogCollector(cfg.IngestionGrace, logger))
	work, queue, schedules, err := newJobs(cfg, pools, registry, logger)
	if err != nil {
		return err
	}
	welcomeOrg, demoDatasets, err := loadDemo(ctx, cfg, datasets, db)
	if err != nil {
		return err
	}
	if err := queue.Start(ctx, work); err != nil {
		return err
	}
	defer func() {
		// Let the jobs in flight finish their current batch within the shutdown timeout; what is left resumes later.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if err := queue.Stop(stopCtx); err != nil {
			logger.Warn("retention jobs did not stop in time", slog.Any("error", err))
		}
	}()
	if err := servePprof(ctx, cfg.PprofAddr, logger); err != nil {
		return err
	}
	if !cfg.API {
		logger.Info("API disabled (RETENTIOND_API=false): running the scheduler only")
		<-ctx.Done()
		return nil
	}
	auth, err := httpapi.NewAuthenticator(ctx, cfg.AuthHS256Secret, cfg.AuthJWKSURL, time.Now)
	if err != nil {
		return err
	}
	preview := postgres.NewPreviewService(db, cfg.IngestionGrace)
	api := httpapi.New(httpapi.Config{
		Datasets: datasets, Holds: datasets, Rows: rows, Runs: work.Runs, Preview: preview, Explain: preview, Audit: postgres.NewAuditService(db),
		Expirations: postgres.NewExpirationService(db, cfg.ExpirationQuota), Manifests: postgres.NewManifestService(db),
		WorkOrders: &jobs.StartingWorkOrders{WorkOrderService: postgres.NewWorkOrderService(db, postgres.WorkOrderLimits{
			DailyQuota: cfg.WorkOrderDailyQuota, MonthlyQuota: cfg.WorkOrderMonthlyQuota, InFlight: cfg.WorkOrdersInFlight}),
			Queue: queue.WorkOrdersForRequests(), Logger: logger},
		Auth: auth, Logger: logger, Ready: pools.health.Ready, Registry: registry,
		NextRun: func(store catalog.Store) *time.Time { return schedules.NextRun(store, time.Now()) },
		// A slot at from itself counts: NextRun gives the first strictly after its time, at whole seconds.
		RunAt: func(store catalog.Store, from time.Time) *time.Time {
			return schedules.NextRun(store, from.Add(-time.Nanosecond))
		},
		Schedules:      schedules.Specs(),
		TranslateError: postgres.TranslateError,
		OrgMovedAway:   db.OrgMovedAway,
		ReadTimeout:    cfg.HTTPReadTimeout, WriteTimeout: cfg.HTTPWriteTimeout, LongRequestsPerOrg: cfg.LongRequestsPerOrg,
	})
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	if cfg.Dev {
		// After the port is bound, so that the calls it prints work as soon as it is read.
		if err := printDevWelcome(stdout, cfg.AuthHS256Secret, "http://"+ln.Addr().String(), welcomeOrg, demoDatasets, dev); err != nil {
			_ = ln.Close()
			return err
		}
	}
	return listen(ctx, cfg, ln, api, logger)
}

// loadDemo loads the demo data with --dev, of the orgs RETENTION_DEMO_ORGS names (all when unset, none for "none"),
// and returns the org the welcome's token is for and its demo datasets.
func loadDemo(ctx context.Context, cfg *config.Config, datasets catalog.DatasetService, db *postgres.DB) (string, []*catalog.Dataset, error) {
	orgs := demo.Orgs
	if cfg.DemoOrgs != nil {
		orgs = cfg.DemoOrgs
	}
	if !cfg.Dev || len(orgs) == 0 {
		return demo.Orgs[0], nil, nil
	}
	loaded, err := demo.LoadOrgs(ctx, datasets, db, orgs)
	return orgs[0], loaded, err
}

// servePprof serves Go's profiles at addr (PPROF_ADDR) until ctx ends, on a listener of their own, apart from the
// API's handler, its authentication and its logs; an empty addr serves nothing.
func servePprof(ctx context.Context, addr string, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on PPROF_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	logger.Info("serving profiles", slog.String("pprof_addr", ln.Addr().String()))
	return nil
}

// dbPools are the replica's bulkheads on the database: requests, jobs and health checks each have a pool of their
// own, so that no amount of requests, stalled or not, can take a connection a retention run or /readyz needs.
type dbPools struct {
	requests, jobs, health *postgres.DB
}

func openPools(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*dbPools, error) {
	p := &dbPools{}
	for _, o := range []struct {
		dst  **postgres.DB
		name string
		size int
	}{{&p.requests, "requests", cfg.RequestConns}, {&p.jobs, "jobs", cfg.JobConns}, {&p.health, "health", cfg.HealthConns}} {
		db, err := postgres.OpenPool(ctx, cfg.DatabaseURL, logger, postgres.PoolOptions{Name: o.name, MaxConns: int32(o.size)}) //nolint:gosec // G115: the size is validated to at most 1000
		if err != nil {
			p.close()
			return nil, err
		}
		*o.dst = db
	}
	return p, nil
}

// close closes the pools that are open.
func (p *dbPools) close() {
	for _, db := range []*postgres.DB{p.requests, p.jobs, p.health} {
		if db != nil {
			db.Close()
		}
	}
}

// newJobs builds the retention scheduler and workers on the jobs' pool; the API's calls of it (manual runs, run
// history) and the overdue gauge, read at every scrape of /metrics, use the requests' pool. With
// RETENTIOND_SCHEDULER=false this replica only queues manual runs for the others. A scheduler replica also purges
// the audit log, as a periodic job that one replica runs per period, on the jobs' pool.
func newJobs(cfg *config.Config, pools *dbPools, reg prometheus.Registerer, logger *slog.Logger) (riverjobs.Work, *riverjobs.Client, jobs.Schedules, error) {
	var none riverjobs.Work
	schedules := jobs.Schedules{}
	for store, spec := range map[catalog.Store]string{catalog.LakeHouse: cfg.LakeSchedule, catalog.Profile: cfg.ProfileSchedule} {
		sched, err := jobs.ParseSchedule(spec)
		if err != nil {
			return none, nil, nil, err
		}
		schedules[store] = sched
	}
	requestRuns := postgres.NewRunRepository(pools.requests)
	metrics := jobs.NewMetrics(reg, jobs.OverdueGauge(catalog.LakeHouse, schedules[catalog.LakeHouse], requestRuns.Overdue, time.Now, logger))
	sweeper, err := postgres.NewSweeper(pools.jobs, postgres.SweepConfig{BatchSize: cfg.BatchSize, Workers: cfg.SweepWorkers,
		BusyShare: cfg.SweepBusyShare}, logger)
	if err != nil {
		return none, nil, nil, err
	}
	queue, err := riverjobs.New(pools.jobs.Pool, riverjobs.Config{Work: cfg.Scheduler, JobTimeout: cfg.JobTimeout,
		RescueAfter: cfg.RescueAfter, ExpirationInterval: cfg.ExpirationInterval, WorkOrderInterval: cfg.WorkOrderInterval, Requests: pools.requests.Pool, Logger: logger})
	if err != nil {
		return none, nil, nil, err
	}
	auditRetention := &audit.Retention{Purger: postgres.NewAuditService(pools.jobs), Keep: cfg.AuditKeep, Now: pools.jobs.Now, Logger: logger}
	work := riverjobs.Work{
		Runs: jobs.New(postgres.NewRunRepository(pools.jobs), sweeper, queue,
			&jobs.Requests{Runs: requestRuns, Queue: queue.ForRequests()}, metrics,
			jobs.Config{Schedules: schedules, LakeGrace: cfg.IngestionGrace, HistoryKeep: cfg.HistoryKeep, Logger: logger}),
		Expirations: jobs.NewExpirations(postgres.NewExpirationRunner(pools.jobs), logger),
		AuditPurge:  auditRetention.Purge,
		WorkOrders:  jobs.NewWorkOrders(postgres.NewWorkOrderRunner(pools.jobs, cfg.IdentityHashKey), logger),
	}
	return work, queue, schedules, nil
}

// listen serves on ln until ctx ends, then stops accepting requests and lets in-flight ones finish within the
// shutdown timeout before the deferred pool close.
func listen(ctx context.Context, cfg *config.Config, ln net.Listener, handler http.Handler, logger *slog.Logger) error {
	// No whole-request ReadTimeout or WriteTimeout: they would cut a 100 MiB ingestion or a long export in the
	// middle. The handler bounds each read of a body and each write of an answer instead (httpapi.Config).
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", slog.String("addr", ln.Addr().String()))
	select {
	case err := <-errc:
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", slog.Duration("timeout", cfg.ShutdownTimeout))
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down HTTP: %w", err)
	}
	return nil
}
