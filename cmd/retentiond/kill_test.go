package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
)

// TestKilledReplicaRunCompletes kills a retentiond with SIGKILL in the middle of a run and starts another: the same
// run reaches succeeded, no row is deleted early, and the counts stay exact. The first dataset keeps a deletion
// manifest: at the kill and at the end it lists exactly the rows removed of it, each once, as many as its Expire
// event counts; the second, with the manifest off, lists none.
func TestKilledReplicaRunCompletes(t *testing.T) {
	t.Parallel()
	bin := buildRetentiond(t)
	url := testdb.New(t)
	db, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	now := time.Now().UTC()
	c := &catalog.Caller{User: "u", ClientID: "c", Org: "KILL@AdobeOrg", Sandbox: "prod", RequestID: "r"}
	ids, expired, kept := seedKillScenario(t, db, c, now)

	env := []string{"DATABASE_URL=" + url, "AUTH_HS256_SECRET=kill-test-secret-of-at-least-32-bytes!",
		"RETENTION_INGESTION_GRACE=P0D", "RETENTION_BATCH_SIZE=100", "RETENTION_JOB_TIMEOUT=2s", "RETENTION_RESCUE_AFTER=3s",
		"LOG_LEVEL=warn"}
	first, addr := startReplica(t, bin, env)
	ctx := context.Background()
	runID := startRunOverAPI(t, addr, c.Org)

	// Kill the first replica as soon as it has committed some batches but not all.
	testwait.For(t, 60*time.Second, func() (bool, string) { return ledgerRows(t, db, runID) > 0, "no batch committed" })
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	partial := ledgerRows(t, db, runID)
	require.Less(t, partial, expired, "killed mid-run")
	requireNoEarlyDeletes(t, db, ids, kept)
	requireManifestExact(t, db, runID, ids)

	startReplica(t, bin, env)
	testwait.For(t, 150*time.Second, func() (bool, string) {
		var status string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM retention_runs WHERE id = $1`, runID).Scan(&status))
		return status == "succeeded", "the run is " + status
	})
	require.Equal(t, expired, ledgerRows(t, db, runID), "the ledger counts every removed row once")
	requireNoEarlyDeletes(t, db, ids, kept)
	var remaining, audited int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM lake_rows`).Scan(&remaining))
	require.Equal(t, kept, remaining, "exactly the unexpired rows are left")
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT COALESCE(sum((details->>'rowsDeleted')::bigint), 0) FROM audit_events
		WHERE action = 'Expire' AND details->>'runId' = $1`, runID).Scan(&audited))
	require.Equal(t, expired, audited, "audit counts equal the rows removed")
	listed := requireManifestExact(t, db, runID, ids)
	var expiredFirst int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (details->>'rowsDeleted')::bigint FROM audit_events
		WHERE action = 'Expire' AND details->>'runId' = $1 AND asset_id = $2`, runID, ids[0]).Scan(&expiredFirst))
	require.Equal(t, expiredFirst, listed, "the manifest counts what the Expire event counts")
}

