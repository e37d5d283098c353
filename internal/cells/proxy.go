package cells

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProxyConfig says how StartProxy runs HAProxy on the shipped configuration (deploy/cells/haproxy.cfg), which reads
// its addresses and paths from the environment.
type ProxyConfig struct {
	// Binary is HAProxy's executable; empty means $HAPROXY, else haproxy on PATH, else Debian's /usr/sbin/haproxy.
	Binary string
	// ConfigFile is the configuration, deploy/cells/haproxy.cfg of the checkout.
	ConfigFile string
	// Addr is where clients connect (PROXY_ADDR); empty picks a free loopback port.
	Addr string
	// Cells maps each cell of the configuration (a, b) to its retentiond's host:port (CELL_A_ADDR, CELL_B_ADDR).
	Cells map[string]string
	// Default is the cell of orgs the map does not name (CELLS_DEFAULT).
	Default string
	// MapFile is the org -> cell map (CELLS_MAP); it is made absolute, and created empty when missing.
	MapFile string
	// Socket is the admin socket (CELLS_SOCKET); empty means "admin.sock" beside MapFile.
	Socket string
	// Log receives HAProxy's output; nil discards it.
	Log io.Writer
}

// Proxy is a running HAProxy started by StartProxy.
type Proxy struct {
	// Addr is the host:port clients connect to.
	Addr string
	// Router reads and changes the placement of orgs in this proxy and its map file.
	Router *Router

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// StartProxy starts HAProxy in the foreground (-db) and returns once its admin socket answers and it accepts
// connections at Addr. Stop ends it; so does ctx's end.
func StartProxy(ctx context.Context, cfg ProxyConfig) (*Proxy, error) {
	env, router, err := cfg.environment(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(router.MapFile); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(router.MapFile, []byte(mapHeader), 0o644); err != nil { //nolint:gosec // placement is no secret
			return nil, fmt.Errorf("create the org -> cell map: %w", err)
		}
	}
	_ = os.Remove(router.Socket) // left by a proxy that was killed; HAProxy will not bind over it
	bin, err := cfg.binary()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "-db", "-f", cfg.ConfigFile)
	cmd.Env = append(os.Environ(), env...)
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.SysProcAttr = proxyAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	p := &Proxy{Addr: envValue(env, "PROXY_ADDR"), Router: router, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// Stop ends HAProxy (SIGTERM: connections are closed at once) and waits for it to exit.
func (p *Proxy) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	<-p.done
	return nil
}

// Done is closed when HAProxy has exited.
func (p *Proxy) Done() <-chan struct{} { return p.done }

// Err is how HAProxy exited, once Done is closed.
func (p *Proxy) Err() error { return p.waitErr }

// waitReady polls until the admin socket answers and Addr accepts a connection: HAProxy announces neither. It gives
// up when HAProxy exits, or after 10 seconds.
func (p *Proxy) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		_, errSock := p.Router.command(ctx, "show info")
		var errConn error
		if errSock == nil {
			var c net.Conn
			if c, errConn = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", p.Addr); errConn == nil {
				_ = c.Close()
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("haproxy exited at start (see its log): %w", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("haproxy not ready within 10s: %w", errors.Join(errSock, errConn))
		}
	}
}

// environment returns the variables the configuration reads, and the Router on its map and socket.
func (cfg ProxyConfig) environment(ctx context.Context) ([]string, *Router, error) {
	if cfg.MapFile == "" {
		return nil, nil, errors.New("start haproxy: no map file")
	}
	mapFile, err := filepath.Abs(cfg.MapFile)
	if err != nil {
		return nil, nil, fmt.Errorf("start haproxy: %w", err)
	}
	socket := cfg.Socket
	if socket == "" {
		socket = filepath.Join(filepath.Dir(mapFile), "admin.sock")
	}
	if _, ok := cfg.Cells[cfg.Default]; !ok {
		return nil, nil, fmt.Errorf("start haproxy: default cell %q is not among the cells", cfg.Default)
	}
	addr := cfg.Addr
	if addr == "" {
		if addr, err = FreeAddr(ctx); err != nil {
			return nil, nil, err
		}
	}
	env := []string{"PROXY_ADDR=" + addr, "CELLS_MAP=" + mapFile, "CELLS_SOCKET=" + socket, "CELLS_DEFAULT=" + cfg.Default}
	names := make([]string, 0, len(cfg.Cells))
	for name := range cfg.Cells {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !cellPattern.MatchString(name) {
			return nil, nil, fmt.Errorf("start haproxy: cell %q: %w", name, ErrBadName)
		}
		env = append(env, "CELL_"+strings.ToUpper(name)+"_ADDR="+cfg.Cells[name])
	}
	return env, &Router{MapFile: mapFile, Socket: socket, Default: cfg.Default}, nil
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// binary finds HAProxy: Binary, $HAPROXY, PATH, then /usr/sbin (not on a non-root user's PATH on Debian).
func (cfg ProxyConfig) binary() (string, error) {
	for _, b := range []string{cfg.Binary, os.Getenv("HAPROXY")} {
		if b != "" {
			return b, nil
		}
	}
	if b, err := exec.LookPath("haproxy"); err == nil {
		return b, nil
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy", nil
	}
	return "", errors.New("haproxy not found: install it (make tools-haproxy, or apt-get install haproxy) or set HAPROXY")
}

// FreeAddr returns a loopback host:port nobody listens on at the moment, for a process that takes its address
// as a setting and cannot report a port 0 picked for it.
func FreeAddr(ctx context.Context) (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}

// Pid is HAProxy's process id: a reload or restart would change it.
func (p *Proxy) Pid() int { return p.cmd.Process.Pid }
