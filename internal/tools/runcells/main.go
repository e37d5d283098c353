// Command runcells is `make run-cells`: two cells of retentiond, each on a private PostgreSQL of its own, behind
// the HAProxy of deploy/cells/haproxy.cfg, on this machine.
//
//	make run-cells          (builds bin/ and runs ./bin/runcells)
//
// Cell a holds the demo org ACME00000000000000000001@AdobeOrg and cell b GLOBEX000000000000000002@AdobeOrg, each
// loaded by its own `retentiond --dev` (RETENTION_DEMO_ORGS). Their PostgreSQL clusters live beside `make run`'s, in
// the checkout's .data/cells/a and .data/cells/b (as `make run` picks its folder), and are kept between runs, as is
// the org -> cell map .data/cells/orgs.map (first copied from deploy/cells/orgs.map). The proxy listens on HTTP_ADDR
// (default 127.0.0.1:8080, where `make run` listens: run one or the other). Ctrl-C stops the proxy, both retentiond
// and both PostgreSQL clusters. Before it starts anything it takes the checkout's run-cells lock (a second run in
// the checkout stops there) and checks that the proxy's address is free. Killed (kill -9), it takes its retentiond
// and proxy along (the kernel signals them); its PostgreSQL servers stay, and the next run takes them over.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/cells"
	"github.com/acme/retention/internal/config"
	"github.com/acme/retention/internal/demo"
	"github.com/acme/retention/internal/pgcluster"
)

// cell is one cell of the demo: its name in the proxy's configuration, the demo org it starts with, and the demo
// orgs it holds now (after a move of one, another cell's).
type cell struct {
	name, org string
	demoOrgs  []string
	dev       *pgcluster.Dev
	addr      string
	cmd       *exec.Cmd
	exited    chan struct{}
	logPath   string
}

func main() { os.Exit(exitCode()) }

// exitCode runs everything and returns the exit status, so that deferred cleanups run before main exits.
func exitCode() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "run-cells:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, out io.Writer) (err error) {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	checkout := pgcluster.DevCheckout(wd)
	single, _, err := pgcluster.DevDataDir(checkout)
	if err != nil {
		return err
	}
	base := filepath.Join(filepath.Dir(single), "cells")
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	retentiond := filepath.Join(filepath.Dir(exe), "retentiond")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lock, err := lockRun(base)
	if err != nil {
		return err
	}
	defer lock.Close() // after stopCells: the next run waits for everything to stop
	addr, err := proxyAddr(ctx)
	if err != nil {
		return err
	}

	cs := []*cell{{name: "a", org: demo.Orgs[0]}, {name: "b", org: demo.Orgs[1]}}
	mapFile, err := placeDemoOrgs(checkout, base, cs)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopCells(cs)) }()
	for _, c := range cs {
		fmt.Fprintf(out, "run-cells: starting cell %s (PostgreSQL in %s, %s)\n", c.name, filepath.Join(base, c.name), c.demoNote())
		if err := c.start(ctx, retentiond, base, logger); err != nil {
			return fmt.Errorf("cell %s: %w", c.name, err)
		}
	}
	for _, c := range cs {
		if err := c.waitReady(ctx); err != nil {
			return fmt.Errorf("cell %s: %w (its log: %s)", c.name, err, c.logPath)
		}
	}
	proxy, err := startProxy(ctx, checkout, base, addr, mapFile, cs)
	if err != nil {
		return err
	}
	defer func() { _ = proxy.Stop() }()
	if err := banner(out, proxy, checkout, base, cs); err != nil {
		return err
	}
	exited := make(chan string, len(cs)+1)
	for _, c := range cs {
		go func() { <-c.exited; exited <- "retentiond of cell " + c.name }()
	}
	go func() { <-proxy.Done(); exited <- "haproxy" }()
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nrun-cells: stopping the proxy, both retentiond and both PostgreSQL clusters")
		return nil
	case what := <-exited:
		return fmt.Errorf("%s ended on its own: see its log in %s", what, base)
	}
}

// demoNote says which demo orgs the cell loads, for its start line.
func (c *cell) demoNote() string {
	if len(c.demoOrgs) == 0 {
		return "no demo org: the map places none here"
	}
	return "demo orgs " + strings.Join(c.demoOrgs, ", ")
}

