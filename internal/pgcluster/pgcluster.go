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
package pgcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// osUser is the OS account that runs the server when this process is root,
// because postgres refuses to run as root.
const osUser = "postgres"

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

// serverOptions builds pg_ctl's -o string. pg_ctl hands it to /bin/sh, so
// every value is single-quoted. No Unix socket is made: the default folder
// (/var/run/postgresql on Debian) may not exist or may be the system
// cluster's, and TCP on loopback is all the project needs.
func (c *Cluster) serverOptions(port int, settings map[string]string) string {
	opts := []string{
		"-c listen_addresses=127.0.0.1",
		"-c port=" + strconv.Itoa(port),
		"-c unix_socket_directories=''",
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		opts = append(opts, "-c "+shellQuote(name+"="+settings[name]))
	}
	return strings.Join(opts, " ")
}

func (c *Cluster) logPath() string { return filepath.Join(c.dataDir, "server.log") }

// initdb creates the cluster. C.UTF-8 gives UTF-8 text with byte-order
// collation, which sorts the same on every machine; machines without that
// locale fall back to C. noSync skips initdb's final fsync for throwaway
// clusters whose server runs with fsync=off anyway.
func (c *Cluster) initdb(ctx context.Context, noSync bool) error {
	begin := time.Now()
	var out string
	var err error
	for _, locale := range []string{"C.UTF-8", "C"} {
		args := []string{"-D", c.dataDir, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=" + locale}
		if noSync {
			args = append(args, "--no-sync")
		}
		out, err = c.serverTool(ctx, "initdb", args...)
		if err == nil {
			c.log.Info("initialized postgres cluster", "dir", c.dataDir, "locale", locale,
				"took", time.Since(begin).Round(time.Millisecond))
			return nil
		}
		if !strings.Contains(strings.ToLower(out), "locale") {
			break
		}
		c.log.Info("initdb failed with locale; trying the next", "locale", locale)
	}
	return fmt.Errorf("initdb: %w\n%s", err, strings.TrimSpace(out))
}

// waitReady polls with psql until the server answers a query, because a
// listening socket alone does not mean the server is past recovery.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		out, err := c.psql(ctx, "postgres", nil, "-tAc", "select 1")
		if err == nil && strings.TrimSpace(out) == "1" {
			return nil
		}
		select {
		case <-ctx.Done():
			last := strings.TrimSpace(out)
			if err != nil {
				last = err.Error() + ": " + last
			}
			return fmt.Errorf("postgres on port %d does not answer: %w (last try: %s)", c.port, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// psql runs the cluster's psql as this process's user (the server trusts
// every loopback connection), ignoring ~/.psqlrc (-X) and stopping at the
// first error.
func (c *Cluster) psql(ctx context.Context, database string, stdin io.Reader, args ...string) (string, error) {
	bin := filepath.Join(c.binDir, "psql")
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("psql"); lerr == nil {
			bin = p
		}
	}
	full := append([]string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", c.URL(database)}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = cleanEnv("PGCONNECT_TIMEOUT=5")
	cmd.Stdin = stdin
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	err := cmd.Run()
	return buf.String(), err
}

// serverTool runs initdb or pg_ctl from binDir, as the postgres OS user when
// this process is root. Its working folder is / because the caller's (often
// a checkout under /root) may be closed to that user, and tools that look
// up their own path fail there.
func (c *Cluster) serverTool(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = "/"
	cmd.Env = cleanEnv()
	if c.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.runAs}
	}
	// pg_ctl start leaves the server running with its output sent to
	// server.log, so these buffers only ever hold the tools' own words.
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	// Let pg_ctl return without waiting on an inherited pipe if the
	// server ever kept one open.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return buf.String(), err
}

// cleanEnv is the environment for child tools without PG* variables, so a
// developer's PGHOST, PGPORT, PGDATA or PGOPTIONS cannot point them at
// another server or change how this one is reached.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

func checkSettings(settings map[string]string) error {
	for name := range settings {
		if !settingName.MatchString(name) {
			return fmt.Errorf("start postgres: bad setting name %q", name)
		}
		switch strings.ToLower(name) {
		case "port", "listen_addresses", "unix_socket_directories":
			return fmt.Errorf("start postgres: setting %q is managed by pgcluster (use Config.Port)", name)
		}
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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

// findBinDir locates the server binaries. pg_config comes first because it
// names the installation a developer chose; on Debian it may belong to a
// client-only version, so each candidate must actually hold initdb, pg_ctl
// and postgres.
func findBinDir(ctx context.Context, configured string) (string, error) {
	hasServer := func(dir string) bool {
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if configured != "" {
		if !hasServer(configured) {
			return "", fmt.Errorf("BinDir %s lacks initdb, pg_ctl or postgres", configured)
		}
		return configured, nil
	}
	var tried []string
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
		if dir := strings.TrimSpace(string(out)); err == nil && dir != "" {
			if hasServer(dir) {
				return dir, nil
			}
			tried = append(tried, dir+" (from pg_config)")
		}
	}
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		// Newest major version first: compare numerically so 10 > 9.6.
		version := func(d string) float64 {
			v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
			return v
		}
		slices.SortFunc(dirs, func(a, b string) int {
			va, vb := version(a), version(b)
			switch {
			case va > vb:
				return -1
			case va < vb:
				return 1
			}
			return 0
		})
		for _, dir := range dirs {
			if hasServer(dir) {
				return dir, nil
			}
			tried = append(tried, dir)
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			initdb = real
		}
		if dir := filepath.Dir(initdb); hasServer(dir) {
			return dir, nil
		}
		tried = append(tried, filepath.Dir(initdb)+" (from PATH)")
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found; tried %v and PATH; on Debian: apt-get install postgresql", tried)
}

// account is an OS user with the groups that decide what it may enter.
type account struct {
	name string
	uid  int
	gid  int
	gids []int
}

func lookupAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up OS user: %w", err)
	}
	a := &account{name: name}
	if a.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("OS user %s: uid %q: %w", name, u.Uid, err)
	}
	if a.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("OS user %s: gid %q: %w", name, u.Gid, err)
	}
	a.gids = []int{a.gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && !slices.Contains(a.gids, g) {
				a.gids = append(a.gids, g)
			}
		}
	}
	return a, nil
}

