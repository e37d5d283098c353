// Package config reads the service's configuration from environment variables into one typed struct, validated at
// start: a bad value stops the process with a message naming the variable and the rule.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// DevSecret signs development tokens (`retentionctl token`) when AUTH_HS256_SECRET is unset. The server accepts it
// only with --dev, so a production deployment cannot run on a secret that is printed in the README.
const DevSecret = "retention-dev-secret-not-for-production-use-0001" //nolint:gosec // G101: published on purpose, refused outside --dev

// minSecretLength is the shortest HS256 secret accepted: RFC 7518 asks for a key at least as long as the hash.
const minSecretLength = 32

// Config is the service's configuration. Fields holding secrets are tagged json:"-" so that logging the struct
// never prints them.
type Config struct {
	DatabaseURL     string        `json:"-"`
	HTTPAddr        string        `json:"http_addr"`
	AuthHS256Secret string        `json:"-"`
	AuthJWKSURL     string        `json:"auth_jwks_url,omitempty"`
	LogLevel        slog.Level    `json:"log_level"`
	API             bool          `json:"api"`
	Scheduler       bool          `json:"scheduler"`
	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	Dev             bool          `json:"dev"`
	// DemoOrgs are the demo orgs whose data --dev loads (RETENTION_DEMO_ORGS, comma-separated): nil (unset) for
	// all of them, empty ("none") for none; each cell of `make run-cells` loads its own.
	DemoOrgs []string `json:"retention_demo_orgs,omitempty"`

	// PprofAddr, when set (PPROF_ADDR), is where Go's profiles (net/http/pprof, /debug/pprof/) are served, on a
	// listener of their own without authentication: for a loopback address, as the benchmark's CPU profile uses.
	PprofAddr string `json:"pprof_addr,omitempty"`

	LakeSchedule    string           `json:"retention_schedule"`
	ProfileSchedule string           `json:"retention_profile_schedule"`
	IngestionGrace  retention.Period `json:"retention_ingestion_grace"`
	HistoryKeep     retention.Period `json:"retention_history_keep"`
	// Tuning of the runs; the defaults suit production (jobs.Config and retention.SweepConfig document them).
	BatchSize    int `json:"retention_batch_size"`
	SweepWorkers int `json:"retention_sweep_workers"`
	// SweepBusyShare is the percentage of its time a run's worker works while ingestion is busy
	// (RETENTION_SWEEP_BUSY_SHARE, default 25, 1 to 100; 100 never paces: postgres.SweepConfig.BusyShare).
	SweepBusyShare int           `json:"retention_sweep_busy_share"`
	JobTimeout     time.Duration `json:"retention_job_timeout"`
	RescueAfter    time.Duration `json:"retention_rescue_after"`
	// AuditKeep is how long audit events are kept before the audit log's own retention removes them (AUDIT_KEEP,
	// default P365D as Adobe keeps them; at least P30D, the floor Postgres' audit_purge enforces).
	AuditKeep retention.Period `json:"audit_keep"`
	// ExpirationQuota is how many pending dataset expirations an org may have (RETENTION_EXPIRATION_QUOTA, default
	// 20 as Adobe grants, 1 to 100,000); ExpirationInterval how often due ones are looked for
	// (RETENTION_EXPIRATION_INTERVAL, default 1m).
	ExpirationQuota    int           `json:"retention_expiration_quota"`
	ExpirationInterval time.Duration `json:"retention_expiration_interval"`
	// Record-delete work orders: the identities an org's accepted orders may name in a UTC day and month
	// (RETENTION_WORKORDER_DAILY_QUOTA, default 1,000,000; RETENTION_WORKORDER_MONTHLY_QUOTA, default 2,000,000, as
	// Adobe's), its open orders (RETENTION_WORKORDERS_IN_FLIGHT, default 10), and the key of the keyed hashes
	// (HMAC-SHA256) that name identities in audit events (RETENTION_IDENTITY_HASH_KEY; not shown by /debug or logs).
	WorkOrderDailyQuota   int `json:"retention_workorder_daily_quota"`
	WorkOrderMonthlyQuota int `json:"retention_workorder_monthly_quota"`
	WorkOrdersInFlight    int `json:"retention_workorders_in_flight"`
	// WorkOrderInterval is how often open work orders are looked for (RETENTION_WORKORDER_INTERVAL, default 10s).
	WorkOrderInterval time.Duration `json:"retention_workorder_interval"`
	IdentityHashKey   string        `json:"-"`

	// Bulkheads. Each replica opens three pools on the database, so that requests can never take the connections
	// jobs and health checks need (see README, Limits); the defaults sum to 28, so three replicas stay well within
	// PostgreSQL's default max_connections of 100.
	RequestConns int `json:"database_pool_requests"`
	JobConns     int `json:"database_pool_jobs"`
	HealthConns  int `json:"database_pool_health"`
	// HTTPReadTimeout is the longest a request body may go without a byte; HTTPWriteTimeout the longest a client may
	// take to accept an answer or a page of a stream.
	HTTPReadTimeout  time.Duration `json:"http_read_timeout"`
	HTTPWriteTimeout time.Duration `json:"http_write_timeout"`
	// LongRequestsPerOrg bounds each org's long requests (exports, verification, ingestion, previews, row reads)
	// in flight on one replica.
	LongRequestsPerOrg int `json:"long_requests_per_org"`
}

