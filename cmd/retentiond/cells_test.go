package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/cells"
)

// Two cells, each a retentiond on a database of its own, behind the shipped HAProxy configuration: what
// `make run-cells` runs, with the test's databases for the cells' PostgreSQL servers.
const (
	cellOrgA = "ACME00000000000000000001@AdobeOrg"
	cellOrgB = "GLOBEX000000000000000002@AdobeOrg"
)

type cellsFixture struct {
	a, b  *server
	proxy *cells.Proxy
}

func startCells(t *testing.T) *cellsFixture {
	t.Helper()
	f := &cellsFixture{a: start(t), b: start(t)}
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "orgs.map")
	require.NoError(t, os.WriteFile(mapFile, []byte(cellOrgA+" a\n"+cellOrgB+" b\n"), 0o644))
	p, err := cells.StartProxy(context.Background(), cells.ProxyConfig{
		ConfigFile: filepath.Join("..", "..", "deploy", "cells", "haproxy.cfg"), Default: "a", MapFile: mapFile,
		Cells: map[string]string{"a": strings.TrimPrefix(f.a.base, "http://"), "b": strings.TrimPrefix(f.b.base, "http://")},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	f.proxy = p
	return f
}

// call sends a request as org to base (a cell, or the proxy) and returns status and body.
func orgCall(t *testing.T, base, org, method, path, body string) (int, []byte) {
	t.Helper()
	token, err := httpapi.MintToken(testSecret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "tester@example.com", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, ClientID: "retentiond-test",
		Scope: catalog.ScopeDatasetsRead + " " + catalog.ScopeDatasetsManage,
	})
	require.NoError(t, err)
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("x-api-key", "test-key")
	req.Header.Set("x-gw-ims-org-id", org)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// datasetNames lists org's dataset names as base answers them.
func datasetNames(t *testing.T, base, org string) []string {
	t.Helper()
	status, body := orgCall(t, base, org, http.MethodGet, "/dataSets", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var docs map[string]struct {
		Name string `json:"name"`
	}
	require.NoError(t, json.Unmarshal(body, &docs))
	var names []string
	for _, d := range docs {
		names = append(names, d.Name)
	}
	return names
}

var listCounter = regexp.MustCompile(`(?m)^retention_http_requests_total\{method="GET",route="/dataSets",status="200"\} (\d+)$`)

// listings is how many GET /dataSets a cell has answered 200, by its own counter, read through the proxy's
// per-cell path as a scraper would.
func (f *cellsFixture) listings(t *testing.T, cell string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+f.proxy.Addr+"/cells/"+cell+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	m := listCounter.FindSubmatch(raw)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

func TestCellsRouteEachOrgToItsCell(t *testing.T) {
	t.Parallel()
	f := startCells(t)
	proxy := "http://" + f.proxy.Addr

	// Each org creates a dataset through the proxy; each lands in its own cell's database and only there.
	for org, name := range map[string]string{cellOrgA: "only-in-a", cellOrgB: "only-in-b"} {
		status, body := orgCall(t, proxy, org, http.MethodPost, "/dataSets", `{"name":"`+name+`"}`)
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}
	require.Equal(t, []string{"only-in-a"}, datasetNames(t, f.a.base, cellOrgA))
	require.Empty(t, datasetNames(t, f.b.base, cellOrgA), "cell b has nothing of org A")
	require.Equal(t, []string{"only-in-b"}, datasetNames(t, f.b.base, cellOrgB))
	require.Empty(t, datasetNames(t, f.a.base, cellOrgB), "cell a has nothing of org B")

	// By the cells' own request counters: org A's listings through the proxy are all cell a's, none cell b's.
	a0, b0 := f.listings(t, "a"), f.listings(t, "b")
	for range 5 {
		require.Equal(t, []string{"only-in-a"}, datasetNames(t, proxy, cellOrgA))
	}
	require.Equal(t, a0+5, f.listings(t, "a"))
	require.Equal(t, b0, f.listings(t, "b"))
	for range 3 {
		require.Equal(t, []string{"only-in-b"}, datasetNames(t, proxy, cellOrgB))
	}
	require.Equal(t, a0+5, f.listings(t, "a"))
	require.Equal(t, b0+3, f.listings(t, "b"))

	// An org the map does not name is served by the default cell, a.
	require.Empty(t, datasetNames(t, proxy, "INITECH00000000000000003@AdobeOrg"))
	require.Equal(t, a0+6, f.listings(t, "a"))

	// The console and the OpenAPI document come from either cell; each cell's /readyz answers through its path.
	for _, path := range []string{"/openapi.json", "/ui/", "/cells/a/readyz", "/cells/b/readyz"} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, proxy+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

func TestCellsSwitchOneOrgWithoutReload(t *testing.T) {
	t.Parallel()
	f := startCells(t)
	proxy := "http://" + f.proxy.Addr
	status, body := orgCall(t, proxy, cellOrgA, http.MethodPost, "/dataSets", `{"name":"only-in-a"}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	pid := f.proxy.Pid()

	require.NoError(t, f.proxy.Router.Place(context.Background(), cellOrgA, "b"))

	// The next call of org A reaches cell b, which holds nothing of it, and cell a no more; org B is where it was.
	a0, b0 := f.listings(t, "a"), f.listings(t, "b")
	require.Empty(t, datasetNames(t, proxy, cellOrgA))
	require.Equal(t, a0, f.listings(t, "a"))
	require.Equal(t, b0+1, f.listings(t, "b"))
	require.Equal(t, []string{"only-in-a"}, datasetNames(t, f.a.base, cellOrgA), "the data stayed in cell a")
	require.Empty(t, datasetNames(t, proxy, cellOrgB))
	require.Equal(t, b0+2, f.listings(t, "b"))
	require.Equal(t, pid, f.proxy.Pid(), "the same HAProxy process: no reload")

	// And back.
	require.NoError(t, f.proxy.Router.Place(context.Background(), cellOrgA, "a"))
	require.Equal(t, []string{"only-in-a"}, datasetNames(t, proxy, cellOrgA))
}
