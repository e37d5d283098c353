package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// partitionsBound is the most partitions a store may have whatever its tenants send (docs/storage.md, "How many
// partitions"): 400 covering the current month or later, the past partition and the far one. The service under
// attack is fresh, so no partition of an earlier month holds rows.
const partitionsBound = 402

// TestPartitionFloodIsBounded is finding 2 of #15: one line per month of timestamp across 400 years made 5,000
// partitions, and another org's 10-row dataset then answered a read in 124 s (4 ms before), GET /dataSets/{id} in
// 6.9 s and a preview in 20 s; deleting the attacker's dataset and running retention left 4,507 empty partitions.
// Here the attacker sends the same lines, then, once an operator has lifted its org's maxValue, a row per month of
// expiry over 400 years and one per century to year 9000. The partitions stay within the bound, future timestamps
// and out-of-limits overrides are refused line by line with their reason, and after the attacker's datasets are
// deleted, its run leaves attached only the partitions holding the victim's rows. The victim's reads are judged
// against a control: a second service where a tenant sent as many rows, all of this month, measured alternately
// with the attacked one, so that the machine's load weighs on both alike.
func TestPartitionFloodIsBounded(t *testing.T) {
	t.Parallel()
	svc, control := start(t), start(t)
	v, cv := newVictim(t, svc), newVictim(t, control)
	attacker := svc.tenant(t, "ATTACKER0000000000000001@AdobeOrg")

	// One line per month of timestamp over 400 years, and overrides beyond the built-in maxValue.
	start := time.Now()
	now := time.Now().UTC()
	flood := attacker.createDataset(t, "flood")
	var lines []string
	refused := 0
	for m := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC); m.Year() < 2300; m = m.AddDate(0, 1, 0) {
		lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"n":%d}`, m.Format(time.RFC3339), len(lines)))
		if m.After(now.Add(catalog.MaxFutureSkew)) {
			refused++
		}
	}
	for y := 2100; y < 9000; y += 100 {
		lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"_expiresAt":"%d-06-01T00:00:00Z"}`, now.Format(time.RFC3339), y))
		refused++
	}
	a := attacker.ingest(t, flood, lines...)
	require.Equal(t, refused, a.Rejected)
	require.Equal(t, len(lines)-refused, a.Accepted)
	require.Len(t, a.Errors, catalog.MaxLineErrors)
	for _, e := range a.Errors {
		require.Regexp(t, `^timestamp \S+ is in the future: it may lie at most 24 hours after the time of ingestion|^_expiresAt: the row's expiry \S+ is later than timestamp \+ maxValue P10Y`, e.Reason, "line %d", e.Line)
	}
	t.Logf("flood: %d lines, %d accepted, %d refused; %d partitions", len(lines), a.Accepted, a.Rejected, partitionsAttached(t, svc))
	controlRows := a.Accepted

	// An operator lifts the attacker org's maxValue: every expiry is allowed, up to year 9000, and never.
	require.NoError(t, postgres.NewPolicyService(svc.DB).SetLimits(context.Background(), attacker.Org,
		catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer},
		catalog.Limits{Min: retention.Period{Days: 30}, Default: retention.Period{Months: 12}}))
	far := attacker.createDataset(t, "far")
	lines = lines[:0]
	ts := now.Add(-time.Hour).Format(time.RFC3339)
	for m := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 2, 0); m.Year() < now.Year()+400; m = m.AddDate(0, 1, 0) {
		lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"_expiresAt":%q}`, ts, m.Format(time.RFC3339)))
	}
	for y := now.Year() + 400; y < 9000; y += 100 {
		lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"_expiresAt":"%d-06-01T00:00:00Z"}`, ts, y))
	}
	lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"_ttl":-1}`, ts))
	a = attacker.ingest(t, far, lines...)
	require.Zero(t, a.Rejected, "%v", a.Errors)
	controlRows += a.Accepted
	n := partitionsAttached(t, svc)
	t.Logf("far: %d lines; %d partitions in all, attack took %s", len(lines), n, time.Since(start))
	require.LessOrEqual(t, n, partitionsBound)

	// The control load: as many rows from a tenant of the control service, all of the last hours.
	calm := control.tenant(t, "CONTROL00000000000000001@AdobeOrg")
	calmID := calm.createDataset(t, "calm")
	lines = lines[:0]
	for i := range controlRows {
		lines = append(lines, fmt.Sprintf(`{"timestamp":%q,"n":%d}`, now.Add(-time.Duration(i)*time.Second).Format(time.RFC3339), i))
	}
	require.Equal(t, controlRows, calm.ingest(t, calmID, lines...).Accepted)
	t.Logf("control: %d rows, %d partitions in all", controlRows, partitionsAttached(t, control))

	v.requireUnharmed(t)
	partitionsJudgeReads(t, v, cv, n)
	// The attacker deletes its datasets and runs retention: the partitions holding only its rows are dropped.
	for _, id := range []string{flood, far} {
		status, body := attacker.do(t, http.MethodDelete, "/dataSets/"+id, "")
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	run := partitionsRun(t, attacker)
	t.Logf("run %s: %d rows deleted, %d partitions attached, peak RSS %d MiB", run.Status, run.Progress.RowsDeleted,
		partitionsAttached(t, svc), svc.peakRSS(t)>>20)
	require.Equal(t, "succeeded", run.Status)
	var held []string
	require.NoError(t, svc.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(DISTINCT partition_name::text ORDER BY partition_name::text), '{}')
		FROM row_stats WHERE row_count > 0`).Scan(&held))
	require.Equal(t, held, partitionsAttachedNames(t, svc), "only the partitions holding the victim's rows stay attached")
	v.requireUnharmed(t)
}

