package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testlog"
)

const (
	testSecret = "retentiond-test-secret-of-at-least-32-bytes"
	dbPassword = "db-password-not-for-logs"
)

// freeAddr returns a loopback address with a port nobody listens on: run listens on the address it is given and
// does not report the port, so the test cannot use port 0.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// server is a running retentiond.
type server struct {
	base           string
	dbURL          string
	org            string
	stdout, stderr *testlog.Buffer
	cancel         context.CancelFunc
	done           chan error // receives run's result once
}

func start(t *testing.T) *server {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with more variables, or others' values; a DATABASE_URL in extra is taken as query
// parameters to add to the test database's URL.
func startWith(t *testing.T, extra map[string]string) *server {
	t.Helper()
	addr := freeAddr(t)
	// The test server trusts local connections, so a password in the URL is ignored by Postgres but still lets
	// the test check that it never reaches the log.
	dbURL, err := url.Parse(testdb.New(t))
	require.NoError(t, err)
	dbURL.User = url.UserPassword(dbURL.User.Username(), dbPassword)
	env := map[string]string{
		"DATABASE_URL":      dbURL.String(),
		"AUTH_HS256_SECRET": testSecret,
		"SHUTDOWN_TIMEOUT":  "5s",
	}
	plainURL := env["DATABASE_URL"]
	for name, value := range extra {
		if name == "DATABASE_URL" {
			dbURL.RawQuery += "&" + value
			env[name] = dbURL.String()
			continue
		}
		env[name] = value
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		base: "http://" + addr, dbURL: plainURL, org: "ACME00000000000000000099@AdobeOrg",
		stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, cancel: cancel, done: make(chan error, 1),
	}
	go func() {
		s.done <- run(ctx, []string{"-addr", addr}, func(name string) string { return env[name] }, s.stdout, s.stderr)
	}()
	// Whatever happens in the test, stop the server; stop below reports how it ended.
	t.Cleanup(cancel)
	s.waitReady(t)
	return s
}

// waitReady polls /readyz until it answers 200. This waits for a listener to come up, which nothing announces, so a
// short bounded retry loop is the only way; it gives up at once if run returns.
func (s *server) waitReady(t *testing.T) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, s.base+"/readyz", nil)
		require.NoError(t, err)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("run returned before the server was ready: %v\nstderr:\n%s", err, s.stderr.String())
		case <-deadline:
			t.Fatalf("no 200 from /readyz within 10s\nstderr:\n%s", s.stderr.String())
		case <-tick.C:
		}
	}
}

// stop cancels run's context, as SIGTERM does, and returns run's result.
func (s *server) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10s of its context ending")
		return nil
	}
}

func (s *server) token(t *testing.T) string {
	t.Helper()
	token, err := httpapi.MintToken(testSecret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "tester@example.com", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              s.org, ClientID: "retentiond-test",
		Scope: catalog.ScopeDatasetsRead + " " + catalog.ScopeDatasetsManage,
	})
	require.NoError(t, err)
	return token
}

func (s *server) do(t *testing.T, method, path, body, requestID string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.base+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token(t))
	req.Header.Set("x-api-key", "test-key")
	req.Header.Set("x-gw-ims-org-id", s.org)
	req.Header.Set("x-request-id", requestID)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, raw
}

// logLines decodes every line of the log; each one must be JSON.
func logLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "log line %q", sc.Text())
		lines = append(lines, line)
	}
	require.NoError(t, sc.Err())
	return lines
}

