package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testwait"
)

// bulkheadPeakRSS is the most memory the service may ever have held when an attack of this file ends.
const bulkheadPeakRSS = 300 << 20

// bulkheadAttacker is the org that attacks: its own dataset, events and requests.
const bulkheadAttacker = "ATTACK00000000000000000001@AdobeOrg"

// bulkheadInsertLog writes n audit events of about 900 bytes each into org's log, directly: what a busy org
// accumulates in a year, without a year of API calls.
func bulkheadInsertLog(t *testing.T, svc *service, org string, n int) {
	t.Helper()
	_, err := svc.DB.Pool.Exec(context.Background(), `
INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name, action,
                          status, user_id, client_id, details, seq, prev_hash, hash)
SELECT gen_random_uuid(), $1, 'prod', now() - g * interval '1 second', 'r', 'Dataset', 'a', 'n', 'Update',
       'Success', 'u', 'c', jsonb_build_object('g', g, 'pad', repeat('x', 700)), g, '', ''
FROM generate_series(1, $2::int) g`, org, n)
	require.NoError(t, err)
}

// bulkheadStall sends GET path as tn on a raw connection with a tiny receive window, reads the status line and
// headers, sends the status to statuses (0 if no answer came), and then never reads again: a client that asked for
// a large answer and went away without closing. The connection is closed when the test ends.
func bulkheadStall(t *testing.T, tn *tenant, path string, statuses chan<- int) {
	t.Helper()
	u, err := url.Parse(tn.svc.URL)
	require.NoError(t, err)
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := dialer.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	req := tn.request(t, http.MethodGet, path, nil)
	require.NoError(t, req.Write(conn))
	go func() {
		// One small read buffer: the status line and headers, and not a byte more than fits beside them.
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), req) //nolint:bodyclose // never read nor closed, on purpose: the connection closes when the test ends
		if err != nil {
			statuses <- 0
			return
		}
		statuses <- resp.StatusCode
	}()
}

// bulkheadWatchReady polls /readyz every 50 ms until the returned function is called, which returns the polls that
// did not answer 200, and how many polls there were.
func bulkheadWatchReady(svc *service) func() (failed, polls int) {
	stop := make(chan struct{})
	done := make(chan [2]int)
	go func() {
		var failed, polls int
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- [2]int{failed, polls}
				return
			case <-tick.C:
			}
			polls++
			if !svc.ready() {
				failed++
			}
		}
	}()
	return func() (int, int) {
		close(stop)
		r := <-done
		return r[0], r[1]
	}
}

// bulkheadRun starts a retention run of the victim's dataset and waits for it to end, polling its status.
func bulkheadRun(t *testing.T, v *victim) string {
	t.Helper()
	status, body := v.do(t, http.MethodPost, "/retention/runs", fmt.Sprintf(`{"datasetIds":[%q]}`, v.Dataset))
	require.Equal(t, http.StatusAccepted, status, "start run: %s", body)
	var run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(body, &run))
	testwait.For(t, 60*time.Second, func() (bool, string) {
		if run.Status != catalog.StatusPending && run.Status != catalog.StatusRunning {
			return true, ""
		}
		status, body = v.do(t, http.MethodGet, "/retention/runs/"+run.ID, "")
		require.Equal(t, http.StatusOK, status, "read run: %s", body)
		require.NoError(t, json.Unmarshal(body, &run))
		return false, "the victim's run did not end: " + string(body)
	})
	return run.Status
}

