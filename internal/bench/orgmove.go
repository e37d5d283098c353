package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acme/retention/internal/cells"
)

// The org-move scenario's org and its two cells' databases.
const (
	orgMove   = "BENCHMOVE000000000000001@AdobeOrg"
	dbCellA   = "cella"
	dbCellB   = "cellb"
	clientGap = 20 * time.Millisecond // the writer's and the reader's pause between two requests
)

// moveClients are the writer and the reader of the org-move scenario, each one client in a loop through the proxy.
type moveClients struct {
	mu                        sync.Mutex
	acked, refused, failed    int
	firstRefused, lastRefused time.Time
	reads, readsRefused       int
	// movedAt is when the move ended: the writer stops at its next acknowledged write, or moveTail after it.
	movedAt                    time.Time
	unacked                    bool // the writer gave up on an acknowledged write after the move
	writerDone, readerDone     chan struct{}
	stop                       chan struct{}
	writerErrors, readerErrors []string
}

// moveTail bounds how long the writer goes on after the move for a write that is acknowledged again.
const moveTail = 30 * time.Second

// orgMove measures `retentionctl org move` of an org of MoveRows rows between two cells, each a database of the
// harness's server with a retentiond of its own, behind HAProxy on the shipped configuration: its wall time, and how
// long the org's writes were refused (first 503 to last 503 seen by a writer that posts one row through the proxy
// every 20 ms), while a reader reads the org's rows through the proxy as often and counts every answer that is not
// a 200. The baseline is a raw COPY of the same rows from one cell's database to the other's (into a table without
// indexes): the floor of any copy. Afterwards the target must hold the rows plus every acknowledged write, and the
// source none of the org's.
func (h *harness) orgMove(ctx context.Context) error {
	a, b, err := h.startCells(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_, _ = a.stop(), b.stop()
		for _, db := range []string{dbCellA, dbCellB} { // the rows twice over: give the disk back
			_ = h.pg.dropDatabase(context.WithoutCancel(ctx), db)
		}
	}()
	id, err := h.loadMoveOrg(ctx, a)
	if err != nil {
		return err
	}
	dir := filepath.Join(h.work, "move")
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // the harness's own folder
		return err
	}
	mapFile := filepath.Join(dir, "orgs.map")
	if err := os.WriteFile(mapFile, []byte(orgMove+" a\n"), 0o600); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(h.work, "haproxy-move.log"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	proxy, err := cells.StartProxy(ctx, cells.ProxyConfig{
		ConfigFile: filepath.Join(h.root, "deploy", "cells", "haproxy.cfg"), Default: "a", MapFile: mapFile, Log: log,
		Cells: map[string]string{"a": strings.TrimPrefix(a.base, "http://"), "b": strings.TrimPrefix(b.base, "http://")},
	})
	if err != nil {
		return fmt.Errorf("start haproxy: %w", err)
	}
	defer func() { _ = proxy.Stop() }()
	api, err := newAPIClient("http://"+proxy.Addr, h.secret, orgMove)
	if err != nil {
		return err
	}
	api = api.forLoad()

	h.step("org move: moving %s rows from cell a to cell b while a client writes and one reads", fmtInt(int64(h.cfg.MoveRows)))
	clients := startMoveClients(ctx, api, id)
	start := time.Now()
	out, moveErr := h.runMove(ctx, mapFile, proxy.Router.Socket)
	total := time.Since(start)
	clients.finish()
	if moveErr != nil {
		return moveErr
	}
	held, err := h.checkMoved(ctx, id, clients.acked)
	if err != nil {
		return err
	}
	samples, err := h.rawCopy(ctx, id, held)
	if err != nil {
		return err
	}
	for _, row := range moveRows(h.cfg.MoveRows, total, samples, clients, out) {
		h.report.add(row)
	}
	return clients.err()
}

