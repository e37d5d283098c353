// Package pgcluster starts and stops a private PostgreSQL cluster from the
// PostgreSQL binaries installed on the machine.
//
// It exists so that `make run` and `make test` work on a machine that has
// PostgreSQL installed but no server running and no database configured: the
// cluster lives in a folder of its own, listens on 127.0.0.1 only, trusts
// every local connection and never touches the system's clusters.
//
// PostgreSQL refuses to run as root. When this process is root, every
// initdb, pg_ctl and postgres process therefore runs as the `postgres` OS
// user, which must be able to enter the data folder and each of its parents;
// Start arranges that where it safely can and says why when it cannot.
//
// Its files follow those concerns: pgcluster.go is the cluster's life (Start, reuse, Stop, CreateDatabase),
// tools.go runs PostgreSQL's programs (initdb, pg_ctl, psql), settings.go checks and passes server settings,
// account.go is the OS user that runs the server as root and datadir.go the data folder it must reach (with
// DevDataDir, where `make run` keeps it), pidfile.go reads postmaster.pid, and devstate.go is what `make run`
// leaves beside the data for other commands.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Superuser is the PostgreSQL role that initdb creates and that URL connects
// as. A fixed name, rather than the OS user's, keeps URLs identical for root
// and non-root runs.
const Superuser = "postgres"

// startTimeout bounds pg_ctl's own wait for the server to accept
// connections; a cold start on a loaded 2-core CI machine takes a few
// seconds, so 60 s only trips when something is really wrong.
const startTimeout = 60 * time.Second

// Config says where and how to run a private cluster. Zero values get
// defaults.
type Config struct {
	// DataDir is the cluster data folder. It is created and initialized
	// (initdb) if missing or empty, and reused if it already holds a
	// cluster. "" means a new folder under os.TempDir(), which the caller
	// then owns and should remove (Cluster.DataDir) after Stop.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one. A cluster
	// that is already running in DataDir keeps the port it has.
	Port int
	// PreferredPort, with Port 0, is the port tried first; when something else listens there, a free one is
	// taken instead.
	PreferredPort int
	// BinDir holds the PostgreSQL server binaries. "" finds them:
	// `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin, then
	// PATH.
	BinDir string
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
	// Settings are extra postgresql.conf settings passed as -c NAME=VALUE
	// when the server starts (e.g. shared_buffers, or fsync=off for
	// throwaway test clusters). They are not applied to a cluster that was
	// already running. port and listen_addresses are refused because the
	// URL depends on them: use Port instead.
	Settings map[string]string
}

// Cluster is a running private PostgreSQL cluster, either started by Start or
// found already running in the data folder.
type Cluster struct {
	dataDir string
	port    int
	binDir  string
	log     *slog.Logger
	// runAs is the credential for server-side tools; nil when they run as
	// this process's own user.
	runAs *syscall.Credential
	// owned records whether this Cluster started the server. Stop only
	// stops servers it started, so a second `make run` that found the
	// first one's server does not pull it from under the first.
	owned bool

	mu      sync.Mutex
	stopped bool
}

// URL returns a connection URL for database on this cluster, as the
// superuser, without TLS (the server listens on loopback only and has no
// certificate).
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the cluster listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// DataDir returns the absolute path of the cluster's data folder.
func (c *Cluster) DataDir() string { return c.dataDir }

// BinDir returns the folder holding the PostgreSQL binaries in use, so
// callers can run psql or pg_dump of the same version as the server.
func (c *Cluster) BinDir() string { return c.binDir }

// Owned reports whether this Cluster started the server (and so Stop will
// stop it), as opposed to having found it already running.
func (c *Cluster) Owned() bool { return c.owned }