// TestBulkheadStalledExports is finding 1: forty exports of a large audit log whose clients never read held every
// pooled connection, so /readyz answered 503 and other orgs' calls timed out. Exports now hold no connection while
// they wait for their reader, an org runs a bounded number of long requests at once (429 past it), and jobs and
// health checks have connections of their own.
func TestBulkheadStalledExports(t *testing.T) {
	t.Parallel()
	svc := start(t)
	v := newVictim(t, svc)
	attacker := svc.tenant(t, bulkheadAttacker)
	bulkheadInsertLog(t, svc, attacker.Org, 6000)

	stopWatching := bulkheadWatchReady(svc)
	statuses := make(chan int, 40)
	for range 40 {
		bulkheadStall(t, attacker, "/audit/export?format=json", statuses)
	}
	// Every export either started its answer or was refused; one waiting for a connection would not answer at all.
	answered := map[int]int{}
	deadline := time.After(20 * time.Second)
	for range 40 {
		select {
		case status := <-statuses:
			answered[status]++
		case <-deadline:
			t.Fatalf("exports answered so far: %v; the rest are waiting for something no tenant should hold", answered)
		}
	}
	require.Positive(t, answered[http.StatusOK], "some exports run: %v", answered)
	require.Positive(t, answered[http.StatusTooManyRequests], "the org's long requests are capped: %v", answered)

	// The harm was a victim waiting for a connection the stalled exports held, until /readyz answered 503 and its
	// calls timed out: judged by the answers, while the exports stay stalled. The pool's waits are logged, not
	// judged: the exports still read a page whenever their clients' buffers take a few bytes, and those count too.
	waits := svc.poolWaits(t)
	v.requireUnharmed(t)
	t.Logf("victim's read median: %s before the attack (15 reads), %s during it (9)", v.baseline, v.readLatency(t, 9))
	v.createDataset(t, "created-during-the-attack")
	status, body := v.do(t, http.MethodGet, "/dataSets?limit=10", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	t.Logf("acquisitions of the requests' pool that waited during the victim's calls: %.0f", svc.poolWaits(t)-waits)
	require.Equal(t, catalog.StatusSucceeded, bulkheadRun(t, v))
	failed, polls := stopWatching()
	t.Logf("exports answered %v; /readyz polled %d times during the attack; peak RSS %d MiB", answered, polls, svc.peakRSS(t)>>20)
	require.Zero(t, failed, "/readyz answered 200 throughout")
	require.Less(t, svc.peakRSS(t), int64(bulkheadPeakRSS))
}

// bulkheadBigRow is an event of about 1,000,000 bytes: one of the largest a line may hold. Its text is random, so
// that nothing on the way compresses it.
func bulkheadBigRow(t *testing.T, i int) string {
	t.Helper()
	pad := make([]byte, 740_000)
	_, err := rand.Read(pad)
	require.NoError(t, err)
	return fmt.Sprintf(`{"_id":"big-%d","timestamp":%q,"pad":%q}`, i,
		time.Now().UTC().Add(-time.Duration(i)*time.Minute).Format(time.RFC3339), base64.StdEncoding.EncodeToString(pad))
}

// TestBulkheadBigRowPages is the answer part of finding 8: one page of 300 rows of 1 MiB took the service from
// 0.19 GB to 1.72 GB. A page now stops once its answer reaches its byte bound and links the next.
func TestBulkheadBigRowPages(t *testing.T) {
	t.Parallel()
	svc := start(t)
	v := newVictim(t, svc)
	attacker := svc.tenant(t, bulkheadAttacker)
	id := attacker.createDataset(t, "big-rows")
	const rows = 64
	for i := 0; i < rows; i += 8 {
		lines := make([]string, 8)
		for j := range lines {
			lines[j] = bulkheadBigRow(t, i+j)
		}
		require.Equal(t, 8, attacker.ingest(t, id, lines...).Accepted)
	}

	// Readers page through the big rows as hard as they can while the victim is checked.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	pages, refused, seen := 0, 0, map[string]bool{}
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, 8<<20)
			for path := ""; ctx.Err() == nil; {
				if path == "" {
					path = "/dataSets/" + id + "/rows?limit=1000"
				}
				page, status, err := bulkheadReadPage(ctx, attacker, path, buf)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if status == http.StatusTooManyRequests {
					refused++
				} else {
					pages++
					for _, id := range page.IDs {
						seen[id] = true
					}
					path = page.Next
				}
				mu.Unlock()
			}
		})
	}
	progress := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return pages, len(seen)
	}
	stopWatching := bulkheadWatchReady(svc)
	testwait.For(t, 2*time.Minute, func() (bool, string) {
		n, _ := progress()
		return n >= 2, "the readers read no pages"
	})
	v.requireUnharmed(t)
	t.Logf("victim's read median: %s before the attack (15 reads), %s during it (9)", v.baseline, v.readLatency(t, 9))
	testwait.For(t, 2*time.Minute, func() (bool, string) {
		_, n := progress()
		return n >= rows, fmt.Sprintf("the readers reached %d of the %d rows", n, rows)
	})
	cancel()
	wg.Wait()
	failed, polls := stopWatching()
	require.Zero(t, failed, "/readyz answered 200 throughout (%d polls)", polls)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d pages of big rows read, %d reads refused (429), peak RSS %d MiB", pages, refused, svc.peakRSS(t)>>20)
	require.Len(t, seen, rows, "paging reaches every row")
	require.Less(t, svc.peakRSS(t), int64(bulkheadPeakRSS))
}