func (a *account) credential() *syscall.Credential {
	groups := make([]uint32, len(a.gids))
	for i, g := range a.gids {
		groups[i] = uint32(g) //nolint:gosec // gids come from the system's user database and fit in uint32
	}
	return &syscall.Credential{
		Uid:    uint32(a.uid), //nolint:gosec // as above
		Gid:    uint32(a.gid), //nolint:gosec // as above
		Groups: groups,
	}
}

// canEnter reports whether a may pass through the folder described by st,
// from its mode bits (ACLs are not consulted).
func (a *account) canEnter(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := st.Mode().Perm()
	switch {
	case int(sys.Uid) == a.uid:
		return mode&0o100 != 0
	case slices.Contains(a.gids, int(sys.Gid)):
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

// firstBlocked returns the first existing folder on the way to path that a
// cannot enter, or "" when every existing one lets it through.
func (a *account) firstBlocked(path string) (string, fs.FileInfo) {
	for _, dir := range ancestors(path) {
		st, err := os.Stat(dir)
		if err != nil {
			continue // not there yet: whoever creates it sets its mode
		}
		if !a.canEnter(st) {
			return dir, st
		}
	}
	return "", nil
}

// ancestors lists path's folders from the root down, path included.
func ancestors(path string) []string {
	var dirs []string
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		dirs = append(dirs, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	slices.Reverse(dirs)
	return dirs
}

// prepareDataDir creates the data folder and, when running as root, makes it
// the postgres user's and makes sure that user can reach it. It opens a
// parent folder to that user (search permission only, o+x) just when Start
// created that folder or it lies inside the temporary folder, such as
// t.TempDir()'s 0700 folders; it will not loosen a folder such as /root,
// and says so instead. It returns the folder with symbolic links resolved.
func prepareDataDir(dir string, pg *account, logger *slog.Logger) (string, error) {
	parent := filepath.Dir(dir)
	var created []string
	for _, d := range ancestors(parent) {
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			created = append(created, d)
		}
	}
	// Check the way in before creating anything, so that a refusal
	// leaves no folder behind; then again on the real path, opening
	// what may be opened.
	if pg != nil {
		if err := pg.openWay(parent, created, false, logger); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(parent, 0o755); err != nil { //nolint:gosec // parents must be enterable by the postgres user
		return "", fmt.Errorf("create data folder's parent: %w", err)
	}
	realParent, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return "", fmt.Errorf("resolve data folder's parent: %w", err)
	}
	dir = filepath.Join(realParent, filepath.Base(dir))
	if pg != nil {
		if err := pg.openWay(realParent, created, true, logger); err != nil {
			return "", err
		}
	}

	fresh := false
	switch st, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", fmt.Errorf("create data folder: %w", err)
		}
		fresh = true
	case err != nil:
		return "", fmt.Errorf("inspect data folder: %w", err)
	case !st.IsDir():
		return "", fmt.Errorf("data folder %s is not a folder (%v)", dir, st.Mode())
	default:
		if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
			entries, err := os.ReadDir(dir)
			if err != nil {
				return "", fmt.Errorf("read data folder: %w", err)
			}
			if len(entries) > 0 {
				return "", fmt.Errorf("data folder %s is neither empty nor a PostgreSQL cluster (no PG_VERSION); remove it or pick another", dir)
			}
			fresh = true
		}
	}

	if pg == nil {
		if fresh {
			// postgres insists on 0700 (or 0750) for its data folder.
			if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // a folder, which needs x to be entered
				return "", fmt.Errorf("chmod data folder: %w", err)
			}
		}
		return dir, nil
	}

	if fresh {
		// Lchown: the folder was just checked not to be a symlink, and
		// must not be made into a way to hand another file to postgres.
		if err := os.Lchown(dir, pg.uid, pg.gid); err != nil {
			return "", fmt.Errorf("give data folder to OS user %s: %w", pg.name, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // as above
			return "", fmt.Errorf("chmod data folder: %w", err)
		}
	} else if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != pg.uid {
			return "", fmt.Errorf("data folder %s holds a cluster owned by uid %d, but as root this runs PostgreSQL as OS user %s (uid %d); chown -R it or pick another folder",
				dir, sys.Uid, pg.name, pg.uid)
		}
	}

	return dir, nil
}

