// Package cells places orgs in cells: which cell, a whole deployment of retentiond on its own PostgreSQL, serves
// each org's requests behind the HAProxy of deploy/cells/haproxy.cfg.
//
// Placement has one source of truth, the org -> cell map file: a line "ORG CELL" per placed org (blank lines and
// lines starting with # are ignored), read by HAProxy at start. An org the file does not name goes to the proxy's
// default cell (CELLS_DEFAULT). A Router changes one org's line in the file, atomically (a new file renamed over
// the old one, under an exclusive lock on MAP.lock, so that concurrent callers in any process take turns), and then
// tells the running HAProxy the same through its runtime API on the admin socket (`set map`, `add map`, `del map`),
// so the change applies to the next request without a reload, and a restarted HAProxy reads it from the file.
//
// The contract for a caller that moves an org (retentionctl's org move): Place returns nil only once both the file
// and the running proxy route the org to the new cell, so every request that arrives at the proxy after Place
// returns reaches the new cell (a request already forwarded to the old cell may still be in flight there). Place
// is idempotent: after an error (the file may then have the new route and the proxy the old one) it is called again
// with the same arguments. Route reads the file; Live reads what the running proxy routes by, so a caller can
// check that the two agree.
package cells

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// BackendPrefix is what the proxy's configuration puts before a cell's name to name its backend: cell "a" is served
// by backend "cell_a" (deploy/cells/haproxy.cfg).
const BackendPrefix = "cell_"

// ErrUnknownCell is returned by Place for a cell the running proxy has no backend for.
var ErrUnknownCell = errors.New("no such cell")

// ErrBadName is returned for an org or cell name that the map file or the runtime API cannot carry.
var ErrBadName = errors.New("invalid name")

// orgPattern admits every org id the service accepts in practice (Adobe's are 24 characters and "@AdobeOrg") while
// keeping out what would break a map line or a runtime API command: whitespace, ";" (the command separator), "#"
// and quotes. cellPattern is the names HAProxy accepts in a backend name that the proxy's per-cell paths match.
var (
	orgPattern  = regexp.MustCompile(`^[A-Za-z0-9@._+-]{1,255}$`)
	cellPattern = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)
)

// Router reads and changes the placement of orgs. MapFile must be the path HAProxy was given as CELLS_MAP,
// character for character: the runtime API names a map by the path it was loaded from.
type Router struct {
	// MapFile is the org -> cell map, an absolute path.
	MapFile string
	// Socket is HAProxy's admin socket (CELLS_SOCKET).
	Socket string
	// Default is the cell of orgs the map does not name (CELLS_DEFAULT); Route reports it for them.
	Default string
	// Timeout bounds each exchange on the admin socket; zero means 5 seconds.
	Timeout time.Duration
}

// Route returns the cell the map file places org in, and whether it names the org at all; an org it does not name
// is in the Default cell.
func (r *Router) Route(org string) (cell string, placed bool, err error) {
	routes, err := ReadMap(r.MapFile)
	if err != nil {
		return "", false, err
	}
	if cell, ok := routes[org]; ok {
		return cell, true, nil
	}
	return r.Default, false, nil
}

// Routes returns every placed org and its cell, as the map file says.
func (r *Router) Routes() (map[string]string, error) { return ReadMap(r.MapFile) }

