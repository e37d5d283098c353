package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// setupOutage is a server whose database is a port nobody listens on: every connection is refused.
func setupOutage(t *testing.T) *testBundle {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	db, err := postgres.Open(context.Background(), "postgres://postgres@"+dead+"/gone?connect_timeout=5", nil)
	require.NoError(t, err, "the pool connects lazily")
	t.Cleanup(db.Close)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	runs, _ := testdb.Jobs(t, db, testdb.JobsOptions{})
	api := httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(db), Rows: postgres.NewRowService(db, testChunkRows), Runs: runs, Auth: auth,
		Preview: postgres.NewPreviewService(db, retention.Period{}), Audit: postgres.NewAuditService(db),
		Ready: db.Ready, Registry: prometheus.NewRegistry(),
	})
	srv := httptest.NewServer(apitest.Handler(t, api))
	t.Cleanup(srv.Close)
	b := &testBundle{url: srv.URL, db: db, org: newOrg()}
	b.token = mintToken(t, b.org, allScopes, time.Hour)
	return b
}

// TestDatabaseOutageAnswers503 is part of finding 9: with the database gone, every route answered 500, as for a
// bug. It answers 503 with Retry-After, and /readyz 503 as before.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	b := setupOutage(t)
	const id = "5c8c3c555033b814b69f947f"
	for _, tc := range []struct {
		name string
		req  request
	}{
		{"ListDatasets", request{method: http.MethodGet, path: "/dataSets"}},
		{"CreateDataset", request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "clicks"}}},
		{"GetDataset", request{method: http.MethodGet, path: "/dataSets/" + id}},
		{"PatchDataset", request{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{"description": "x"}}},
		{"DeleteDataset", request{method: http.MethodDelete, path: "/dataSets/" + id}},
		{"GetTTL", request{method: http.MethodGet, path: "/ttl/" + id}},
		{"Preview", request{method: http.MethodGet, path: "/ttl/" + id + "/preview"}},
		{"ReadRows", request{method: http.MethodGet, path: "/dataSets/" + id + "/rows"}},
		{"IngestRows", request{method: http.MethodPost, path: "/dataSets/" + id + "/rows", body: `[{"timestamp":"2026-11-01T10:00:00Z"}]`}},
		{"DeleteRow", request{method: http.MethodDelete, path: "/dataSets/" + id + "/rows/r1"}},
		{"ListRuns", request{method: http.MethodGet, path: "/retention/runs"}},
		{"GetRun", request{method: http.MethodGet, path: "/retention/runs/0195e4a0-0000-7000-8000-000000000000"}},
		{"StartRun", request{method: http.MethodPost, path: "/retention/runs", body: map[string]any{"datasetIds": []string{id}}}},
		{"AuditEvents", request{method: http.MethodGet, path: "/audit/events"}},
		{"AuditExport", request{method: http.MethodGet, path: "/audit/export"}},
		{"AuditVerify", request{method: http.MethodGet, path: "/audit/verify"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(t, tc.req)
			require.Equal(t, http.StatusServiceUnavailable, resp.status, "body: %s", resp.body)
			require.Equal(t, "5", resp.header.Get("Retry-After"))
			p := resp.problem(t)
			require.Equal(t, "database-unavailable", p.Type)
			require.Contains(t, p.Detail, "again later")
			require.NotContains(t, p.Detail, "127.0.0.1", "nothing internal leaks")
		})
	}
	t.Run("Readyz", func(t *testing.T) {
		t.Parallel()
		resp := b.do(t, request{method: http.MethodGet, path: "/readyz"})
		require.Equal(t, http.StatusServiceUnavailable, resp.status)
	})
}