// LogValue implements slog.LogValuer: the configuration as retentiond logs it at start, a group of the fields with
// a JSON name, so that secrets (json:"-") stay out as in its JSON, and durations stay durations, which the logger
// writes as it writes every duration (retentiond: milliseconds, "shutdown_timeout_ms").
func (c *Config) LogValue() slog.Value {
	v := reflect.ValueOf(c).Elem()
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || (strings.Contains(opts, "omitempty") && v.Field(i).IsZero()) {
			continue
		}
		attrs = append(attrs, slog.Any(name, v.Field(i).Interface()))
	}
	return slog.GroupValue(attrs...)
}

// The defaults of the variables that have one, in one place: the values a deployment gets when it sets nothing, as
// the README's configuration table lists them. cmd/retentiond hands the loaded values to the packages it wires; no
// package's own fallback for a zero value is consulted.
const (
	// DefaultLakeSchedule sweeps the data lake weekly, Sunday 03:00 UTC, as the seed's "evaluated and processed
	// weekly"; DefaultProfileSchedule the profile store daily, since its expiry is prompt.
	DefaultLakeSchedule = "0 3 * * 0"
	// DefaultIdentityHashKey keys the identity hashes of audit events when RETENTION_IDENTITY_HASH_KEY is unset: fit
	// for development only, since anyone who knows it can test guessed identities against the hashes.
	DefaultIdentityHashKey = "retentiond-development-identity-hash-key"
	DefaultProfileSchedule = "0 4 * * *"

	// Bulkheads: the three pools of a replica sum to 28 connections.
	DefaultRequestConns = 16
	DefaultJobConns     = 10
	DefaultHealthConns  = 2

	// DefaultHTTPReadTimeout and DefaultHTTPWriteTimeout are a client's I/O bounds (README, Limits).
	DefaultHTTPReadTimeout  = 30 * time.Second
	DefaultHTTPWriteTimeout = 30 * time.Second
	// DefaultLongRequestsPerOrg is how many long requests an org may have in flight on one replica.
	DefaultLongRequestsPerOrg = 4
)

// demoOrgs parses RETENTION_DEMO_ORGS; whether each is a demo org is checked where the demo data is loaded.
func demoOrgs(v string) []string {
	switch v = strings.TrimSpace(v); v {
	case "":
		return nil
	case "none":
		return []string{}
	}
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}

// Getenv reads one variable; os.Getenv in production, a map in tests.
type Getenv func(string) string

