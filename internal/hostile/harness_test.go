package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testlog"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
)

// secret signs the suite's tokens; the service under attack is started with it.
const secret = "hostile-suite-secret-of-at-least-32-bytes"

// binary is the retentiond the suite attacks, built once without -race: the race detector's memory and time
// overhead would blur the memory and latency bounds the suite checks.
var binary string

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "retentiond")
	build := exec.Command("go", "build", "-o", binary, "github.com/acme/retention/cmd/retentiond")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "hostile: build retentiond:", err)
		return 1
	}
	return m.Run()
}

// service is one retentiond process on a database of its own.
type service struct {
	URL string
	// DB reaches the service's database directly, to check what an attack left behind.
	DB  *postgres.DB
	cmd *exec.Cmd
	log *testlog.Buffer
}

// start runs retentiond on a fresh migrated database and waits until it is ready. env adds or overrides variables
// (NAME=value); the process is killed when the test ends.
func start(t *testing.T, env ...string) *service {
	t.Helper()
	url := testdb.New(t)
	db, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(binary, "-addr", addr)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "AUTH_HS256_SECRET="+secret, "LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	log := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("retentiond log:\n%s", log.String())
		}
	})
	s := &service{URL: "http://" + addr, DB: db, cmd: cmd, log: log}
	s.waitReady(t)
	return s
}

// waitReady polls /readyz: the process starts on its own clock, so there is no event to wait on instead.
func (s *service) waitReady(t *testing.T) {
	t.Helper()
	testwait.For(t, 60*time.Second, func() (bool, string) {
		return s.ready(), "retentiond not ready:\n" + s.log.String()
	})
}

// ready reports whether /readyz answers 200. The verdict is the status the service gives; the client's timeout
// only turns a readiness check that hangs into a failure, far beyond what a loaded machine takes to answer.
func (s *service) ready() bool {
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(s.URL + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// peakRSS is the process's peak resident set size so far (VmHWM), in bytes.
func (s *service) peakRSS(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// poolWaits is how many acquisitions of the requests' pool so far found no idle connection and waited for one to
// be released or opened (pgxpool's EmptyAcquireCount, as /metrics exports it: pgxpool_empty_acquires_total).
func (s *service) poolWaits(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != "pgxpool_empty_acquires_total" || !strings.Contains(rest, `pool="requests"`) {
			continue
		}
		_, value, _ := strings.Cut(rest, "} ")
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		require.NoError(t, err, "%s", line)
		return n
	}
	t.Fatalf("no pgxpool_empty_acquires_total of the requests' pool in /metrics:\n%s", body)
	return 0
}

// tenant is a caller of one org and sandbox with a token of every scope.
type tenant struct {
	svc     *service
	Org     string
	Sandbox string
	token   string
	client  *http.Client
}

// allScopes are every scope a dataset owner has.
var allScopes = []string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeAuditRead, catalog.ScopeRetentionRun}

// tenant returns a caller of org in sandbox prod with every scope.
func (s *service) tenant(t *testing.T, org string) *tenant {
	t.Helper()
	token, err := httpapi.MintToken(secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "user@" + org, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, ClientID: "hostile-suite", Scope: strings.Join(allScopes, " "),
	})
	require.NoError(t, err)
	return &tenant{svc: s, Org: org, Sandbox: "prod", token: token, client: &http.Client{Timeout: 60 * time.Second}}
}

// request builds a request with the gateway headers; a JSON body gets its content type unless headers set one.
func (tn *tenant) request(t *testing.T, method, path string, body io.Reader, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, tn.svc.URL+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tn.token)
	req.Header.Set("x-api-key", "hostile")
	req.Header.Set("x-gw-ims-org-id", tn.Org)
	req.Header.Set("x-sandbox-name", tn.Sandbox)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// do sends a request and returns its status and whole body. headers are name, value pairs.