// partitionsJudgeReads compares the victim's reads beside the flood (n partitions) with the control victim's: its
// rows, GET /dataSets/{id}, its preview, and the listing sorted by storage, which measures, in its own statement,
// only the partitions holding the victim's rows.
func partitionsJudgeReads(t *testing.T, v, cv *victim, n int) {
	t.Helper()
	for _, path := range []string{
		"/dataSets/%s/rows?limit=5", "/dataSets/%s", "/ttl/%s/preview", "/dataSets?orderBy=desc:extensions.adobe_lakeHouse.metrics.storageSize",
	} {
		s := sideBySide{attacked: v.tenant, control: cv.tenant, attackedPath: path, controlPath: path}
		if strings.Contains(path, "%s") {
			s.attackedPath, s.controlPath = fmt.Sprintf(path, v.Dataset), fmt.Sprintf(path, cv.Dataset)
		}
		attacked, control, ratio := compareLatency(t, s, 15)
		t.Logf("victim's %s: median %s beside %d partitions, %s beside the control load: %.1fx", s.attackedPath, attacked, n, control, ratio)
		require.LessOrEqual(t, ratio, float64(latencyMargin), "%s: %s beside the flood, %s beside the control load", s.attackedPath, attacked, control)
	}
}

// partitionsAttachedNames lists the partitions attached to the lake store.
func partitionsAttachedNames(t *testing.T, svc *service) []string {
	t.Helper()
	var names []string
	require.NoError(t, svc.DB.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname::text), '{}')
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'lake_rows'::regclass`).Scan(&names))
	return names
}

// partitionsAttached counts the partitions of both stores.
func partitionsAttached(t *testing.T, svc *service) int {
	t.Helper()
	var n int
	require.NoError(t, svc.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_inherits
		WHERE inhparent IN ('lake_rows'::regclass, 'profile_rows'::regclass)`).Scan(&n))
	return n
}

// partitionsRunDoc is the part of a run's document the suite reads.
type partitionsRunDoc struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress struct {
		RowsDeleted int64 `json:"rowsDeleted"`
	} `json:"progress"`
	Datasets []struct {
		PartitionsDropped int `json:"partitionsDropped"`
	} `json:"datasets"`
}