// bulkheadPage is a page of rows as a reader needs it: the rows' ids and the next link.
type bulkheadPage struct {
	IDs  []string
	Next string
}

// bulkheadRowStart and bulkheadNextLink are how a row and the next link begin in a page of rows.
var (
	bulkheadRowStart = []byte(`{"_id":"`)
	bulkheadNextLink = []byte(`"next":{"href":`)
)

// bulkheadParsePage finds a page's row ids and next link without decoding it. The attacker reads pages as fast as
// it can, and decoding 4 MiB of JSON in this race-instrumented process costs more CPU than the service spends on
// the page: the victim, measured from this same process, would pay for it. Each row of a page begins with its
// _id, and the ids of this test need no escaping.
func bulkheadParsePage(body []byte) (*bulkheadPage, error) {
	page := &bulkheadPage{}
	for rest := body; ; {
		i := bytes.Index(rest, bulkheadRowStart)
		if i < 0 {
			break
		}
		rest = rest[i+len(bulkheadRowStart):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return nil, errors.New("a row id without its end")
		}
		page.IDs = append(page.IDs, string(rest[:end]))
	}
	if i := bytes.LastIndex(body, bulkheadNextLink); i >= 0 {
		if err := json.NewDecoder(bytes.NewReader(body[i+len(bulkheadNextLink):])).Decode(&page.Next); err != nil {
			return nil, fmt.Errorf("the next link: %w", err)
		}
	}
	return page, nil
}

// bulkheadReadPage reads one page of rows as tn into buf, which must hold it; a 429 is an answer, anything else but
// 200 an error.
func bulkheadReadPage(ctx context.Context, tn *tenant, path string, buf []byte) (*bulkheadPage, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tn.svc.URL+path, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tn.token)
	req.Header.Set("x-api-key", "hostile")
	req.Header.Set("x-gw-ims-org-id", tn.Org)
	req.Header.Set("x-sandbox-name", tn.Sandbox)
	resp, err := tn.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	// Into the reader's own buffer, reused from page to page: in this race-instrumented process, allocating and
	// collecting 4 MiB a page cost several times the CPU the service spent on it.
	n, err := io.ReadFull(resp.Body, buf)
	switch {
	case n == len(buf):
		return nil, 0, fmt.Errorf("GET %s: an answer of more than %d bytes", path, len(buf))
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF):
		return nil, 0, err
	}
	body := buf[:n]
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return nil, resp.StatusCode, nil
	case http.StatusOK:
	default:
		return nil, resp.StatusCode, fmt.Errorf("GET %s answered %d: %.300s", path, resp.StatusCode, body)
	}
	page, err := bulkheadParsePage(body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(page.IDs) == 0 {
		return nil, resp.StatusCode, fmt.Errorf("GET %s: a page without rows: %.300s", path, body)
	}
	return page, resp.StatusCode, nil
}