func TestRunServesAndShutsDown(t *testing.T) {
	t.Parallel()
	s := start(t)

	status, header, body := s.do(t, http.MethodPost, "/dataSets", `{"name": "clicks", "description": "web clicks"}`, "req-create-1")
	require.Equal(t, http.StatusCreated, status, "body: %s", body)
	var refs []string
	require.NoError(t, json.Unmarshal(body, &refs))
	require.Len(t, refs, 1)
	id := strings.TrimPrefix(refs[0], "@/dataSets/")
	require.Equal(t, "/dataSets/"+id, header.Get("Location"))

	status, _, body = s.do(t, http.MethodGet, "/dataSets/"+id, "", "req-get-1")
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	var docs map[string]map[string]any
	require.NoError(t, json.Unmarshal(body, &docs))
	require.Contains(t, docs, id)
	require.Equal(t, "clicks", docs[id]["name"])
	require.Equal(t, "web clicks", docs[id]["description"])
	require.Equal(t, s.org, docs[id]["imsOrg"])
	require.Equal(t, "tester@example.com", docs[id]["createdUser"])

	// Prometheus: requests by route and status, latency histograms, and the pool's stats.
	status, _, body = s.do(t, http.MethodGet, "/metrics", "", "req-metrics-1")
	require.Equal(t, http.StatusOK, status)
	for _, metric := range []string{`retention_http_requests_total{method="POST",route="/dataSets",status="201"} 1`,
		"retention_http_request_duration_seconds_bucket", "pgxpool_acquired_conns", "retention_datasets_overdue",
		`retention_expired_rows{state="held",store="adobe_unifiedProfile"} 0`,
		`retention_oldest_expired_age_seconds{state="deletable",store="adobe_lakeHouse"} 0`} {
		require.Contains(t, string(body), metric)
	}
	// Every series passes the checks of `promtool check metrics` (promlint is its library).
	problems, lintErr := promlint.New(bytes.NewReader(body)).Lint()
	require.NoError(t, lintErr)
	require.Empty(t, problems, "/metrics breaks Prometheus' naming rules")

	// Cancelling the context is how main passes SIGTERM on; a graceful stop returns nil.
	require.NoError(t, s.stop(t))

	log := s.stderr.String()
	require.NotContains(t, log, testSecret, "the secret must never reach the log")
	require.NotContains(t, log, dbPassword, "nor the database password")
	lines := logLines(t, log)
	seen := map[string]float64{}
	for _, line := range lines {
		if id, ok := line["request_id"].(string); ok {
			seen[id], _ = line["status"].(float64)
		}
	}
	require.Equal(t, float64(http.StatusCreated), seen["req-create-1"], "each request is logged with its request_id: %s", log)
	for _, line := range lines {
		for key, value := range line {
			require.False(t, key == "duration" || key == "took" || key == "timeout", "a duration in nanoseconds: %q: %v", key, value)
		}
		if line["msg"] == "starting" {
			config, _ := line["config"].(map[string]any)
			require.Equal(t, float64(5000), config["shutdown_timeout_ms"], "the config's durations in milliseconds: %v", config)
			require.NotContains(t, config, "shutdown_timeout")
		}
		if line["msg"] == "shutting down" {
			require.Equal(t, float64(5000), line["timeout_ms"], "SHUTDOWN_TIMEOUT 5s, in milliseconds")
		}
		if line["request_id"] == "req-get-1" {
			require.IsType(t, float64(0), line["duration_ms"], "requests log their duration in milliseconds: %v", line)
		}
	}
	require.Equal(t, float64(http.StatusOK), seen["req-get-1"])
	messages := make([]string, 0, len(lines))
	for _, line := range lines {
		msg, _ := line["msg"].(string)
		messages = append(messages, msg)
	}
	require.Contains(t, messages, "starting")
	require.Contains(t, messages, "shutting down")

	// The server is gone once run has returned.
	_, err := net.DialTimeout("tcp", strings.TrimPrefix(s.base, "http://"), time.Second)
	require.Error(t, err)
}

func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		// A database that does not exist: reaching it at all would be a failure of its own, not a config error.
		"DATABASE_URL":      "postgres://nobody@127.0.0.1:1/none?sslmode=disable",
		"AUTH_HS256_SECRET": testSecret,
		"HTTP_ADDR":         "nonsense",
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), nil, func(name string) string { return env[name] }, &stdout, &stderr)
	require.ErrorContains(t, err, "HTTP_ADDR")
	require.ErrorContains(t, err, `"nonsense"`)
	require.ErrorContains(t, err, "configuration")
	// Nothing started: no log line, no dev cluster, no welcome.
	require.Empty(t, stdout.String())
	require.Empty(t, stderr.String())
}

func TestRunRefusesBadFlag(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-port", "80"}, func(string) string { return "" }, &stdout, &stderr)
	require.Error(t, err)
	require.Contains(t, stderr.String(), "-port", "the flag package names the unknown flag")
	require.Empty(t, stdout.String())
}

// Durations are logged in milliseconds, as "KEY_ms", wherever they are, not as slog's nanoseconds.
func TestLoggerWritesDurationsInMilliseconds(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	newLogger(&buf, slog.LevelInfo).Info("started postgres", "took", 2868*time.Millisecond,
		slog.Duration("fast", 412*time.Microsecond), slog.Group("run", slog.Duration("duration", time.Minute)), slog.Int("port", 5432))
	require.JSONEq(t, `{"level":"INFO","msg":"started postgres","took_ms":2868,"fast_ms":0.412,"run":{"duration_ms":60000},"port":5432}`,
		withoutTime(t, buf.String()))
}

// withoutTime drops the time field of a JSON log line.
func withoutTime(t *testing.T, line string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	delete(m, "time")
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return string(out)
}