// requireManifestExact checks the run's manifest of the first dataset against its ledger and its rows: as many
// entries as the ledger counts removed, each _id once, none of them still stored; and no entry for the second
// dataset, whose manifest is off. It returns how many entries the first has.
func requireManifestExact(t *testing.T, db *postgres.DB, runID string, ids []string) int64 {
	t.Helper()
	var listed, distinct, stillStored, ledger, other int64
	// The manifest an entry a row: deletion_manifests holds them in chunks (migration 0019).
	const entries = `(SELECT m.removal_id, m.dataset_id, u.row_id FROM deletion_manifests m, unnest(m.row_ids) AS u (row_id)) e`
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT
  (SELECT count(*) FROM `+entries+` WHERE e.removal_id = $1 AND e.dataset_id = $2),
  (SELECT count(DISTINCT e.row_id) FROM `+entries+` WHERE e.removal_id = $1 AND e.dataset_id = $2),
  (SELECT count(*) FROM `+entries+` JOIN lake_rows r ON r.dataset_id = e.dataset_id AND r.row_id = e.row_id
   WHERE e.removal_id = $1 AND e.dataset_id = $2),
  (SELECT COALESCE(sum(rows_deleted), 0) FROM retention_deletions WHERE run_id = $1::uuid AND dataset_id = $2),
  (SELECT count(*) FROM `+entries+` WHERE e.removal_id = $1 AND e.dataset_id = $3)`, runID, ids[0], ids[1]).
		Scan(&listed, &distinct, &stillStored, &ledger, &other))
	require.Equal(t, ledger, listed, "the manifest lists as many rows as the ledger counts removed")
	require.Equal(t, listed, distinct, "each row once")
	require.Zero(t, stillStored, "no listed row is still stored")
	require.Zero(t, other, "the dataset with the manifest off lists nothing")
	return listed
}

// seedKillScenario stores rows 0 to 10 months old under P12M, then shortens the TTL to P1M: every row older than a
// month is expired but sits in a future partition, so the run must delete it batch by batch.
func seedKillScenario(t *testing.T, db *postgres.DB, c *catalog.Caller, now time.Time) ([]string, int64, int64) {
	t.Helper()
	ctx := context.Background()
	datasets, rows := postgres.NewDatasetService(db), postgres.NewRowService(db, 0)
	var ids []string
	var expired, kept int64
	for d := range 2 {
		ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: fmt.Sprintf("k%d", d),
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		ids = append(ids, ds.ID)
		_, err = rows.IngestRows(ctx, c, ds.ID, func(yield func(catalog.RowInput) bool) {
			for i := range 3000 {
				ts := now.Add(-time.Duration(i) * 2 * time.Hour)
				if !yield(catalog.RowInput{ID: fmt.Sprintf("r%d", i), Timestamp: ts, IngestedAt: &ts, Payload: []byte(`{}`)}) {
					return
				}
			}
		}, catalog.IngestOptions{})
		require.NoError(t, err)
		// The first dataset keeps a deletion manifest, the second not.
		patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{
			"rowExpiration": map[string]any{"ttlValue": "P1M", "deletionManifest": d == 0}}}})
		require.NoError(t, err)
		_, err = datasets.PatchDataset(ctx, c, ds.ID, patch, nil)
		require.NoError(t, err)
		cutoff := now.AddDate(0, -1, 0)
		for i := range 3000 {
			if !now.Add(-time.Duration(i) * 2 * time.Hour).After(cutoff) {
				expired++
			} else {
				kept++
			}
		}
	}
	return ids, expired, kept
}

func requireNoEarlyDeletes(t *testing.T, db *postgres.DB, ids []string, kept int64) {
	t.Helper()
	var young int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM lake_rows
		WHERE dataset_id = ANY($1) AND ts + interval '1 month' > (SELECT evaluated_at FROM retention_runs LIMIT 1)`, ids).Scan(&young))
	require.Equal(t, kept, young, "no unexpired row was deleted")
}

func ledgerRows(t *testing.T, db *postgres.DB, runID string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT COALESCE(sum(rows_deleted), 0) FROM retention_deletions WHERE run_id = $1`, runID).Scan(&n))
	return n
}

// startRunOverAPI waits for the replica to be ready and starts a manual run through its API.
func startRunOverAPI(t *testing.T, addr, org string) string {
	t.Helper()
	testwait.For(t, 30*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "/readyz " + resp.Status
	})
	token, err := httpapi.MintToken("kill-test-secret-of-at-least-32-bytes!", httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "t", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, Scope: catalog.ScopeRetentionRun,
	})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+"/retention/runs", strings.NewReader(`{}`))
	require.NoError(t, err)
	for k, v := range map[string]string{"Authorization": "Bearer " + token, "x-api-key": "k", "x-gw-ims-org-id": org, "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var run struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&run))
	return run.ID
}

// startReplica starts retentiond as a separate process, stopped (SIGKILL) when the test ends if still running.
func startReplica(t *testing.T, bin string, env []string) (*exec.Cmd, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "-addr", addr)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, addr
}