// Stop shuts the server down with `pg_ctl stop -m fast`, which disconnects
// clients and rolls back their transactions instead of waiting for them.
// It is a no-op for a cluster that was already running when Start found it,
// and safe to call more than once.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if !c.owned {
		c.stopped = true
		c.log.Info("leaving reused postgres running", "dir", c.dataDir, "port", c.port)
		return nil
	}
	out, err := c.serverTool(ctx, "pg_ctl", "-D", c.dataDir, "-m", "fast", "-w",
		"-t", strconv.Itoa(int(startTimeout/time.Second)), "stop")
	if err != nil {
		// pg_ctl fails when the server is already gone (someone else
		// stopped it, or it crashed); that is the state Stop wants.
		if _, running := runningPID(c.dataDir); running {
			return fmt.Errorf("stop postgres in %s: %w\n%s", c.dataDir, err, out)
		}
	}
	c.stopped = true
	c.log.Info("stopped postgres", "dir", c.dataDir, "port", c.port)
	return nil
}

// CreateDatabase creates database name unless it already exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("create database: empty name")
	}
	// The name travels as a psql variable and is quoted by format(%I) on
	// the server, so any name is safe; \gexec runs the CREATE only when
	// the database is missing (CREATE DATABASE has no IF NOT EXISTS).
	script := `SELECT format('CREATE DATABASE %I', :'dbname')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'dbname') \gexec
`
	out, err := c.psql(ctx, "postgres", strings.NewReader(script), "-v", "dbname="+name)
	if err != nil {
		// Two callers racing past the NOT EXISTS check: the loser's
		// failure still leaves the database in place.
		if strings.Contains(out, "already exists") {
			return nil
		}
		return fmt.Errorf("create database %q in postgres on port %d: %w\n%s", name, c.port, err, out)
	}
	return nil
}

// Start makes sure a cluster runs in cfg.DataDir and returns it: it
// initializes the folder if needed, reuses a server already running there,
// and otherwise starts one and waits until it accepts connections.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkSettings(cfg.Settings); err != nil {
		return nil, err
	}
	dir := cfg.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "pgcluster-")
		if err != nil {
			return nil, fmt.Errorf("start postgres: create data folder: %w", err)
		}
		dir = tmp
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("start postgres in %s: %w", cfg.DataDir, err)
	}
	c, err := start(ctx, cfg, dir, logger)
	if err != nil {
		return nil, fmt.Errorf("start postgres in %s: %w", dir, err)
	}
	return c, nil
}

func start(ctx context.Context, cfg Config, dir string, logger *slog.Logger) (*Cluster, error) {
	c, pgUser, err := newCluster(ctx, cfg.BinDir, dir, logger)
	if err != nil {
		return nil, err
	}
	if c.dataDir, err = prepareDataDir(dir, pgUser, logger); err != nil {
		return nil, err
	}
	dir = c.dataDir

	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := c.initdb(ctx, cfg.Settings["fsync"] == "off"); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}

	if pf, running := runningPID(dir); running {
		return c.reuse(ctx, cfg, pf)
	}
	return c.startServer(ctx, cfg)
}

// newCluster is the Cluster of the data folder dir before anything is started: where its binaries are and, when
// this process is root, the OS user its server-side tools run as (also returned, nil otherwise).
func newCluster(ctx context.Context, binDir, dir string, logger *slog.Logger) (*Cluster, *account, error) {
	binDir, err := findBinDir(ctx, binDir)
	if err != nil {
		return nil, nil, err
	}
	c := &Cluster{dataDir: dir, binDir: binDir, log: logger}
	if os.Geteuid() != 0 {
		return c, nil, nil
	}
	pgUser, err := lookupAccount(osUser)
	if err != nil {
		return nil, nil, fmt.Errorf("running as root, so PostgreSQL must run as the %q OS user: %w", osUser, err)
	}
	c.runAs = pgUser.credential()
	return c, pgUser, nil
}

// reuse adopts a server that is already running in the data folder, so a
// second `make run` (or a crashed one that left its server behind) does not
// fight over the folder's lock file.
func (c *Cluster) reuse(ctx context.Context, cfg Config, pf pidFile) (*Cluster, error) {
	if pf.port == 0 {
		return nil, fmt.Errorf("a server (pid %d) runs here but its postmaster.pid names no port yet", pf.pid)
	}
	c.port = pf.port
	if cfg.Port != 0 && cfg.Port != pf.port {
		c.log.Warn("reusing running postgres on its own port, not the configured one",
			"dir", c.dataDir, "port", pf.port, "configured", cfg.Port)
	}
	if len(cfg.Settings) > 0 {
		c.log.Warn("postgres was already running; settings not applied", "dir", c.dataDir)
	}
	if err := c.waitReady(ctx, startTimeout); err != nil {
		return nil, fmt.Errorf("reuse running server (pid %d, port %d): %w", pf.pid, pf.port, err)
	}
	c.log.Info("reusing running postgres", "dir", c.dataDir, "port", c.port, "pid", pf.pid)
	return c, nil
}