// Place routes org to cell, in the map file and then in the running proxy; see the package comment for what holds
// when it returns. The cell must be one the running proxy has a backend for (ErrUnknownCell).
func (r *Router) Place(ctx context.Context, org, cell string) error {
	if err := checkNames(org, cell); err != nil {
		return err
	}
	cells, err := r.Cells(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(cells, cell) {
		return fmt.Errorf("place %s in cell %q: %w (the proxy has %s)", org, cell, ErrUnknownCell, strings.Join(cells, ", "))
	}
	return r.withLock(func() error {
		if err := r.rewrite(func(m map[string]string) { m[org] = cell }); err != nil {
			return fmt.Errorf("place %s in cell %s: %w", org, cell, err)
		}
		return r.setLive(ctx, org, cell)
	})
}

// Unplace removes org's line, so that the org goes to the Default cell, in the map file and then in the running
// proxy. Removing an org that is not placed is not an error.
func (r *Router) Unplace(ctx context.Context, org string) error {
	if !orgPattern.MatchString(org) {
		return fmt.Errorf("org %q: %w", org, ErrBadName)
	}
	return r.withLock(func() error {
		if err := r.rewrite(func(m map[string]string) { delete(m, org) }); err != nil {
			return fmt.Errorf("unplace %s: %w", org, err)
		}
		out, err := r.command(ctx, "del map "+r.MapFile+" "+org)
		if err != nil {
			return err
		}
		if out != "" && !strings.HasPrefix(out, "Key not found") {
			return fmt.Errorf("unplace %s: the proxy answered %q", org, out)
		}
		return nil
	})
}

// Live returns the org -> cell entries the running proxy routes by. After a successful Place or Unplace, and after
// a (re)start, it equals Routes.
func (r *Router) Live(ctx context.Context) (map[string]string, error) {
	out, err := r.command(ctx, "show map "+r.MapFile)
	if err != nil {
		return nil, err
	}
	live := map[string]string{}
	for line := range strings.Lines(out) {
		// "0x55d0c1e2f3a0 ORG CELL"
		f := strings.Fields(line)
		if len(f) != 3 || !strings.HasPrefix(f[0], "0x") {
			return nil, fmt.Errorf("show map %s: unexpected answer %q", r.MapFile, out)
		}
		live[f[1]] = f[2]
	}
	return live, nil
}

// Cells returns the names of the cells the running proxy has a backend for.
func (r *Router) Cells(ctx context.Context) ([]string, error) {
	out, err := r.command(ctx, "show backend")
	if err != nil {
		return nil, err
	}
	var cells []string
	for line := range strings.Lines(out) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), BackendPrefix); ok {
			cells = append(cells, name)
		}
	}
	return cells, nil
}

// setLive sets org's entry in the running proxy: set map changes an entry that exists, add map adds a missing one.
// Both run under the file's lock, so no other Router adds the same key in between.
func (r *Router) setLive(ctx context.Context, org, cell string) error {
	out, err := r.command(ctx, "set map "+r.MapFile+" "+org+" "+cell)
	if err != nil {
		return err
	}
	if strings.HasPrefix(out, "entry not found") {
		if out, err = r.command(ctx, "add map "+r.MapFile+" "+org+" "+cell); err != nil {
			return err
		}
	}
	if out != "" {
		return fmt.Errorf("route %s to cell %s in the running proxy: it answered %q (the map file has the new route: place it again)", org, cell, out)
	}
	return nil
}