// start starts the cell's PostgreSQL (or takes over one a killed run left) and its retentiond.
func (c *cell) start(ctx context.Context, retentiond, base string, logger *slog.Logger) error {
	dir := filepath.Join(base, c.name, "postgres")
	dev, err := pgcluster.StartDev(ctx, dir, "retention", logger)
	if err != nil {
		return err
	}
	c.dev = dev
	if c.addr, err = cells.FreeAddr(ctx); err != nil {
		return err
	}
	c.logPath = filepath.Join(base, c.name, "retentiond.log")
	log, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// Not CommandContext: stopCells sends SIGTERM and waits, so that retentiond stops before its PostgreSQL does.
	c.cmd = exec.Command(retentiond, "--dev", "-addr", c.addr) //nolint:noctx // stopped by stopCells, see above
	demoOrgs := strings.Join(c.demoOrgs, ",")
	if demoOrgs == "" {
		demoOrgs = "none"
	}
	c.cmd.Env = append(os.Environ(), "DATABASE_URL="+dev.URL(), "RETENTION_DEMO_ORGS="+demoOrgs, "HTTP_ADDR=")
	c.cmd.Stdout, c.cmd.Stderr = log, log
	// A group of its own, so that Ctrl-C reaches runcells alone, which stops the proxy first and each retentiond
	// before its PostgreSQL; otherwise the first process to exit on the terminal's signal would look like a crash.
	c.cmd.SysProcAttr = childAttr()
	if err := c.cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", retentiond, err)
	}
	c.exited = make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		_ = log.Close()
		close(c.exited)
	}()
	return nil
}

// waitReady polls the cell's /readyz: retentiond listens once its demo data is loaded, which nothing announces.
func (c *cell) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			return errors.New("retentiond exited at start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("retentiond not ready within 5 minutes")
		}
	}
}

// stopCells stops each cell's retentiond (SIGTERM, as Ctrl-C) and then its PostgreSQL.
func stopCells(cs []*cell) error {
	var errs []error
	for _, c := range cs {
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			<-c.exited
		}
	}
	for _, c := range cs {
		if c.dev != nil {
			errs = append(errs, c.dev.Stop(context.Background()))
		}
	}
	return errors.Join(errs...)
}

// placeDemoOrgs copies the shipped map on the first run and gives each cell the demo orgs the map places in it, and
// the default cell (the first) the demo orgs it does not place: a demo org moved to another cell is not loaded
// afresh into the cell it left. It returns the map's path.
func placeDemoOrgs(checkout, base string, cs []*cell) (string, error) {
	mapFile := filepath.Join(base, "orgs.map")
	if err := os.MkdirAll(base, 0o755); err != nil { //nolint:gosec // the postgres user must enter it when run as root
		return "", err
	}
	if _, err := os.Stat(mapFile); errors.Is(err, os.ErrNotExist) {
		shipped, err := os.ReadFile(filepath.Join(checkout, "deploy", "cells", "orgs.map")) //nolint:gosec // the checkout's own file
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(mapFile, shipped, 0o644); err != nil { //nolint:gosec // placement is no secret
			return "", err
		}
	}
	routes, err := cells.ReadMap(mapFile)
	if err != nil {
		return "", err
	}
	for _, org := range demo.Orgs {
		home := cs[0]
		for _, c := range cs {
			if routes[org] == c.name {
				home = c
			}
		}
		home.demoOrgs = append(home.demoOrgs, org)
	}
	return mapFile, nil
}