// TestConnectionLostAnswers503: a pooled connection that the server ended (a restart, a failover, an operator's
// pg_terminate_backend) fails the request that next uses it; that request answers 503 like an outage, and the pool
// connects again for the next.
func TestConnectionLostAnswers503(t *testing.T) {
	t.Parallel()
	b := setupBulkhead(t, bulkheadOpts{maxConns: 1})
	require.Equal(t, http.StatusOK, b.within(t, "/dataSets").status)
	var pid int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid))
	admin, err := pgx.Connect(context.Background(), b.dbURL)
	require.NoError(t, err)
	defer func() { _ = admin.Close(context.Background()) }()
	var ended bool
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 5000)`, pid).Scan(&ended))
	require.True(t, ended)

	resp := b.within(t, "/dataSets")
	require.Equal(t, http.StatusServiceUnavailable, resp.status, "body: %s", resp.body)
	require.Equal(t, "5", resp.header.Get("Retry-After"))
	require.Equal(t, "database-unavailable", resp.problem(t).Type)
	require.Equal(t, http.StatusOK, b.within(t, "/dataSets").status, "the pool connects again")
}

// bulkheadOpts configure setupBulkhead; zero fields keep the defaults.
type bulkheadOpts struct {
	maxConns     int           // the pool's size
	readTimeout  time.Duration // httpapi.Config.ReadTimeout
	writeTimeout time.Duration // httpapi.Config.WriteTimeout
	longPerOrg   int           // httpapi.Config.LongRequestsPerOrg
}

// logLines is a log destination that hands each record to the test.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// bulkheadBundle is setupAudit's API with a pool, a write timeout and a limit of the test's choosing, served on
// connections with small send buffers, so that a client that stops reading stalls the server's writes at once.
type bulkheadBundle struct {
	*auditBundle
	logs  logLines
	dbURL string // the database's URL, without the pool's size
}

func setupBulkhead(t *testing.T, opts bulkheadOpts) *bulkheadBundle {
	t.Helper()
	plain := testdb.New(t)
	url := plain
	if opts.maxConns > 0 {
		url += map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")] + "pool_max_conns=" + strconv.Itoa(opts.maxConns)
	}
	db, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	b := &bulkheadBundle{
		auditBundle: &auditBundle{testBundle: &testBundle{db: db, org: newOrg(), now: time.Now().UTC().Truncate(time.Millisecond)}},
		logs:        make(logLines, 100),
		dbURL:       plain,
	}
	b.audit = postgres.NewAuditService(db)
	auth, err := httpapi.NewAuthenticator(context.Background(), testSecret, "", time.Now)
	require.NoError(t, err)
	b.api = httpapi.New(httpapi.Config{
		Datasets: postgres.NewDatasetService(db), Rows: postgres.NewRowService(db, testChunkRows), Audit: b.audit,
		Preview: postgres.NewPreviewService(db, retention.Period{}),
		Auth:    auth, Ready: db.Ready, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(b.logs, nil)),
		ReadTimeout: opts.readTimeout, WriteTimeout: opts.writeTimeout, LongRequestsPerOrg: opts.longPerOrg,
	})
	srv := httptest.NewUnstartedServer(apitest.Handler(t, b.api))
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	b.url = srv.URL
	b.token = mintToken(t, b.org, allScopes, time.Hour)
	return b
}

// smallSendBuffers is a listener whose connections have 8 KiB send buffers: what the kernel may hold of an answer
// for a client that does not read is then small, so a handler's writes stall after a few kilobytes.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetWriteBuffer(8 << 10)
	}
	return conn, err
}

// stalledClient is a client that asked for something large, read the status and headers, and stopped reading
// without closing its connection.
type stalledClient struct {
	*http.Response
	conn net.Conn
}

// stall sends GET path on a connection with a tiny receive window and reads only the answer's status and headers.
// The connection closes when the test ends.
func (b *bulkheadBundle) stall(t *testing.T, path string) *stalledClient {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	conn, err := dialer.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("x-api-key", "test-key")
	req.Header.Set("x-gw-ims-org-id", b.org)
	require.NoError(t, req.Write(conn))
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), req) //nolint:bodyclose // never read nor closed, on purpose: the connection closes when the test ends
	require.NoError(t, err)
	return &stalledClient{Response: resp, conn: conn}
}

// within sends a GET like do, failing the test if it has no answer within 10 s, so that a request stuck behind
// an attack fails the test instead of hanging it; headers (name, value pairs) override the bundle's.
func (b *bulkheadBundle) within(t *testing.T, path string, headers ...string) *response {
	t.Helper()
	const d = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("x-api-key", "test-key")
	req.Header.Set("x-gw-ims-org-id", b.org)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "GET %s had no answer within %s", path, d)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: body}
}

// TestStalledExportHoldsNoConnection is finding 1 in one process: an export whose client stopped reading held its
// pooled connection until the socket closed. With a pool of one connection, every other request then waited
// forever. The export now holds no connection between its pages.
func TestStalledExportHoldsNoConnection(t *testing.T) {
	t.Parallel()
	b := setupBulkhead(t, bulkheadOpts{maxConns: 1, writeTimeout: time.Hour})
	b.insertLog(t, 3000)

	stalled := b.stall(t, "/audit/export?format=json")
	require.Equal(t, http.StatusOK, stalled.StatusCode)
	for range 5 {
		require.Equal(t, http.StatusOK, b.within(t, "/dataSets").status)
		require.Equal(t, http.StatusOK, b.within(t, "/audit/events?limit=5").status)
	}
}

// TestStalledClientIsCutOff: a client that stops reading held its handler, and with it the export's page or the
// answer's buffer, for as long as it kept its socket open. It is now cut off once a write has waited the write
// timeout.
func TestStalledClientIsCutOff(t *testing.T) {
	t.Parallel()
	b := setupBulkhead(t, bulkheadOpts{writeTimeout: 300 * time.Millisecond})
	b.insertLog(t, 3000)

	stalled := b.stall(t, "/audit/export?format=csv")
	require.Equal(t, http.StatusOK, stalled.StatusCode)
	b.waitLog(t, "cutting the connection")
	_, err := io.ReadAll(stalled.Body)
	require.Error(t, err, "a cut export does not end as a whole one")

	// An ordinary answer too: a page of 1,000 events is far more than the sockets hold, so its handler ends only
	// once its write gave up.
	stalled = b.stall(t, "/audit/events?limit=1000")
	require.Equal(t, http.StatusOK, stalled.StatusCode)
	b.waitLog(t, "route=/audit/events")
	_, err = io.ReadAll(stalled.Body)
	require.Error(t, err, "the answer was cut off")
}

// waitLog waits for a log record containing text, for at most 30 s.
func (b *bulkheadBundle) waitLog(t *testing.T, text string) {
	t.Helper()
	wait := time.After(30 * time.Second)
	for {
		select {
		case line := <-b.logs:
			if strings.Contains(line, text) {
				return
			}
		case <-wait:
			t.Fatalf("no log record with %q within 30 s", text)
		}
	}
}

// TestLongRequestsPerOrg is the cap of finding 1: an org could run any number of exports, ingestions, previews and
// big reads at once, each holding a share of what every org needs. Past its limit of long requests in flight it
// now gets 429 with Retry-After at once; its short requests and other orgs are not affected.
func TestLongRequestsPerOrg(t *testing.T) {
	t.Parallel()
	b := setupBulkhead(t, bulkheadOpts{writeTimeout: time.Hour, longPerOrg: 1})
	b.insertLog(t, 3000)
	other := newOrg()
	asOther := []string{"Authorization", "Bearer " + mintToken(t, other, allScopes, time.Hour), "x-gw-ims-org-id", other}

	stalled := b.stall(t, "/audit/export")
	require.Equal(t, http.StatusOK, stalled.StatusCode)
	for _, path := range []string{"/audit/export", "/audit/verify", "/dataSets/5c8c3c555033b814b69f947f/rows", "/ttl/5c8c3c555033b814b69f947f/preview"} {
		resp := b.within(t, path)
		require.Equal(t, http.StatusTooManyRequests, resp.status, "%s: %s", path, resp.body)
		require.Equal(t, "1", resp.header.Get("Retry-After"))
		p := resp.problem(t)
		require.Equal(t, "too-many-long-requests", p.Type)
		require.Contains(t, p.Detail, "already has 1 long requests")
	}
	require.Equal(t, http.StatusOK, b.within(t, "/dataSets").status, "short requests are not counted")
	require.Equal(t, http.StatusOK, b.within(t, "/audit/export", asOther...).status, "another org has its own")

	// The slot comes back when the export ends: here, when its client goes away and the next write fails.
	require.NoError(t, stalled.conn.Close())
	testwait.For(t, 30*time.Second, func() (bool, string) {
		return b.within(t, "/audit/verify").status == http.StatusOK, "the org's slot was not given back"
	})
}

// TestSilentBodyIsCutOff: a client that sent its headers and then none of the body it announced held its handler
// (and, for an ingestion, one of its org's long-request slots) for as long as it kept the connection open. A body
// now gets at most the read timeout between bytes, and the handler answers and ends.
func TestSilentBodyIsCutOff(t *testing.T) {
	t.Parallel()
	b := setupBulkhead(t, bulkheadOpts{readTimeout: 300 * time.Millisecond})
	b.insertLog(t, 2000)
	// The log's events are numbered as if the org had no others: the dataset is another org's.
	owner := newOrg()
	ownerToken := mintToken(t, owner, allScopes, time.Hour)
	id := b.createDataset(t, datasetOpts{headers: map[string]string{"Authorization": "Bearer " + ownerToken, "x-gw-ims-org-id": owner}})
	for _, tc := range []struct{ name, org, token, method, path, contentType string }{
		{"CreateDataset", owner, ownerToken, http.MethodPost, "/dataSets", "application/json"},
		{"IngestRows", owner, ownerToken, http.MethodPost, "/dataSets/" + id + "/rows", "application/x-ndjson"},
		// A body the handler never reads: net/http reads what is left of it before a large answer goes out.
		{"UnreadBodyOfALargeAnswer", b.org, b.token, http.MethodGet, "/audit/events?limit=1000", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: retentiond\r\nAuthorization: Bearer %s\r\nx-api-key: k\r\n"+
				"x-gw-ims-org-id: %s\r\nContent-Type: %s\r\nContent-Length: 1000\r\n\r\n{", tc.method, tc.path, tc.token, tc.org, tc.contentType)
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "no answer within 10 s to a body that never came")
			defer resp.Body.Close()
			require.Less(t, resp.StatusCode, http.StatusInternalServerError)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err, "the whole answer arrives")
		})
	}
}

// TestRowPagesStopAtTheirByteBound is the answer part of finding 8: a page of GET …/rows held limit rows however
// large, so limit=300 over rows of 1 MiB took 1.5 GB. A page now stops before the row that would take its rows
// past 4 MiB, always holding one, and links the next.
func TestRowPagesStopAtTheirByteBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	pad := strings.Repeat("x", 900_000)
	var lines []string
	for i := range 10 {
		lines = append(lines, event(fmt.Sprintf("2026-11-01T00:%02d:00Z", i), fmt.Sprintf(`"_id":"big%d","pad":%q`, i, pad)))
	}
	for i := range 3 {
		lines = append(lines, event(fmt.Sprintf("2026-11-01T01:%02d:00Z", i), fmt.Sprintf(`"_id":"small%d"`, i)))
	}
	b.ingest(t, id, ndjson(lines...))

	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id + "/rows?limit=1000"})
	require.Equal(t, http.StatusOK, resp.status)
	require.Less(t, len(resp.body), 4<<20+64<<10, "the answer is about 4 MiB at most")
	page := resp.json(t)
	require.Len(t, page["_embedded"].(map[string]any)["rows"], 4, "four rows of 900 kB fit in 4 MiB, five do not")
	require.Contains(t, page["_links"], "next")

	rows := b.readRows(t, id, "limit=1000")
	want := []string{"big0", "big1", "big2", "big3", "big4", "big5", "big6", "big7", "big8", "big9", "small0", "small1", "small2"}
	require.Equal(t, want, rowIDs(rows), "paging reaches every row once, in order")
	require.Len(t, b.readRows(t, id, "limit=2"), 13, "a page of few rows is not cut")
}

// TestAuditVerifyPerSandbox is part of finding 9: GET /audit/verify from sandbox dev answered with prod's event id,
// sandbox and time, and the org-wide count. The walk still covers the org's chain (it is one chain), but the answer
// speaks for the caller's sandbox: its own events, and of a break at another sandbox's event only where and why.
func TestAuditVerifyPerSandbox(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	prod := []*audit.Event{b.record(t, audit.Event{}), b.record(t, audit.Event{}), b.record(t, audit.Event{})}
	dev := b.record(t, audit.Event{Sandbox: "dev"})
	asDev := map[string]string{"x-sandbox-name": "dev"}

	resp := b.do(t, request{method: http.MethodGet, path: "/audit/verify", headers: asDev})
	require.Equal(t, http.StatusOK, resp.status)
	v := resp.json(t)
	require.Equal(t, true, v["valid"])
	require.Equal(t, "dev", v["sandboxName"])
	require.Equal(t, float64(1), v["events"], "dev's events, not the org's")
	require.Equal(t, dev.Hash, v["head"].(map[string]any)["hash"])

	// A superuser edits one of prod's events: dev learns that the org's chain is broken, and where, not what.
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE audit_events SET status = 'Failure' WHERE id = $1`, prod[1].ID)
		return err
	}))
	resp = b.do(t, request{method: http.MethodGet, path: "/audit/verify", headers: asDev})
	v = resp.json(t)
	require.Equal(t, false, v["valid"])
	broken := v["firstBroken"].(map[string]any)
	require.Equal(t, float64(prod[1].Seq), broken["seq"])
	require.Equal(t, audit.BreakHash, broken["reason"])
	for _, field := range []string{"id", "sandboxName", "timestamp"} {
		require.NotContains(t, broken, field, "dev sees nothing of prod's event")
	}
	require.NotContains(t, string(resp.body), prod[1].ID)
	require.NotContains(t, string(resp.body), prod[1].Hash[:12])

	resp = b.do(t, request{method: http.MethodGet, path: "/audit/verify"})
	broken = resp.json(t)["firstBroken"].(map[string]any)
	require.Equal(t, prod[1].ID, broken["id"], "prod sees its own event")
	require.Equal(t, "prod", broken["sandboxName"])
}