// command sends one command to the runtime API and returns its answer without the trailing blank line; in
// non-interactive mode HAProxy answers and closes the connection.
func (r *Router) command(ctx context.Context, cmd string) (string, error) {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", r.Socket)
	if err != nil {
		return "", fmt.Errorf("reach the proxy's admin socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", commandErr(cmd, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return "", commandErr(cmd, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// commandErr is the error of a command whose exchange failed. The connection's only deadline is its context's, so
// an exchange past it is context.DeadlineExceeded, as the caller's context says: the socket's own timeout error can
// come a moment before the context's timer fires.
func commandErr(cmd string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("proxy runtime API %q: %w (%w)", firstWords(cmd), context.DeadlineExceeded, err)
	}
	return fmt.Errorf("proxy runtime API %q: %w", firstWords(cmd), err)
}

// firstWords names a command in an error by its verb and object ("set map").
func firstWords(cmd string) string {
	f := strings.Fields(cmd)
	return strings.Join(f[:min(2, len(f))], " ")
}

func checkNames(org, cell string) error {
	if !orgPattern.MatchString(org) {
		return fmt.Errorf("org %q: %w: letters, digits and @._+- only, at most 255", org, ErrBadName)
	}
	if !cellPattern.MatchString(cell) {
		return fmt.Errorf("cell %q: %w: lowercase letters, digits, _ and - only, at most 32", cell, ErrBadName)
	}
	return nil
}

// withLock runs fn holding an exclusive flock on MAP.lock, which the kernel releases if the process dies.
func (r *Router) withLock(fn func() error) error {
	f, err := os.OpenFile(r.MapFile+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock the org -> cell map: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil { //nolint:gosec // G115: a file descriptor fits an int
		return fmt.Errorf("lock the org -> cell map: %w", err)
	}
	return fn()
}

// rewrite applies change to the map file's entries and replaces the file with the result: written to a temporary
// file beside it, synced, renamed over it and the folder synced, so that a reader or a crash sees the old file or
// the new one, never a mix.
func (r *Router) rewrite(change func(map[string]string)) error {
	routes, err := ReadMap(r.MapFile)
	if err != nil {
		return err
	}
	change(routes)
	dir := filepath.Dir(r.MapFile)
	tmp, err := os.CreateTemp(dir, filepath.Base(r.MapFile)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := writeMap(tmp, routes); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	// HAProxy, often another user, reads the map at start.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { //nolint:gosec // placement is no secret
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.MapFile); err != nil {
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	d, err := os.Open(dir) //nolint:gosec // the map file's own folder
	if err != nil {
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	return nil
}

// mapHeader opens every map file a Router writes.
const mapHeader = `# org -> cell map of the cells' HAProxy (deploy/cells/haproxy.cfg): "ORG CELL" per line; an org not named here
# goes to the default cell (CELLS_DEFAULT). Written by package internal/cells, which also tells the running proxy:
# an edit by hand applies at the proxy's next start only.
`

func writeMap(w io.Writer, routes map[string]string) error {
	bw := bufio.NewWriter(w)
	_, _ = bw.WriteString(mapHeader)
	orgs := make([]string, 0, len(routes))
	for org := range routes {
		orgs = append(orgs, org)
	}
	slices.Sort(orgs)
	for _, org := range orgs {
		_, _ = fmt.Fprintf(bw, "%s %s\n", org, routes[org])
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write the org -> cell map: %w", err)
	}
	return nil
}

// ReadMap reads a map file into org -> cell. A missing file is an empty map; a line that is not "ORG CELL" with
// valid names, or an org named twice, is an error naming the line.
func ReadMap(path string) (map[string]string, error) {
	routes := map[string]string{}
	f, err := os.Open(path) //nolint:gosec // the operator's own map file
	if errors.Is(err, os.ErrNotExist) {
		return routes, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the org -> cell map: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"ORG CELL\", got %q", path, n, line)
		}
		if err := checkNames(fields[0], fields[1]); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if _, dup := routes[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: org %s is placed twice", path, n, fields[0])
		}
		routes[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the org -> cell map: %w", err)
	}
	return routes, nil
}

// drainPoll is how often Drain asks the proxy again which requests are still in flight.
const drainPoll = 20 * time.Millisecond

// Drain waits until every request that the proxy was forwarding, when Drain was called, to a cell other than keep
// has ended (its answer sent, or its connection closed), and returns how many there were. A caller that moved an org
// to keep calls it after Place: the requests routed to the old cell before the switch are then done with it, and the
// org's data can leave that cell without one of them finding it gone. Requests that arrive after the call do not
// count, wherever they go. It returns ctx's error if they have not all ended when ctx does.
//
// It reads the proxy's streams (`show sess`): one for each request in flight, named by its address and its epoch
// (the number of `show sess` commands before it began), so that an address freed and taken again by a later
// request is not the same stream.
func (r *Router) Drain(ctx context.Context, keep string) (int, error) {
	left, err := r.streams(ctx, keep)
	if err != nil {
		return 0, err
	}
	n := len(left)
	for len(left) > 0 {
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%d of %d requests to other cells still in flight: %w", len(left), n, ctx.Err())
		case <-time.After(drainPoll):
		}
		now, err := r.streams(ctx, keep)
		if err != nil {
			return n, err
		}
		for s := range left {
			if !now[s] {
				delete(left, s)
			}
		}
	}
	return n, nil
}

// stream is one request in flight in the proxy, as `show sess` names it.
type stream struct{ addr, epoch string }

// streams returns the proxy's streams forwarded to a cell's backend other than keep's. Its own stream on the admin
// socket is always listed (fe=GLOBAL), so an answer with no stream at all is one it cannot read.
func (r *Router) streams(ctx context.Context, keep string) (map[stream]bool, error) {
	out, err := r.command(ctx, "show sess")
	if err != nil {
		return nil, err
	}
	found := map[stream]bool{}
	listed := 0
	for line := range strings.Lines(out) {
		// "0x55d0c1e2f3a0: proto=tcpv4 src=127.0.0.1:40962 fe=api be=cell_a srv=a ts=00 epoch=0x1 age=0s …"
		addr, rest, ok := strings.Cut(line, ": ")
		if !ok || !strings.HasPrefix(addr, "0x") {
			continue
		}
		listed++
		var be, epoch string
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, "be="); ok {
				be = v
			} else if v, ok := strings.CutPrefix(f, "epoch="); ok {
				epoch = v
			}
		}
		if cell, ok := strings.CutPrefix(be, BackendPrefix); ok && cell != keep {
			found[stream{addr, epoch}] = true
		}
	}
	if listed == 0 {
		return nil, fmt.Errorf("show sess: unexpected answer %q", out)
	}
	return found, nil
}