// Load reads the configuration from getenv and validates it. With dev set, DATABASE_URL may be empty (the caller
// starts a private cluster) and the development secret is used when no other is set.
func Load(getenv Getenv, dev bool) (*Config, error) {
	cfg := &Config{
		DatabaseURL:     getenv("DATABASE_URL"),
		HTTPAddr:        orDefault(getenv("HTTP_ADDR"), "127.0.0.1:8080"),
		AuthHS256Secret: getenv("AUTH_HS256_SECRET"),
		AuthJWKSURL:     getenv("AUTH_JWKS_URL"),
		PprofAddr:       getenv("PPROF_ADDR"),
		DemoOrgs:        demoOrgs(getenv("RETENTION_DEMO_ORGS")),
		Dev:             dev,
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	cfg.LogLevel, err = parseLevel(getenv("LOG_LEVEL"))
	add(err)
	cfg.API, err = parseBool("RETENTIOND_API", getenv("RETENTIOND_API"), true)
	add(err)
	cfg.Scheduler, err = parseBool("RETENTIOND_SCHEDULER", getenv("RETENTIOND_SCHEDULER"), true)
	add(err)
	cfg.ShutdownTimeout, err = parseDuration("SHUTDOWN_TIMEOUT", getenv("SHUTDOWN_TIMEOUT"), 30*time.Second)
	add(err)
	cfg.LakeSchedule, err = parseSchedule("RETENTION_SCHEDULE", getenv("RETENTION_SCHEDULE"), DefaultLakeSchedule)
	add(err)
	cfg.ProfileSchedule, err = parseSchedule("RETENTION_PROFILE_SCHEDULE", getenv("RETENTION_PROFILE_SCHEDULE"), DefaultProfileSchedule)
	add(err)
	cfg.IngestionGrace, err = parsePeriod("RETENTION_INGESTION_GRACE", getenv("RETENTION_INGESTION_GRACE"), retention.Period{Days: 30}, true)
	add(err)
	cfg.HistoryKeep, err = parsePeriod("RETENTION_HISTORY_KEEP", getenv("RETENTION_HISTORY_KEEP"), retention.Period{Years: 1}, false)
	add(err)
	cfg.AuditKeep, err = parsePeriod("AUDIT_KEEP", getenv("AUDIT_KEEP"), retention.Period{Days: 365}, false)
	add(err)
	if err == nil && cfg.AuditKeep.ComparableDays() < 30 {
		add(fmt.Errorf("AUDIT_KEEP must be at least P30D (audit events are kept at least 30 days); got %s", cfg.AuditKeep))
	}
	cfg.ExpirationQuota, err = parseInt("RETENTION_EXPIRATION_QUOTA", getenv("RETENTION_EXPIRATION_QUOTA"), catalog.DefaultExpirationQuota, 1, catalog.MaxExpirationQuota)
	add(err)
	cfg.ExpirationInterval, err = parseDuration("RETENTION_EXPIRATION_INTERVAL", getenv("RETENTION_EXPIRATION_INTERVAL"), time.Minute)
	add(err)
	cfg.WorkOrderDailyQuota, err = parseInt("RETENTION_WORKORDER_DAILY_QUOTA", getenv("RETENTION_WORKORDER_DAILY_QUOTA"), catalog.DefaultDailyIdentityQuota, 1, catalog.MaxIdentityQuota)
	add(err)
	cfg.WorkOrderMonthlyQuota, err = parseInt("RETENTION_WORKORDER_MONTHLY_QUOTA", getenv("RETENTION_WORKORDER_MONTHLY_QUOTA"), catalog.DefaultMonthlyIdentityQuota, 1, catalog.MaxIdentityQuota)
	add(err)
	cfg.WorkOrdersInFlight, err = parseInt("RETENTION_WORKORDERS_IN_FLIGHT", getenv("RETENTION_WORKORDERS_IN_FLIGHT"), catalog.DefaultWorkOrdersInFlight, 1, 10_000)
	add(err)
	cfg.WorkOrderInterval, err = parseDuration("RETENTION_WORKORDER_INTERVAL", getenv("RETENTION_WORKORDER_INTERVAL"), 10*time.Second)
	add(err)
	if cfg.IdentityHashKey = getenv("RETENTION_IDENTITY_HASH_KEY"); cfg.IdentityHashKey == "" {
		cfg.IdentityHashKey = DefaultIdentityHashKey
	}
	cfg.BatchSize, err = parseInt("RETENTION_BATCH_SIZE", getenv("RETENTION_BATCH_SIZE"), 10_000, 100, 1_000_000)
	add(err)
	cfg.SweepWorkers, err = parseInt("RETENTION_SWEEP_WORKERS", getenv("RETENTION_SWEEP_WORKERS"), 2, 1, 16)
	add(err)
	cfg.SweepBusyShare, err = parseInt("RETENTION_SWEEP_BUSY_SHARE", getenv("RETENTION_SWEEP_BUSY_SHARE"), 25, 1, 100)
	add(err)
	cfg.JobTimeout, err = parseDuration("RETENTION_JOB_TIMEOUT", getenv("RETENTION_JOB_TIMEOUT"), 20*time.Second)
	add(err)
	cfg.RescueAfter, err = parseDuration("RETENTION_RESCUE_AFTER", getenv("RETENTION_RESCUE_AFTER"), 30*time.Second)
	add(err)
	if err == nil && cfg.RescueAfter <= cfg.JobTimeout {
		add(errors.New("RETENTION_RESCUE_AFTER must be longer than RETENTION_JOB_TIMEOUT, so a live job is never taken for a stuck one"))
	}
	add(cfg.loadBulkheads(getenv))
	add(cfg.validate())
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// loadBulkheads reads the pools' sizes, the HTTP timeouts and the per-org limit.
func (c *Config) loadBulkheads(getenv Getenv) error {
	var errs []error
	var err error
	c.RequestConns, err = parseInt("DATABASE_POOL_REQUESTS", getenv("DATABASE_POOL_REQUESTS"), DefaultRequestConns, 2, 1000)
	errs = append(errs, err)
	// River holds one connection to listen for new jobs, and a run works on RETENTION_SWEEP_WORKERS at once.
	c.JobConns, err = parseInt("DATABASE_POOL_JOBS", getenv("DATABASE_POOL_JOBS"), DefaultJobConns, 4, 1000)
	errs = append(errs, err)
	c.HealthConns, err = parseInt("DATABASE_POOL_HEALTH", getenv("DATABASE_POOL_HEALTH"), DefaultHealthConns, 1, 100)
	errs = append(errs, err)
	c.HTTPReadTimeout, err = parseDuration("HTTP_READ_TIMEOUT", getenv("HTTP_READ_TIMEOUT"), DefaultHTTPReadTimeout)
	errs = append(errs, err)
	c.HTTPWriteTimeout, err = parseDuration("HTTP_WRITE_TIMEOUT", getenv("HTTP_WRITE_TIMEOUT"), DefaultHTTPWriteTimeout)
	errs = append(errs, err)
	c.LongRequestsPerOrg, err = parseInt("LONG_REQUESTS_PER_ORG", getenv("LONG_REQUESTS_PER_ORG"), DefaultLongRequestsPerOrg, 1, 1000)
	errs = append(errs, err)
	return errors.Join(errs...)
}

func (c *Config) validate() error {
	var errs []error
	if c.DatabaseURL == "" && !c.Dev {
		errs = append(errs, errors.New("DATABASE_URL is required (a postgres:// URL), unless the server runs with --dev"))
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		errs = append(errs, errors.New("DATABASE_URL must be a postgres:// or postgresql:// URL"))
	}
	if _, port, err := net.SplitHostPort(c.HTTPAddr); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("HTTP_ADDR must be host:port, such as 127.0.0.1:8080; got %q", c.HTTPAddr))
	}
	if _, port, err := net.SplitHostPort(c.PprofAddr); c.PprofAddr != "" && (err != nil || port == "") {
		errs = append(errs, fmt.Errorf("PPROF_ADDR must be host:port, such as 127.0.0.1:6060, or empty (no profiles); got %q", c.PprofAddr))
	}
	errs = append(errs, c.validateAuth())
	if !c.API && !c.Scheduler {
		errs = append(errs, errors.New("RETENTIOND_API and RETENTIOND_SCHEDULER are both false: the process would do nothing"))
	}
	return errors.Join(errs...)
}

