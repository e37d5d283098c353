package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/cells"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
)

const moveOrg = "MOVE0000000000000000001@AdobeOrg"

// moveCells is two cells' databases, the source filled with an org, and the proxy routing the org to cell a.
type moveCells struct {
	srcURL, dstURL string
	src, dst       *postgres.DB
	router         *cells.Router
	datasetID      string
	rows           int64
	// before, when set, is what the target must hold of the org's rows after the move (content).
	before []string
}

func setupMoveCells(t *testing.T) *moveCells {
	t.Helper()
	return setupMoveCellsOn(t, testdb.New(t), testdb.New(t))
}

// setupMoveCellsOn is setupMoveCells with the cells' databases at srcURL and dstURL, migrated.
func setupMoveCellsOn(t *testing.T, srcURL, dstURL string) *moveCells {
	t.Helper()
	ctx := context.Background()
	c := &moveCells{srcURL: srcURL, dstURL: dstURL}
	for _, db := range []**postgres.DB{&c.src, &c.dst} {
		url := c.srcURL
		if db == &c.dst {
			url = c.dstURL
		}
		opened, err := postgres.Open(ctx, url, nil)
		require.NoError(t, err)
		t.Cleanup(opened.Close)
		*db = opened
	}
	caller := &catalog.Caller{User: "u", ClientID: "c", Org: moveOrg, Sandbox: "prod", RequestID: "r"}
	ds, err := postgres.NewDatasetService(c.src).CreateDataset(ctx, caller, catalog.DatasetCreate{Name: "events",
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	c.datasetID = ds.ID
	var body bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&body, `{"timestamp":%q,"_id":"r%d"}`+"\n", time.Now().Add(-time.Duration(i)*time.Hour).UTC().Format(time.RFC3339), i)
	}
	w, err := postgres.NewRowService(c.src, 500).BeginIngest(ctx, caller, ds.ID, catalog.IngestOptions{})
	require.NoError(t, err)
	res := &catalog.IngestResult{}
	require.NoError(t, w.Write(ctx, catalog.NewEventReader(&body, catalog.NDJSON, w.Rules()).Rows(res), res))
	c.rows = int64(res.Accepted)
	_, err = postgres.NewDatasetService(c.src).PlaceHold(ctx, caller, ds.ID, catalog.HoldCreate{Reason: "litigation"})
	require.NoError(t, err)

	dir := t.TempDir()
	mapFile := filepath.Join(dir, "orgs.map")
	require.NoError(t, os.WriteFile(mapFile, []byte(moveOrg+" a\n"), 0o600))
	cell := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(cell.Close)
	_, here, _, _ := runtime.Caller(0)
	proxy, err := cells.StartProxy(ctx, cells.ProxyConfig{ConfigFile: filepath.Join(filepath.Dir(here), "..", "..", "deploy", "cells", "haproxy.cfg"),
		Default: "a", MapFile: mapFile, Cells: map[string]string{"a": cell.Listener.Addr().String(), "b": cell.Listener.Addr().String()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Stop() })
	c.router = proxy.Router
	return c
}

// buildCtl builds retentionctl into the test's temporary folder, to run it as a process that can be killed.
func buildCtl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retentionctl")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}

// startMove starts `retentionctl org move` as a process.
func (c *moveCells) startMove(t *testing.T, bin string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return c.startMoveIn(t, bin, "", c.router.MapFile)
}

// startMoveIn starts `retentionctl org move` as a process in folder dir, naming the map file as mapFile.
func (c *moveCells) startMoveIn(t *testing.T, bin, dir, mapFile string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, "org", "move", "-org", moveOrg, "-from", c.srcURL, "-to", c.dstURL, "-to-cell", "b",
		"-cells-map", mapFile, "-cells-socket", c.router.Socket)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	return cmd, &out
}

// waitBlocked waits until a session of db other than the test's waits for a lock of the kind.
func waitBlocked(t *testing.T, db *postgres.DB, kind string) {
	t.Helper()
	testwait.For(t, time.Minute, func() (bool, string) {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = $1`, kind).Scan(&n))
		return n > 0, "no session waits for a lock of kind " + kind
	})
}

// kill kills the move with SIGKILL and waits for the process to end.
func (c *moveCells) kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
}

// waitMoveLockFree waits until no session holds the move's lock of the org: the killed tool's sessions ended.
func (c *moveCells) waitMoveLockFree(t *testing.T) {
	t.Helper()
	testwait.For(t, time.Minute, func() (bool, string) {
		var n int
		require.NoError(t, c.src.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND classid = 19 AND granted`).Scan(&n))
		return n == 0, "the killed move's session still holds its lock"
	})
}