// openWay makes sure a can enter every existing folder on the way to (and
// including) path. A closed folder is opened (o+x, search only) when Start
// created it or it lies inside the temporary folder; any other, such as
// /root, is left alone and reported. With fix false it only checks.
func (a *account) openWay(path string, created []string, fix bool, logger *slog.Logger) error {
	tmp := os.TempDir()
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real
	}
	for _, d := range ancestors(path) {
		st, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && !fix {
			continue // created later, with a mode that lets a in
		}
		if err != nil {
			return fmt.Errorf("inspect %s: %w", d, err)
		}
		if a.canEnter(st) {
			continue
		}
		insideTmp := strings.HasPrefix(d, tmp+string(filepath.Separator))
		if !insideTmp && !slices.Contains(created, d) {
			return fmt.Errorf("OS user %s, which runs PostgreSQL when you are root, cannot enter %s (mode %04o); pick a data folder it can reach (make run uses /var/tmp for such checkouts)",
				a.name, d, st.Mode().Perm())
		}
		if !fix {
			continue
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
			return fmt.Errorf("let OS user %s enter %s: %w", a.name, d, err)
		}
		logger.Debug("opened folder to postgres user (o+x)", "dir", d)
	}
	return nil
}

// pidFile is what postmaster.pid says: line 1 the postmaster's pid, line 4
// its port.
type pidFile struct {
	pid  int
	port int
}