// lockRun takes the lock of make run-cells in base (run-cells.lock, flock: the kernel releases it however runcells
// ends) and writes runcells' pid in it. A second run in the same checkout stops there, before it would share the
// first one's clusters and replace its proxy's admin socket.
func lockRun(base string) (*os.File, error) {
	if err := os.MkdirAll(base, 0o755); err != nil { //nolint:gosec // the postgres user must enter it when run as root
		return nil, err
	}
	path := filepath.Join(base, "run-cells.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // the checkout's own folder
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a descriptor fits in int
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := os.ReadFile(path) //nolint:gosec // as above
			return nil, fmt.Errorf("another make run-cells (pid %s) runs in this checkout: use it, or stop it (Ctrl-C) first", strings.TrimSpace(string(pid)))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// proxyAddr is where the proxy listens: HTTP_ADDR, else make run's 127.0.0.1:8080. It must be free before anything
// starts, since HAProxy could only fail to bind it once both cells had started, and say why in its log alone.
func proxyAddr(ctx context.Context) (string, error) {
	addr := os.Getenv("HTTP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("the proxy's address %s is taken (by a make run, or another make run-cells?): stop what serves there, or set HTTP_ADDR to another host:port: %w", addr, err)
	}
	return addr, ln.Close()
}

// startProxy starts HAProxy on the shipped configuration and the map of placeDemoOrgs, listening on addr.
func startProxy(ctx context.Context, checkout, base, addr, mapFile string, cs []*cell) (*cells.Proxy, error) {
	log, err := os.OpenFile(filepath.Join(base, "haproxy.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) //nolint:gosec // the checkout's own folder
	if err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	for _, c := range cs {
		addrs[c.name] = c.addr
	}
	p, err := cells.StartProxy(ctx, cells.ProxyConfig{
		ConfigFile: filepath.Join(checkout, "deploy", "cells", "haproxy.cfg"), Addr: addr,
		Cells: addrs, Default: cs[0].name, MapFile: mapFile, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("start the proxy on %s (HTTP_ADDR; its log: %s): %w", addr, log.Name(), err)
	}
	return p, nil
}

// banner prints where everything is, a token per org and a curl per cell's org, all through the proxy.
func banner(out io.Writer, proxy *cells.Proxy, checkout, base string, cs []*cell) error {
	url := "http://" + proxy.Addr
	fmt.Fprintf(out, "\nTwo cells of retentiond behind HAProxy, serving at %s (deploy/cells/haproxy.cfg).\n\n", url)
	for _, c := range cs {
		fmt.Fprintf(out, "  cell %s: retentiond at http://%s (log %s), PostgreSQL %s\n", c.name, c.addr, c.logPath, c.dev.URL())
	}
	fmt.Fprintf(out, "  org -> cell map: %s (admin socket %s)\n", proxy.Router.MapFile, proxy.Router.Socket)
	for _, c := range cs {
		token, err := httpapi.MintToken(config.DevSecret, httpapi.Claims{
			RegisteredClaims: jwt.RegisteredClaims{Subject: "dev@acme.example", ExpiresAt: jwt.NewNumericDate(time.Now().Add(24 * time.Hour))},
			Org:              c.org, ClientID: "retentionctl-dev",
			Scope: strings.Join(catalog.AllScopes, " "),
		})
		if err != nil {
			return err
		}
		cell, _, err := proxy.Router.Route(c.org)
		if err != nil {
			return err
		}
		v := "TOKEN_" + strings.ToUpper(c.name)
		fmt.Fprintf(out, `
Org %[1]s, in cell %[2]s:

  export %[3]s=%[4]s
  curl -s -H "Authorization: Bearer $%[3]s" -H "x-api-key: dev" -H "x-gw-ims-org-id: %[1]s" %[5]s/dataSets
`, c.org, cell, v, token, url)
	}
	if err := moveTour(out, proxy, checkout, cs); err != nil {
		return err
	}
	fmt.Fprintf(out, `
Each cell's own: curl -s %[1]s/cells/a/readyz   curl -s %[1]s/cells/b/metrics
Stop with Ctrl-C: the proxy, both retentiond and both PostgreSQL clusters stop; the next make run-cells reuses the data in %[2]s.
`, url, base)
	return nil
}

// moveTour prints the command that moves the first demo org from the first cell, its home, to the second while it is
// there: the move of README's "Past one Postgres", as printed there when the data is in the checkout.
func moveTour(out io.Writer, proxy *cells.Proxy, checkout string, cs []*cell) error {
	from, to := cs[0], cs[1]
	home, _, err := proxy.Router.Route(from.org)
	if err != nil || home != from.name {
		return err
	}
	fmt.Fprintf(out, `
Move org %[1]s from cell %[2]s to cell %[3]s, from a second shell in this checkout (its writes answer 503 with
Retry-After until its route switches; reads go on):

  ./bin/retentionctl org move -org %[1]s -from "$(cat %[4]s)" -to "$(cat %[5]s)" -to-cell %[3]s -cells-map %[6]s -cells-socket %[7]s
`, from.org, from.name, to.name, inCheckout(checkout, from.dev.URLFile()), inCheckout(checkout, to.dev.URLFile()),
		inCheckout(checkout, proxy.Router.MapFile), inCheckout(checkout, proxy.Router.Socket))
	return nil
}

// inCheckout is path relative to the checkout when it is inside it (.data/cells/...), else as it is
// (/var/tmp/retentiond-<hash>/cells/...): a name the printed command can use from the checkout.
func inCheckout(checkout, path string) string {
	if real, err := filepath.EvalSymlinks(checkout); err == nil {
		checkout = real // as the data folder's path is (pgcluster.DevDataDir)
	}
	if rel, err := filepath.Rel(checkout, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}