// startServer runs pg_ctl start, retrying the failures that go away by
// themselves: a port picked by us and taken by someone else before the
// server bound it, and shared memory still held by the children of a server
// that was killed with SIGKILL.
func (c *Cluster) startServer(ctx context.Context, cfg Config) (*Cluster, error) {
	begin := time.Now()
	deadline := begin.Add(startTimeout)
	var lastErr error
	for attempt := 1; ; attempt++ {
		port := cfg.Port
		if port == 0 && attempt == 1 && cfg.PreferredPort != 0 && portFree(ctx, cfg.PreferredPort) {
			port = cfg.PreferredPort
		}
		if port == 0 {
			p, err := freePort(ctx)
			if err != nil {
				return nil, err
			}
			port = p
		}
		c.port = port
		logSize := fileSize(c.logPath())
		out, err := c.serverTool(ctx, "pg_ctl", "-D", c.dataDir, "-l", c.logPath(), "-w",
			"-t", strconv.Itoa(int(startTimeout/time.Second)), "start", "-o", c.serverOptions(port, cfg.Settings))
		if err == nil {
			if err := c.waitReady(ctx, startTimeout); err != nil {
				c.abandon()
				return nil, err
			}
			c.owned = true
			c.log.Info("started postgres", "dir", c.dataDir, "port", port,
				"took", time.Since(begin).Round(time.Millisecond))
			return c, nil
		}
		logTail := tailSince(c.logPath(), logSize, 30)
		lastErr = fmt.Errorf("pg_ctl start on port %d: %w\n%s\n--- %s (tail) ---\n%s", port, err, strings.TrimSpace(out), c.logPath(), logTail)

		// Someone else may have started the server in this folder at the
		// same moment (two `make run`s); theirs is as good as ours.
		if pf, running := runningPID(c.dataDir); running {
			return c.reuse(ctx, cfg, pf)
		}
		retry := false
		switch {
		case ctx.Err() != nil:
		case cfg.Port == 0 && strings.Contains(logTail, "could not bind"),
			strings.Contains(logTail, "pre-existing shared memory block"),
			strings.Contains(out, "another server might be running"):
			retry = true
		}
		if !retry || time.Now().After(deadline) {
			c.abandon()
			return nil, lastErr
		}
		c.log.Info("postgres did not start; retrying", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			c.abandon()
			return nil, errors.Join(lastErr, ctx.Err())
		case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
		}
	}
}

// abandon stops a server that a failed or canceled Start may have left
// running, so an error from Start never leaks a postgres process.
func (c *Cluster) abandon() {
	if _, running := runningPID(c.dataDir); !running {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := c.serverTool(ctx, "pg_ctl", "-D", c.dataDir, "-m", "immediate", "-w", "stop"); err != nil {
		c.log.Warn("could not stop postgres after a failed start", "dir", c.dataDir, "error", err, "output", out)
	}
}

// portFree reports whether nothing listens on the loopback port now.
func portFree(ctx context.Context, port int) bool {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// freePort asks the kernel for a free loopback port. Another process can
// take it before postgres binds it; startServer retries when that happens.
func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("find a free port: unexpected address %v", l.Addr())
	}
	return addr.Port, nil
}

func (c *Cluster) logPath() string { return filepath.Join(c.dataDir, "server.log") }

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// tailSince returns the last n lines written to path after offset, so an
// error shows this start's log lines and not an older run's.
func tailSince(path string, offset int64, n int) string {
	data, err := os.ReadFile(path) //nolint:gosec // the cluster's own log
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	if offset > 0 && offset <= int64(len(data)) {
		data = data[offset:]
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