// startCells creates the two cells' databases and starts a retentiond on each (which migrates it).
func (h *harness) startCells(ctx context.Context) (a, b *service, err error) {
	for _, db := range []string{dbCellA, dbCellB} {
		if err := h.pg.createDatabase(ctx, db); err != nil {
			return nil, nil, err
		}
	}
	if a, err = startService(ctx, h.bins.retentiond, h.pg.url(dbCellA), h.secret, filepath.Join(h.work, "retentiond-cell-a.log"), nil); err != nil {
		return nil, nil, err
	}
	if b, err = startService(ctx, h.bins.retentiond, h.pg.url(dbCellB), h.secret, filepath.Join(h.work, "retentiond-cell-b.log"), nil); err != nil {
		_ = a.stop()
		return nil, nil, err
	}
	return a, b, nil
}

// loadMoveOrg creates the org's dataset on cell a and loads MoveRows rows into it with retentionctl load.
func (h *harness) loadMoveOrg(ctx context.Context, a *service) (string, error) {
	url := h.pg.url(dbCellA)
	if err := h.setLakePolicy(ctx, url, orgMove); err != nil {
		return "", err
	}
	api, err := newAPIClient(a.base, h.secret, orgMove)
	if err != nil {
		return "", err
	}
	id, err := api.createDataset(ctx, "move-000")
	if err != nil {
		return "", err
	}
	if err := api.setTTL(ctx, id, "P36M"); err != nil {
		return "", err
	}
	h.step("org move: loading %s rows into cell a", fmtInt(int64(h.cfg.MoveRows)))
	if _, err := h.loadGenerated(ctx, url, orgMove, "move", h.cfg.MoveRows, 1, h.cfg.LoadWorkers, h.cfg.Seed+7); err != nil {
		return "", err
	}
	return id, h.pg.checkpoint(ctx)
}