// partitionsRun starts a run of the tenant's datasets and polls it, and then the release of the partitions it
// detached, until both are done: the run is the service's own work, on its own clock, so there is no event to
// wait on instead.
func partitionsRun(t *testing.T, tn *tenant) partitionsRunDoc {
	t.Helper()
	status, body := tn.do(t, http.MethodPost, "/retention/runs", `{}`)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var run partitionsRunDoc
	require.NoError(t, json.Unmarshal(body, &run))
	testwait.For(t, 40*time.Second, func() (bool, string) {
		if slices.Contains([]string{"succeeded", "failed", "partial"}, run.Status) {
			return true, ""
		}
		status, body = tn.do(t, http.MethodGet, "/retention/runs/"+run.ID, "")
		require.Equal(t, http.StatusOK, status, "%s", body)
		require.NoError(t, json.Unmarshal(body, &run))
		return false, fmt.Sprintf("run %s still %s", run.ID, run.Status)
	})
	testwait.For(t, 40*time.Second, func() (bool, string) {
		var waiting int
		require.NoError(t, tn.svc.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM detached_partitions`).Scan(&waiting))
		return waiting == 0, fmt.Sprintf("%d detached partitions not released", waiting)
	})
	return run
}

// TestRowRequestsBesideRunsThatDropPartitions is finding 7 of #15: DELETE …/rows/nonexistent in a loop while a run
// dropped partitions answered 500 (relation "lake_rows_p202302" does not exist) 4 times in 567, and an ingestion
// with client _ids once failed the same way and lost its chunk. Here a tenant's runs drop the past partition, which
// its own chunks fill again all along with rows expired on arrival (no ingestion grace), while it ingests with
// client _ids, deletes rows and reads in loops: no request may answer 5xx, and its live rows must be exact.
func TestRowRequestsBesideRunsThatDropPartitions(t *testing.T) {
	t.Parallel()
	svc := start(t, "RETENTION_INGESTION_GRACE=P0D")
	v := newVictim(t, svc)
	busy := svc.tenant(t, "BUSY00000000000000000001@AdobeOrg")
	ds := busy.createDataset(t, "busy")
	now := time.Now().UTC()
	chunk := func(i int) string {
		lines := make([]string, 0, 20)
		for j := range 10 {
			lines = append(lines,
				fmt.Sprintf(`{"timestamp":%q,"_id":"old%d"}`, now.AddDate(-2, 0, -j).Format(time.RFC3339), (i+j)%20),
				fmt.Sprintf(`{"timestamp":%q,"_id":"live%d","chunk":%d}`, now.Add(-time.Duration(j)*time.Hour).Format(time.RFC3339), j, i))
		}
		return strings.Join(lines, "\n")
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var requests, failures atomic.Int64
	var dropped atomic.Int64
	loop := func(step func(i int) error) {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				requests.Add(1)
				if err := step(i); err != nil {
					failures.Add(1)
					t.Error(err)
				}
			}
		})
	}
	expect := func(want int, method, path, body string, headers ...string) error {
		status, got, err := partitionsSend(busy, method, path, body, headers...)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		if status != want {
			return fmt.Errorf("%s %s: %d %s, want %d", method, path, status, got, want)
		}
		return nil
	}
	loop(func(i int) error {
		return expect(http.StatusNotFound, http.MethodDelete, "/dataSets/"+ds+"/rows/nonexistent", "")
	})
	loop(func(i int) error {
		return expect(http.StatusOK, http.MethodGet, "/dataSets/"+ds+"/rows?limit=100", "")
	})
	loop(func(i int) error {
		return expect(http.StatusOK, http.MethodPost, "/dataSets/"+ds+"/rows", chunk(i), "Content-Type", "application/x-ndjson")
	})
	runs := 0
	deadline := time.Now().Add(40 * time.Second)
	for ; runs < 3 || dropped.Load() < 5; runs++ {
		require.True(t, time.Now().Before(deadline), "%d runs dropped %d partitions", runs, dropped.Load())
		run := partitionsRun(t, busy)
		require.Equal(t, "succeeded", run.Status)
		for _, d := range run.Datasets {
			dropped.Add(int64(d.PartitionsDropped))
		}
	}
	close(done)
	wg.Wait()
	t.Logf("%d runs dropped %d partitions beside %d requests, %d failed", runs, dropped.Load(), requests.Load(), failures.Load())
	require.Zero(t, failures.Load())

	status, body := busy.do(t, http.MethodGet, "/dataSets/"+ds+"/rows?limit=100", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var page struct {
		Embedded struct {
			Rows []map[string]any `json:"rows"`
		} `json:"_embedded"`
	}
	require.NoError(t, json.Unmarshal(body, &page))
	var ids []string
	for _, r := range page.Embedded.Rows {
		ids = append(ids, r["_id"].(string))
	}
	slices.Sort(ids)
	require.Equal(t, []string{"live0", "live1", "live2", "live3", "live4", "live5", "live6", "live7", "live8", "live9"}, ids,
		"each live _id once")
	var mismatched int
	require.NoError(t, svc.DB.Pool.QueryRow(context.Background(), `
		WITH real AS (SELECT tableoid::regclass::text AS part, dataset_id, setting_id, count(*) AS n FROM lake_rows GROUP BY 1, 2, 3),
		     kept AS (SELECT partition_name, dataset_id, setting_id, row_count FROM row_stats WHERE row_count <> 0)
		SELECT count(*) FROM (SELECT * FROM real EXCEPT SELECT * FROM kept UNION ALL (SELECT * FROM kept EXCEPT SELECT * FROM real)) x`).Scan(&mismatched))
	require.Zero(t, mismatched, "the counters match the rows stored")
	v.requireUnharmed(t)
}

// partitionsSend sends a request from any goroutine: it returns the error where the harness's do would fail the
// test, which only the test's goroutine may do.
func partitionsSend(tn *tenant, method, path, body string, headers ...string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, tn.svc.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tn.token)
	req.Header.Set("x-api-key", "hostile")
	req.Header.Set("x-gw-ims-org-id", tn.Org)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := tn.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, got, err
}