func (c *moveCells) count(t *testing.T, db *postgres.DB, query string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), query, moveOrg).Scan(&n))
	return n
}

// requireMoved holds the end of the move: everything on the target, nothing on the source, the route switched.
func (c *moveCells) requireMoved(t *testing.T, out string) {
	t.Helper()
	require.Contains(t, out, "moved org "+moveOrg+" to cell b")
	require.Equal(t, c.rows, c.count(t, c.dst, `SELECT count(*) FROM lake_rows WHERE dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`))
	if c.before != nil {
		require.Equal(t, c.before, c.content(t, c.dst), "the target holds the org's rows as the source held them, and every acknowledged write")
	}
	require.Equal(t, int64(1), c.count(t, c.dst, `SELECT count(*) FROM dataset_holds WHERE dataset_id IN (SELECT id FROM datasets WHERE org_id = $1) AND released_at IS NULL`))
	require.Zero(t, c.count(t, c.src, `SELECT count(*) FROM datasets WHERE org_id = $1`))
	require.Zero(t, c.count(t, c.src, `SELECT count(*) FROM audit_events WHERE org_id = $1`))
	require.Zero(t, c.count(t, c.src, `SELECT count(*) FROM lake_rows WHERE dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`))
	v, err := postgres.NewAuditService(c.dst).Verify(context.Background(), moveOrg)
	require.NoError(t, err)
	require.True(t, v.Valid, "%+v", v.FirstBroken)
	cell, placed, err := c.router.Route(moveOrg)
	require.NoError(t, err)
	require.True(t, placed)
	require.Equal(t, "b", cell)
	live, err := c.router.Live(context.Background())
	require.NoError(t, err)
	require.Equal(t, "b", live[moveOrg], "the running proxy routes the org to b")
}

// TestOrgMoveKilledResumes kills `retentionctl org move` with SIGKILL at three points, each held by a lock the test
// takes: while it raises the fence (a write of the org in flight), in the middle of the copy, and in the middle of
// the removal from the source. Run again, it finishes the move each time, with nothing lost or left behind.
func TestOrgMoveKilledResumes(t *testing.T) {
	t.Parallel()
	bin := buildCtl(t)
	ctx := context.Background()

	t.Run("WhileRaisingTheFence", func(t *testing.T) {
		t.Parallel()
		c := setupMoveCells(t)
		// A write that passed the fence check before the fence went up: the fence waits for it, and the copy has it.
		tx, err := c.src.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var state *string
		require.NoError(t, tx.QueryRow(ctx, `SELECT org_write_fence($1)`, moveOrg).Scan(&state))
		require.Nil(t, state)
		_, err = tx.Exec(ctx, `UPDATE datasets SET description = 'written across the fence' WHERE id = $1`, c.datasetID)
		require.NoError(t, err)
		cmd, _ := c.startMove(t, bin)
		waitBlocked(t, c.src, "advisory")
		c.kill(t, cmd)
		require.NoError(t, tx.Commit(ctx))
		c.waitMoveLockFree(t)
		cmd, out := c.startMove(t, bin)
		require.NoError(t, cmd.Wait(), out.String())
		c.requireMoved(t, out.String())
		require.Equal(t, int64(1), c.count(t, c.dst, `SELECT count(*) FROM datasets WHERE org_id = $1 AND description = 'written across the fence'`))
	})

	t.Run("InTheCopy", func(t *testing.T) {
		t.Parallel()
		c := setupMoveCells(t)
		tx, err := c.dst.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `LOCK TABLE audit_events IN SHARE MODE`) // the copy writes the events after the rows
		require.NoError(t, err)
		cmd, _ := c.startMove(t, bin)
		waitBlocked(t, c.dst, "relation")
		c.kill(t, cmd)
		require.NoError(t, tx.Rollback(ctx))
		c.waitMoveLockFree(t)
		require.Zero(t, c.count(t, c.dst, `SELECT count(*) FROM datasets WHERE org_id = $1`), "a killed copy leaves nothing on the target")
		cmd, out := c.startMove(t, bin)
		require.NoError(t, cmd.Wait(), out.String())
		c.requireMoved(t, out.String())
	})

	// The proxy knows its map by the absolute path it loaded; a relative -cells-map, as typed in the map's folder,
	// names the same file (it once made the switch fail with "Unknown map identifier" and leave writes fenced).
	t.Run("WithARelativeMapPath", func(t *testing.T) {
		t.Parallel()
		c := setupMoveCells(t)
		cmd, out := c.startMoveIn(t, bin, filepath.Dir(c.router.MapFile), filepath.Base(c.router.MapFile))
		require.NoError(t, cmd.Wait(), out.String())
		c.requireMoved(t, out.String())
	})

	t.Run("InTheRemoval", func(t *testing.T) {
		t.Parallel()
		c := setupMoveCells(t)
		tx, err := c.src.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `LOCK TABLE lake_rows IN SHARE MODE`) // reads go on; the removal's DELETE waits
		require.NoError(t, err)
		cmd, _ := c.startMove(t, bin)
		waitBlocked(t, c.src, "relation")
		c.kill(t, cmd)
		cell, _, err := c.router.Route(moveOrg)
		require.NoError(t, err)
		require.Equal(t, "b", cell, "the route switched before the removal began")
		require.NoError(t, tx.Rollback(ctx))
		c.waitMoveLockFree(t)
		cmd, out := c.startMove(t, bin)
		require.NoError(t, cmd.Wait(), out.String())
		c.requireMoved(t, out.String())
	})
}