func (tn *tenant) do(t *testing.T, method, path, body string, headers ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	resp, err := tn.client.Do(tn.request(t, method, path, r, headers...))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// createDataset creates a time-series dataset named name and returns its id.
func (tn *tenant) createDataset(t *testing.T, name string) string {
	t.Helper()
	status, body := tn.do(t, http.MethodPost, "/dataSets", fmt.Sprintf(`{"name":%q}`, name))
	require.Equal(t, http.StatusCreated, status, "create dataset: %s", body)
	var refs []string
	require.NoError(t, json.Unmarshal(body, &refs))
	require.Len(t, refs, 1)
	return strings.TrimPrefix(refs[0], "@/dataSets/")
}

// ingest posts NDJSON lines to a dataset and returns the decoded answer.
func (tn *tenant) ingest(t *testing.T, id string, lines ...string) ingestAnswer {
	t.Helper()
	status, body := tn.do(t, http.MethodPost, "/dataSets/"+id+"/rows", strings.Join(lines, "\n"), "Content-Type", "application/x-ndjson")
	require.Equal(t, http.StatusOK, status, "ingest: %s", body)
	var a ingestAnswer
	require.NoError(t, json.Unmarshal(body, &a))
	return a
}

// ingestAnswer is the answer to POST /dataSets/{id}/rows.
type ingestAnswer struct {
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
	Errors   []struct {
		Line   int    `json:"line"`
		Reason string `json:"reason"`
	} `json:"errors"`
}

// victim is an org minding its own business beside an attack: one dataset of victimRows recent rows.
type victim struct {
	*tenant
	Dataset string
	// baseline is the median latency of the victim's row read before the attack. It is logged, never judged: a
	// latency measured at another moment than the one it is compared with moves with the machine's load.
	baseline time.Duration
}

const victimRows = 10

// newVictim creates the victim's dataset and rows and measures its read latency before any attack.
func newVictim(t *testing.T, s *service) *victim {
	t.Helper()
	v := &victim{tenant: s.tenant(t, "VICTIM00000000000000000001@AdobeOrg")}
	v.Dataset = v.createDataset(t, "victim-events")
	now := time.Now().UTC()
	lines := make([]string, victimRows)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"_id":"v%d","timestamp":%q,"n":%d}`, i, now.Add(-time.Duration(i)*time.Hour).Format(time.RFC3339), i)
	}
	require.Equal(t, victimRows, v.ingest(t, v.Dataset, lines...).Accepted)
	v.baseline = v.readLatency(t, 15)
	return v
}

// readLatency is the median over n reads of the victim's first five rows; each read must succeed. It is for the
// logs; judgements of speed compare two measures taken side by side (compareLatency).
func (v *victim) readLatency(t *testing.T, n int) time.Duration {
	t.Helper()
	took := make([]time.Duration, n)
	for i := range took {
		start := time.Now()
		status, body := v.do(t, http.MethodGet, "/dataSets/"+v.Dataset+"/rows?limit=5", "")
		took[i] = time.Since(start)
		require.Equal(t, http.StatusOK, status, "victim read: %s", body)
	}
	slices.Sort(took)
	return took[n/2]
}

// requireUnharmed fails the test unless checkUnharmed finds the victim unharmed.
func (v *victim) requireUnharmed(t *testing.T) {
	t.Helper()
	require.NoError(t, v.checkUnharmed(t))
}

// victimReads is how many reads checkUnharmed sends: each must be answered in full.
const victimReads = 15

// checkUnharmed checks the victim after (or during) an attack by what it gets, never by how long it took: the
// service is ready, and each of victimReads reads answers 200 with all of the victim's rows. A harm that would show
// as slowness is judged where it can happen, by the work the victim waits for or against a control measured beside
// it (compareLatency). A request that cannot be sent fails the test.
func (v *victim) checkUnharmed(t *testing.T) error {
	t.Helper()
	if !v.svc.ready() {
		return errors.New("/readyz must answer 200 while a tenant attacks")
	}
	for range victimReads {
		status, body := v.do(t, http.MethodGet, "/dataSets/"+v.Dataset+"/rows?limit=100", "")
		if status != http.StatusOK {
			return fmt.Errorf("victim read answered %d: %s", status, body)
		}
		var page struct {
			Embedded struct {
				Rows []json.RawMessage `json:"rows"`
			} `json:"_embedded"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("victim read: %w", err)
		}
		if len(page.Embedded.Rows) != victimRows {
			return fmt.Errorf("the victim has %d of its %d rows: %s", len(page.Embedded.Rows), victimRows, body)
		}
	}
	return nil
}

// latencyMargin is how many times slower a victim's request beside an attack may be than the same request beside
// the control load, measured in the same moments. Both sides share the machine's load, so the ratio does not drift
// with it the way a bound in milliseconds did (a listing's median went 1.2 -> 30 ms under a load of 6-15 with no
// attack to blame); every harm this suite guards against was a ratio of 100 or more (a read 1.6 -> 160 ms beside
// big pages, 4 ms -> 124 s beside a partition flood, 35 s timeouts beside stalled exports).
const latencyMargin = 10

// sideBySide is one request of a victim beside the attack (on the attacked service) and the same request beside
// the control load (on a service of its own).
type sideBySide struct {
	attacked, control         *tenant
	attackedPath, controlPath string
}

// compareLatency sends the request n times on each side, alternating, so that whatever else loads the machine
// loads both alike, and returns each side's median and their ratio (attacked over control). Every answer must be
// 200.
func compareLatency(t *testing.T, s sideBySide, n int) (attacked, control time.Duration, ratio float64) {
	t.Helper()
	timed := func(tn *tenant, path string) time.Duration {
		begin := time.Now()
		status, body := tn.do(t, http.MethodGet, path, "")
		took := time.Since(begin)
		require.Equal(t, http.StatusOK, status, "GET %s: %s", path, body)
		return took
	}
	a, c := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		a[i] = timed(s.attacked, s.attackedPath)
		c[i] = timed(s.control, s.controlPath)
	}
	slices.Sort(a)
	slices.Sort(c)
	return a[n/2], c[n/2], float64(a[n/2]) / float64(max(c[n/2], time.Microsecond))
}