// runMove runs retentionctl org move from cell a to cell b, and returns its output.
func (h *harness) runMove(ctx context.Context, mapFile, socket string) (string, error) {
	args := []string{"org", "move", "-org", orgMove, "-from", h.pg.url(dbCellA), "-to", h.pg.url(dbCellB), "-to-cell", "b",
		"-cells-map", mapFile, "-cells-socket", socket}
	cmd := exec.CommandContext(ctx, h.bins.retentionctl, args...) //nolint:gosec // the binary the harness built
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("retentionctl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// checkMoved holds the end of the move: the target holds the loaded rows and every acknowledged write, once; the
// source nothing of the org. It returns the rows the target holds.
func (h *harness) checkMoved(ctx context.Context, id string, acked int) (int64, error) {
	dst, err := h.pg.connect(ctx, dbCellB)
	if err != nil {
		return 0, err
	}
	defer dst.Close(ctx)
	var held, distinct int64
	if err := dst.QueryRow(ctx, `SELECT count(*), count(DISTINCT row_id) FROM lake_rows WHERE dataset_id = $1`, id).Scan(&held, &distinct); err != nil {
		return 0, err
	}
	if want := int64(h.cfg.MoveRows + acked); held != want || distinct != want {
		return held, fmt.Errorf("the target holds %d rows (%d _ids) of the moved dataset, not the %d loaded and %d acknowledged", held, distinct, h.cfg.MoveRows, acked)
	}
	src, err := h.pg.connect(ctx, dbCellA)
	if err != nil {
		return held, err
	}
	defer src.Close(ctx)
	var left int64
	if err := src.QueryRow(ctx, `SELECT (SELECT count(*) FROM datasets WHERE org_id = $1) + (SELECT count(*) FROM lake_rows WHERE dataset_id = $2)`,
		orgMove, id).Scan(&left); err != nil {
		return held, err
	}
	if left != 0 {
		return held, fmt.Errorf("the source still holds %d datasets and rows of the moved org", left)
	}
	return held, nil
}

// rawCopy copies the moved dataset's rows from cell b to cell a twice, each time with COPY … TO STDOUT piped into
// COPY … FROM STDIN into a fresh table of lake_rows' columns without indexes: the baseline's two samples.
func (h *harness) rawCopy(ctx context.Context, id string, want int64) ([]workSample, error) {
	src, err := h.pg.connect(ctx, dbCellB)
	if err != nil {
		return nil, err
	}
	defer src.Close(ctx)
	dst, err := h.pg.connect(ctx, dbCellA)
	if err != nil {
		return nil, err
	}
	defer dst.Close(ctx)
	var samples []workSample
	for range 2 {
		if _, err := dst.Exec(ctx, `CREATE TABLE move_baseline (LIKE lake_rows INCLUDING DEFAULTS)`); err != nil {
			return nil, err
		}
		if err := h.pg.checkpoint(ctx); err != nil {
			return nil, err
		}
		start := time.Now()
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := src.PgConn().CopyTo(ctx, pw, `COPY (SELECT * FROM lake_rows WHERE dataset_id = '`+mustID(id)+`') TO STDOUT (FORMAT binary)`)
			_ = pw.CloseWithError(err)
			done <- err
		}()
		tag, err := dst.PgConn().CopyFrom(ctx, pr, `COPY move_baseline FROM STDIN (FORMAT binary)`)
		_ = pr.CloseWithError(io.ErrClosedPipe)
		if err = errors.Join(err, <-done); err != nil {
			return nil, fmt.Errorf("raw COPY baseline: %w", err)
		}
		end := time.Now()
		samples = append(samples, workSample{Done: tag.RowsAffected(), Want: want, Took: end.Sub(start), OtherCPU: h.noise.share(start, end)})
		if _, err := dst.Exec(ctx, `DROP TABLE move_baseline`); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

func startMoveClients(ctx context.Context, api *apiClient, id string) *moveClients {
	c := &moveClients{writerDone: make(chan struct{}), readerDone: make(chan struct{}), stop: make(chan struct{})}
	go c.write(ctx, api, id)
	go c.read(ctx, api, id)
	return c
}

// write posts one row with its own _id at a time until the move has ended and a write is acknowledged again.
func (c *moveClients) write(ctx context.Context, api *apiClient, id string) {
	defer close(c.writerDone)
	for i := 0; ; i++ {
		body := fmt.Sprintf(`{"timestamp":%q,"_id":"move-writer-%d","v":%d}`+"\n", time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), i, i)
		_, err := api.do(ctx, http.MethodPost, "/dataSets/"+id+"/rows", "application/x-ndjson", strings.NewReader(body))
		now := time.Now()
		var ae *apiError
		c.mu.Lock()
		switch {
		case err == nil:
			c.acked++
		case errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable:
			c.refused++
			if c.firstRefused.IsZero() {
				c.firstRefused = now
			}
			c.lastRefused = now
		default:
			c.failed++
			if len(c.writerErrors) < 5 {
				c.writerErrors = append(c.writerErrors, err.Error())
			}
		}
		over := !c.movedAt.IsZero() && (err == nil || now.Sub(c.movedAt) > moveTail)
		c.unacked = over && err != nil
		c.mu.Unlock()
		if over || sleepCtx(ctx, clientGap) != nil {
			return
		}
	}
}

// read reads a page of the org's rows at a time until stopped, counting the answers that are not a 200.
func (c *moveClients) read(ctx context.Context, api *apiClient, id string) {
	defer close(c.readerDone)
	for {
		err := api.get(ctx, "/dataSets/"+id+"/rows?limit=10")
		c.mu.Lock()
		c.reads++
		if err != nil {
			c.readsRefused++
			if len(c.readerErrors) < 5 {
				c.readerErrors = append(c.readerErrors, err.Error())
			}
		}
		c.mu.Unlock()
		select {
		case <-c.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(clientGap):
		}
	}
}

// finish lets the writer end at its next acknowledged write, then stops the reader.
func (c *moveClients) finish() {
	c.mu.Lock()
	c.movedAt = time.Now()
	c.mu.Unlock()
	<-c.writerDone
	close(c.stop)
	<-c.readerDone
}

// err is the clients' failures: a write answered neither 200 nor 503, or a read not answered 200.
func (c *moveClients) err() error {
	var errs []error
	if c.unacked {
		errs = append(errs, fmt.Errorf("no write was acknowledged within %s of the move's end", moveTail))
	}
	for _, e := range c.writerErrors {
		errs = append(errs, errors.New("write: "+e))
	}
	for _, e := range c.readerErrors {
		errs = append(errs, errors.New("read: "+e))
	}
	return errors.Join(errs...)
}

var (
	fencedLine = regexp.MustCompile(`writes refused for ([^\s;]+)`)
	stepLine   = regexp.MustCompile(`move [0-9a-f-]+: ([a-z]+) in (\S+)`) // the tool's log of each step (postgres.OrgMove.walk)
	caughtLine = regexp.MustCompile(`caught up while fenced: [^\n]+`)
)

// moveRows are the scenario's rows. The goal is the issue's, under 30 s of refused writes for 1M rows, scaled to
// the rows moved (the catch-up and the verification made while fenced scan each side's rows once), and no read
// refused.
func moveRows(rows int, total time.Duration, samples []workSample, c *moveClients, out string) []Row {
	refused := c.lastRefused.Sub(c.firstRefused)
	goal := time.Duration(float64(30*time.Second) * float64(rows) / 1e6)
	invalid := checkWork(samples, "copied", "the target's")
	raw := slices.MinFunc(samples, func(a, b workSample) int { return cmp.Compare(a.Took, b.Took) }).Took
	tool := "?"
	if m := fencedLine.FindStringSubmatch(out); m != nil {
		tool = m[1]
	}
	var steps []string
	for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
		steps = append(steps, m[1]+" "+m[2])
	}
	if len(steps) > 0 {
		tool += "; each step's time: " + strings.Join(steps, ", ")
	}
	if m := caughtLine.FindString(out); m != "" {
		tool += "; " + m
	}
	note := fmt.Sprintf("retentionctl org move of one dataset of %s rows between two databases of this server, each with its own retentiond, behind HAProxy "+
		"(deploy/cells/haproxy.cfg); one writer posts a row with its own _id through the proxy every 20 ms: %d acknowledged, %d refused (503), %d failed; "+
		"refused = first 503 to last 503 (the tool's own fence-to-switch figure: %s); one reader reads a page of rows every 20 ms: %d of %d not answered 200. "+
		"Afterwards the target held the %s rows and every acknowledged write, once, and the source nothing of the org. Baseline: COPY of the same rows from one database "+
		"to the other, binary, into a table without indexes, the faster of two samples.", fmtInt(int64(rows)), c.acked, c.refused, c.failed, tool, c.readsRefused, c.reads, fmtInt(int64(rows)))
	refusedRow := Row{Scenario: ScenarioOrgMove, Metric: fmt.Sprintf("writes refused while moving %s rows", fmtInt(int64(rows))),
		Ours: fmtDur(refused), Baseline: fmtDur(raw) + " raw COPY", Goal: fmt.Sprintf("< 30 s for 1M rows (%s here); no read refused", fmtDur(goal)),
		Holds: judge(refused < goal && c.readsRefused == 0 && c.refused > 0, invalid), Note: note}
	if raw > 0 {
		refusedRow.Ratio = fmt.Sprintf("%.1f×", refused.Seconds()/raw.Seconds())
	}
	if c.refused == 0 {
		refusedRow.Note += " The writer saw no 503: the window is not measured."
	}
	totalRow := Row{Scenario: ScenarioOrgMove, Metric: "move in all (copy, fence, catch-up, verify, switch, removal)", Ours: fmtDur(total),
		Baseline: fmtDur(raw) + " raw COPY", Goal: "—", Holds: NoGoal, Note: "wall time of the retentionctl process, start to exit"}
	if raw > 0 {
		totalRow.Ratio = fmt.Sprintf("%.1f×", total.Seconds()/raw.Seconds())
	}
	return []Row{refusedRow, totalRow}
}
