package cells_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/cells"
)

// These tests hold the proxy's configuration and the Router against a real HAProxy. The cells here are plain HTTP
// servers that answer with their name and the path they got, so that each test reads where a request went; the
// test with two real retentiond cells is cmd/retentiond's TestCellsRouteEachOrgToItsCell.

const (
	orgA = "ACME00000000000000000001@AdobeOrg"
	orgB = "GLOBEX000000000000000002@AdobeOrg"
	orgC = "INITECH00000000000000003@AdobeOrg"
)

// configFile is the shipped configuration.
func configFile(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "deploy", "cells", "haproxy.cfg")
}

// nameServer is a cell that answers "NAME PATH".
func nameServer(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

type fixture struct {
	proxy   *cells.Proxy
	cfg     cells.ProxyConfig
	mapFile string
}

// setup starts cells a and b and the proxy, with a the default and the map's initial content placed (nil: none).
func setup(t *testing.T, initial map[string]string) *fixture {
	t.Helper()
	return setupCells(t, initial, map[string]string{"a": nameServer(t, "a"), "b": nameServer(t, "b")})
}

// setupCells is setup with the cells' servers given.
func setupCells(t *testing.T, initial, servers map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "orgs.map")
	var content string
	for org, cell := range initial {
		content += org + " " + cell + "\n"
	}
	require.NoError(t, os.WriteFile(mapFile, []byte(content), 0o644))
	f := &fixture{mapFile: mapFile, cfg: cells.ProxyConfig{
		ConfigFile: configFile(t), Default: "a", MapFile: mapFile, Cells: servers,
	}}
	f.start(t)
	return f
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	p, err := cells.StartProxy(context.Background(), f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	f.proxy = p
	f.cfg.Addr = p.Addr // a restart listens where clients already connect
}

// get sends path through the proxy with the org header (none when org is "") and returns status and body.
func (f *fixture) get(t *testing.T, org, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+f.proxy.Addr+path, nil)
	require.NoError(t, err)
	if org != "" {
		req.Header.Set("x-gw-ims-org-id", org)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestProxyRoutesByOrgHeader(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{orgA: "a", orgB: "b"})
	for _, tc := range []struct{ name, org, want string }{
		{"PlacedInA", orgA, "a /dataSets"},
		{"PlacedInB", orgB, "b /dataSets"},
		{"UnplacedGoesToDefault", orgC, "a /dataSets"},
		{"NoHeaderGoesToDefault", "", "a /dataSets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.get(t, tc.org, "/dataSets")
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, tc.want, body)
		})
	}
}

func TestProxyServesPerCellPathsAndSharedOnes(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{orgB: "b"})
	for _, tc := range []struct {
		name, org, path string
		status          int
		want            string
	}{
		// The org header does not matter for a cell's own paths.
		{"CellAReadyz", orgB, "/cells/a/readyz", 200, "a /readyz"},
		{"CellBMetrics", "", "/cells/b/metrics", 200, "b /metrics"},
		{"UnknownCell", "", "/cells/c/metrics", 503, ""},
		{"ProxyReadyzRefused", orgB, "/readyz", 404, "per cell: /cells/CELL/readyz and /cells/CELL/metrics"},
		{"ProxyMetricsRefused", "", "/metrics", 404, "per cell: /cells/CELL/readyz and /cells/CELL/metrics"},
		{"OtherCellPathsAreAPIPaths", orgB, "/cells/a/dataSets", 200, "b /cells/a/dataSets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.get(t, tc.org, tc.path)
			require.Equal(t, tc.status, status, body)
			if tc.want != "" {
				require.Equal(t, tc.want, body)
			}
		})
	}
	t.Run("UIAndOpenAPIFromEitherCell", func(t *testing.T) {
		seen := map[string]bool{}
		// Round robin over the two cells: four requests reach both (when both pass their health check, which
		// they do from the first).
		for range 4 {
			status, body := f.get(t, orgB, "/openapi.json")
			require.Equal(t, http.StatusOK, status)
			seen[body] = true
		}
		require.Equal(t, map[string]bool{"a /openapi.json": true, "b /openapi.json": true}, seen)
		status, body := f.get(t, orgB, "/ui/app.js")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, []string{"a /ui/app.js", "b /ui/app.js"}, body)
	})
}

func TestProxyRefusesTwoOrgHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{orgA: "a", orgB: "b"})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+f.proxy.Addr+"/dataSets", nil)
	require.NoError(t, err)
	req.Header.Add("x-gw-ims-org-id", orgA)
	req.Header.Add("x-gw-ims-org-id", orgB)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), "x-gw-ims-org-id may be sent once")
}