// runningPID reads dir/postmaster.pid and reports whether its postmaster is
// alive. A file left by a killed server is stale: either its pid is gone,
// or (after a reboot) it now belongs to an unrelated program, which is
// checked through /proc so that such a file does not block a start.
func runningPID(dir string) (pidFile, bool) {
	path := filepath.Join(dir, "postmaster.pid")
	f, err := os.Open(path) //nolint:gosec // the cluster's own lock file
	if err != nil {
		return pidFile{}, false
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < 4 {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	var pf pidFile
	if len(lines) > 0 {
		pf.pid, _ = strconv.Atoi(lines[0])
	}
	if len(lines) > 3 {
		pf.port, _ = strconv.Atoi(lines[3])
	}
	if pf.pid <= 0 {
		return pf, false
	}
	if err := syscall.Kill(pf.pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return pf, false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pf.pid)); err == nil {
		// A killed postmaster whose parent does not reap it (PID 1 in
		// some containers) lingers as a zombie that kill(pid, 0) still
		// finds; the state letter follows the ")" closing its name.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
			if state := stat[i+2]; state == 'Z' || state == 'X' {
				return pf, false
			}
		}
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pf.pid)); err == nil {
		name := strings.TrimSpace(string(comm))
		if name != "postgres" && name != "postmaster" {
			// postgres would refuse to start over this file ("lock
			// file already exists"), so move it out of the way.
			_ = os.Rename(path, path+".stale")
			return pf, false
		}
	}
	return pf, true
}

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

// DevDataDir returns where `make run` keeps its cluster for the checkout at
// dir, and a sentence explaining the choice for printing.
//
// The cluster lives in checkout/.data/postgres when the server's OS user
// can get there: always when not running as root, and as root when the
// postgres user can enter every folder of the checkout's path. A checkout
// under /root (as in CI) is closed to that user, and opening /root up is
// not ours to do, so the cluster then lives in
// /var/tmp/retentiond-<hash>/postgres, named after a hash of the checkout's
// absolute path so each checkout keeps its own data across runs and
// reboots (/var/tmp, unlike /tmp, is not emptied at boot).
func DevDataDir(checkout string) (string, string, error) {
	abs, err := filepath.Abs(checkout)
	if err != nil {
		return "", "", fmt.Errorf("dev data folder for %s: %w", checkout, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	local := filepath.Join(abs, ".data", "postgres")
	if os.Geteuid() != 0 {
		return local, fmt.Sprintf("PostgreSQL data for this checkout is in %s.", local), nil
	}
	pg, err := lookupAccount(osUser)
	if err != nil {
		return "", "", fmt.Errorf("dev data folder for %s: running as root, so PostgreSQL must run as the %q OS user: %w", abs, osUser, err)
	}
	blocked, st := pg.firstBlocked(local)
	if blocked == "" {
		return local, fmt.Sprintf("PostgreSQL data for this checkout is in %s (run by OS user %s, which can reach it).", local, pg.name), nil
	}
	sum := sha256.Sum256([]byte(abs))
	base := filepath.Join("/var/tmp", "retentiond-"+hex.EncodeToString(sum[:])[:12])
	// /var/tmp is writable by everyone: refuse a folder someone else made
	// there, or a symlink, rather than hand its target to postgres.
	if lst, err := os.Lstat(base); err == nil {
		sys, ok := lst.Sys().(*syscall.Stat_t)
		if !lst.IsDir() || (ok && sys.Uid != 0) {
			return "", "", fmt.Errorf("dev data folder for %s: %s exists but is not a folder owned by root; remove it", abs, base)
		}
	}
	dir := filepath.Join(base, "postgres")
	why := fmt.Sprintf("PostgreSQL data for this checkout is in %s: as root, the server runs as OS user %s, which cannot enter %s (mode %04o), so %s would be out of its reach. Delete that folder to start afresh.",
		dir, pg.name, blocked, st.Mode().Perm(), local)
	return dir, why, nil
}