// TestOrgMoveNeedsARoute: without the proxy's map and socket the command refuses before it fences anything.
func TestOrgMoveNeedsARoute(t *testing.T) {
	t.Parallel()
	_, err := ctl(t, map[string]string{}, "org", "move", "-org", moveOrg, "-to", "postgres://x", "-to-cell", "b")
	require.ErrorContains(t, err, "-cells-map and -cells-socket")
	_, err = ctl(t, map[string]string{}, "org", "move", "-org", moveOrg, "-to", "postgres://x", "-to-cell", "b",
		"-cells-map", "m", "-cells-socket", "s", "-drain-wait", "-1s")
	require.ErrorContains(t, err, "-drain-wait must be positive")
	_, err = ctl(t, map[string]string{}, "org", "copy")
	require.ErrorIs(t, err, errUsage)
	_, err = ctl(t, map[string]string{}, "org", "move", "-abort", "-org", moveOrg)
	require.ErrorContains(t, err, "-org and -to are required", "an abort names the target whose copy it removes")
}

// TestOrgMovedBackToACellItLeft: an org moved from a to b and back to a is whole on a, with its writes open there:
// the fence a kept (moved) from the first move is no longer the org's once it comes back. The second move failed at
// its verification ("has moved to another cell") and left the org's writes refused on b.
func TestOrgMovedBackToACellItLeft(t *testing.T) {
	t.Parallel()
	bin := buildCtl(t)
	ctx := context.Background()
	c := setupMoveCells(t)
	cmd, out := c.startMove(t, bin)
	require.NoError(t, cmd.Wait(), out.String())
	c.requireMoved(t, out.String())

	var back bytes.Buffer
	cmd = exec.Command(bin, "org", "move", "-org", moveOrg, "-from", c.dstURL, "-to", c.srcURL, "-to-cell", "a",
		"-cells-map", c.router.MapFile, "-cells-socket", c.router.Socket)
	cmd.Stdout, cmd.Stderr = &back, &back
	require.NoError(t, cmd.Run(), back.String())
	require.Contains(t, back.String(), "moved org "+moveOrg+" to cell a")
	require.Equal(t, c.rows, c.count(t, c.src, `SELECT count(*) FROM lake_rows WHERE dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`))
	require.Zero(t, c.count(t, c.dst, `SELECT count(*) FROM datasets WHERE org_id = $1`))
	var state *string
	require.NoError(t, c.src.Pool.QueryRow(ctx, `SELECT org_write_fence($1)`, moveOrg).Scan(&state))
	require.Nil(t, state, "the org's writes are open on the cell it came back to")
	v, err := postgres.NewAuditService(c.src).Verify(ctx, moveOrg)
	require.NoError(t, err)
	require.True(t, v.Valid, "%+v", v.FirstBroken)
	cell, _, err := c.router.Route(moveOrg)
	require.NoError(t, err)
	require.Equal(t, "a", cell)
}