func TestPlaceSwitchesOneOrgWithoutReload(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{orgA: "a", orgB: "b"})
	ctx := context.Background()
	pid := f.proxy.Pid()
	r := f.proxy.Router

	_, body := f.get(t, orgA, "/x")
	require.Equal(t, "a /x", body)
	require.NoError(t, r.Place(ctx, orgA, "b"))
	_, body = f.get(t, orgA, "/x")
	require.Equal(t, "b /x", body, "the next request after Place goes to the new cell")
	_, body = f.get(t, orgB, "/x")
	require.Equal(t, "b /x", body, "the other org stays where it was")

	// An unplaced org is added, and Unplace sends it back to the default cell.
	require.NoError(t, r.Place(ctx, orgC, "b"))
	_, body = f.get(t, orgC, "/x")
	require.Equal(t, "b /x", body)
	require.NoError(t, r.Place(ctx, orgC, "b"), "Place is idempotent")
	require.NoError(t, r.Unplace(ctx, orgC))
	_, body = f.get(t, orgC, "/x")
	require.Equal(t, "a /x", body)
	require.NoError(t, r.Unplace(ctx, orgC), "Unplace of an unplaced org")

	require.Equal(t, pid, f.proxy.Pid(), "the same HAProxy process: no reload, no restart")
	routes, err := r.Routes()
	require.NoError(t, err)
	require.Equal(t, map[string]string{orgA: "b", orgB: "b"}, routes)
	live, err := r.Live(ctx)
	require.NoError(t, err)
	require.Equal(t, routes, live, "the file and the running proxy agree")
	cell, placed, err := r.Route(orgC)
	require.NoError(t, err)
	require.Equal(t, "a", cell)
	require.False(t, placed)
}

func TestPlacementSurvivesARestart(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{orgA: "a"})
	require.NoError(t, f.proxy.Router.Place(context.Background(), orgA, "b"))
	require.NoError(t, f.proxy.Stop())
	f.start(t)
	_, body := f.get(t, orgA, "/x")
	require.Equal(t, "b /x", body)
}

func TestPlaceRefusesWhatItCannotRoute(t *testing.T) {
	t.Parallel()
	f := setup(t, map[string]string{orgA: "a"})
	ctx := context.Background()
	before, err := os.ReadFile(f.mapFile)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, org, cell string
		want            error
	}{
		{"UnknownCell", orgA, "c", cells.ErrUnknownCell},
		{"BackendThatIsNotACell", orgA, "any", cells.ErrUnknownCell},
		{"OrgWithSpace", "ACME 1@AdobeOrg", "b", cells.ErrBadName},
		{"OrgWithCommandSeparator", "ACME;show info", "b", cells.ErrBadName},
		{"EmptyOrg", "", "b", cells.ErrBadName},
		{"CellWithUppercase", orgA, "B", cells.ErrBadName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, f.proxy.Router.Place(ctx, tc.org, tc.cell), tc.want)
		})
	}
	after, err := os.ReadFile(f.mapFile)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "a refused Place leaves the file as it was")
	_, body := f.get(t, orgA, "/x")
	require.Equal(t, "a /x", body)
}

func TestReadMapRefusesBadLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"ThreeFields", orgA + " a b\n", ":1: want \"ORG CELL\""},
		{"Duplicate", "# c\n" + orgA + " a\n" + orgA + " b\n", ":3: org " + orgA + " is placed twice"},
		{"BadCell", orgA + " A\n", ":1: cell \"A\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".map")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			_, err := cells.ReadMap(path)
			require.ErrorContains(t, err, tc.want)
		})
	}
	routes, err := cells.ReadMap(filepath.Join(dir, "missing.map"))
	require.NoError(t, err)
	require.Empty(t, routes)
}

// holdingServer is a cell that tells arrived of each request to /held and answers it once release is closed; it
// answers any other path (the proxy's health checks) at once.
func holdingServer(t *testing.T, arrived chan<- string, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			arrived <- r.URL.Path
			<-release
		}
		_, _ = io.WriteString(w, "held "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestDrainWaitsForTheRequestsForwardedBeforeIt(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan string, 1), make(chan struct{})
	var released sync.Once
	unhold := func() { released.Do(func() { close(release) }) }
	f := setupCells(t, map[string]string{orgA: "a", orgB: "b"},
		map[string]string{"a": holdingServer(t, arrived, release), "b": nameServer(t, "b")})
	t.Cleanup(unhold) // cleanups run last first: before the server's Close, which waits for the held request
	ctx := context.Background()
	r := f.proxy.Router

	// A request answered, its keep-alive connection idle, is not in flight.
	_, body := f.get(t, orgB, "/x")
	require.Equal(t, "b /x", body)
	n, err := r.Drain(ctx, "a")
	require.NoError(t, err)
	require.Zero(t, n)

	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.proxy.Addr+"/held", nil)
		req.Header.Set("x-gw-ims-org-id", orgA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		status <- resp.StatusCode
	}()
	require.Equal(t, "/held", <-arrived)

	t.Run("KeptCellsRequestsDoNotCount", func(t *testing.T) {
		n, err := r.Drain(ctx, "a")
		require.NoError(t, err)
		require.Zero(t, n)
	})
	t.Run("NotEndedBeforeTheContext", func(t *testing.T) {
		// The request is held until release: however fast the machine, Drain cannot see it end here.
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		n, err := r.Drain(short, "b")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 1, n, "the request in flight to cell a")
	})
	t.Run("EndedOnceAnswered", func(t *testing.T) {
		drained := make(chan error, 1)
		go func() {
			_, err := r.Drain(ctx, "b")
			drained <- err
		}()
		unhold()
		require.Equal(t, http.StatusOK, <-status)
		require.NoError(t, <-drained)
	})
}

// TestDrainPastItsContextIsDeadlineExceeded: a proxy that does not answer within the caller's context makes Drain
// return context.DeadlineExceeded, as when the requests outlast it, not the admin socket's own timeout.
func TestDrainPastItsContextIsDeadlineExceeded(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn // open, never answered
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	r := &cells.Router{Socket: sock}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = r.Drain(ctx, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
