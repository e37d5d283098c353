package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
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
// and out-of-limits overrides are refused line by line with their reason, the victim's reads keep their speed, and
// after the attacker's datasets are deleted, its run leaves attached only the partitions holding the victim's rows.
func TestPartitionFloodIsBounded(t *testing.T) {
	t.Parallel()
	svc := start(t)
	v := newVictim(t, svc)
	getDataset, preview := "/dataSets/"+v.Dataset, "/ttl/"+v.Dataset+"/preview"
	baselines := map[string]time.Duration{getDataset: partitionsLatency(t, v.tenant, getDataset), preview: partitionsLatency(t, v.tenant, preview)}
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
	n := partitionsAttached(t, svc)
	t.Logf("far: %d lines; %d partitions in all, attack took %s", len(lines), n, time.Since(start))
	require.LessOrEqual(t, n, partitionsBound)

	v.requireUnharmed(t)
	t.Logf("victim's rows: median %s before, %s beside %d partitions", v.baseline, v.readLatency(t, 15), n)
	for path, base := range baselines {
		got := partitionsLatency(t, v.tenant, path)
		t.Logf("victim's %s: median %s before, %s beside %d partitions", path, base, got, n)
		require.LessOrEqual(t, got, 2*base+25*time.Millisecond, "%s went from %s to %s", path, base, got)
	}

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

// partitionsLatency is the median over 15 GETs of path; each must answer 200.
func partitionsLatency(t *testing.T, tn *tenant, path string) time.Duration {
	t.Helper()
	took := make([]time.Duration, 15)
	for i := range took {
		begin := time.Now()
		status, body := tn.do(t, http.MethodGet, path, "")
		took[i] = time.Since(begin)
		require.Equal(t, http.StatusOK, status, "GET %s: %s", path, body)
	}
	slices.Sort(took)
	return took[len(took)/2]
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
	deadline := time.Now().Add(40 * time.Second)
	for !slices.Contains([]string{"succeeded", "failed", "partial"}, run.Status) {
		require.True(t, time.Now().Before(deadline), "run %s still %s", run.ID, run.Status)
		time.Sleep(50 * time.Millisecond)
		status, body = tn.do(t, http.MethodGet, "/retention/runs/"+run.ID, "")
		require.Equal(t, http.StatusOK, status, "%s", body)
		require.NoError(t, json.Unmarshal(body, &run))
	}
	for {
		var waiting int
		require.NoError(t, tn.svc.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM detached_partitions`).Scan(&waiting))
		if waiting == 0 {
			return run
		}
		require.True(t, time.Now().Before(deadline), "%d detached partitions not released", waiting)
		time.Sleep(50 * time.Millisecond)
	}
}

