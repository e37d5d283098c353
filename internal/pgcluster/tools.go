package pgcluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