func (c *Config) validateAuth() error {
	if c.AuthHS256Secret == "" && c.Dev {
		c.AuthHS256Secret = DevSecret
	}
	if c.AuthHS256Secret == DevSecret && !c.Dev {
		return errors.New("AUTH_HS256_SECRET must not be the development secret outside --dev")
	}
	if c.AuthHS256Secret != "" && len(c.AuthHS256Secret) < minSecretLength {
		return fmt.Errorf("AUTH_HS256_SECRET must be at least %d bytes long", minSecretLength)
	}
	if c.AuthHS256Secret == "" && c.AuthJWKSURL == "" {
		return errors.New("AUTH_HS256_SECRET or AUTH_JWKS_URL is required to verify tokens")
	}
	if c.AuthJWKSURL != "" && !strings.HasPrefix(c.AuthJWKSURL, "https://") && !strings.HasPrefix(c.AuthJWKSURL, "http://") {
		return errors.New("AUTH_JWKS_URL must be an http:// or https:// URL")
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func parseLevel(v string) (slog.Level, error) {
	var l slog.Level
	if v == "" {
		return slog.LevelInfo, nil
	}
	if err := l.UnmarshalText([]byte(v)); err != nil {
		return l, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error; got %q", v)
	}
	return l, nil
}

func parseBool(name, v string, def bool) (bool, error) {
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def, fmt.Errorf("%s must be true or false; got %q", name, v)
	}
	return b, nil
}

func parseDuration(name, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return def, fmt.Errorf("%s must be a positive Go duration such as 30s; got %q", name, v)
	}
	return d, nil
}

// parseSchedule checks a cron expression with the parser jobs.ParseSchedule uses (robfig/cron's standard one), so
// that a bad value stops the process at start, naming its variable.
func parseSchedule(name, v, def string) (string, error) {
	if v == "" {
		return def, nil
	}
	if _, err := cron.ParseStandard(v); err != nil {
		return def, fmt.Errorf("%s must be a 5-field cron expression in UTC such as %q: %w", name, def, err)
	}
	return v, nil
}

// parsePeriod reads an ISO-8601 period; with zeroOK, P0D (none) is accepted too, as tests and benchmarks need for
// the ingestion grace.
func parsePeriod(name, v string, def retention.Period, zeroOK bool) (retention.Period, error) {
	if v == "" {
		return def, nil
	}
	if zeroOK && v == "P0D" {
		return retention.Period{}, nil
	}
	p, err := retention.ParsePeriod(v)
	if err != nil {
		return def, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

func parseInt(name, v string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return def, fmt.Errorf("%s must be a whole number from %d to %d; got %q", name, lo, hi, v)
	}
	return n, nil
}
