package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
)

// expirationEnv configures replicas that look for due expirations every second. The job timeout leaves room for the
// test to see a job blocked and kill its replica; a killed replica's running job is rescued 6 s after it started.
func expirationEnv(url string) []string {
	return []string{"DATABASE_URL=" + url, "AUTH_HS256_SECRET=kill-test-secret-of-at-least-32-bytes!",
		"RETENTION_EXPIRATION_INTERVAL=1s", "RETENTION_JOB_TIMEOUT=5s", "RETENTION_RESCUE_AFTER=6s", "LOG_LEVEL=warn"}
}

// buildRetentiond builds this command into the test's temporary folder.
func buildRetentiond(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retentiond")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}

// expirationFixture is a test database whose expirations were scheduled two days ago: the test's DB runs on a clock
// 48 hours behind the replicas', so an expiry 25 hours ahead of it (the API's 24-hour rule holds) is due for them.
type expirationFixture struct {
	url    string
	db     *postgres.DB
	caller *catalog.Caller
}

func newExpirationFixture(t *testing.T, org string) *expirationFixture {
	t.Helper()
	url := testdb.New(t)
	db, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	db.Now = func() time.Time { return time.Now().Add(-48 * time.Hour) }
	return &expirationFixture{url: url, db: db,
		caller: &catalog.Caller{User: "u", ClientID: "c", Org: org, Sandbox: "prod", RequestID: "r"}}
}

// schedule creates a dataset and its expiration, due for the replicas 23 hours ago, and returns both ids.
func (f *expirationFixture) schedule(t *testing.T, name string) (datasetID, expirationID string) {
	t.Helper()
	ctx := context.Background()
	ds, err := postgres.NewDatasetService(f.db).CreateDataset(ctx, f.caller, catalog.DatasetCreate{Name: name,
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	e, err := postgres.NewExpirationService(f.db, 0).CreateExpiration(ctx, f.caller,
		catalog.ExpirationCreate{DatasetID: ds.ID, Expiry: f.db.Now().Add(25 * time.Hour), DisplayName: "retire " + name})
	require.NoError(t, err)
	return ds.ID, e.ID
}

func (f *expirationFixture) status(t *testing.T, id string) catalog.ExpirationStatus {
	t.Helper()
	var status string
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT status FROM dataset_expirations WHERE id = $1`, id).Scan(&status))
	return catalog.ExpirationStatus(status)
}

// requireExecutedOnce checks the end of an expiration executed once: its dataset deleted, one Delete event naming
// it, one Execute event, completed with the time of each step, and the org's audit chain intact.
func (f *expirationFixture) requireExecutedOnce(t *testing.T, datasetID, id string) {
	t.Helper()
	ctx := context.Background()
	e, err := postgres.NewExpirationService(f.db, 0).FindExpiration(ctx, f.caller, id, false)
	require.NoError(t, err)
	require.Equal(t, catalog.ExpirationCompleted, e.Status)
	require.NotNil(t, e.ExecutingAt)
	require.NotNil(t, e.CompletedAt)
	require.False(t, e.CompletedAt.Before(*e.ExecutingAt))
	_, err = postgres.NewDatasetService(f.db).FindDatasetByID(ctx, f.caller, datasetID)
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "the dataset is deleted")
	var deletes, named, executes int
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE details->>'expirationId' = $2)
		FROM audit_events WHERE asset_id = $1 AND action = 'Delete'`, datasetID, id).Scan(&deletes, &named))
	require.Equal(t, 1, deletes, "the dataset is deleted once")
	require.Equal(t, 1, named, "its Delete event names the expiration")
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = 'Execute'`, id).Scan(&executes))
	require.Equal(t, 1, executes, "one Execute event")
	report, err := postgres.NewAuditService(f.db).Verify(ctx, f.caller.Org)
	require.NoError(t, err)
	require.True(t, report.Valid, "audit chain: %+v", report)
}

// blockedFinish tells whether a session of this test's database has locked the expiration (the execution's second
// transaction, which deletes the dataset) and waits for the org's audit chain. pg_stat_activity and pg_locks span
// the cluster, and other tests' databases, made alike, give their tables the same oids.
const blockedFinish = `
SELECT EXISTS (
  SELECT 1 FROM pg_stat_activity a
  JOIN pg_locks l ON l.pid = a.pid AND l.relation = 'dataset_expirations'::regclass AND l.granted
  WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'
    AND a.query LIKE '%FROM audit_chains%FOR UPDATE%')`

// TestKilledReplicaExpirationCompletes kills a retentiond with SIGKILL in the middle of executing an expiration:
// its first step committed (executing) and its second (delete the dataset, mark completed) under way but not
// committed, held at the org's audit chain, which the test locks. A replica started after finishes it exactly once.
func TestKilledReplicaExpirationCompletes(t *testing.T) {
	t.Parallel()
	bin := buildRetentiond(t)
	f := newExpirationFixture(t, "EXPKILL@AdobeOrg")
	ctx := context.Background()
	datasetID, id := f.schedule(t, "campaign-2025")

	chain, err := f.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = chain.Rollback(ctx) }()
	locked, err := chain.Exec(ctx, `SELECT 1 FROM audit_chains WHERE org_id = $1 FOR UPDATE`, f.caller.Org)
	require.NoError(t, err)
	require.EqualValues(t, 1, locked.RowsAffected(), "the org's chain exists (the Create events started it)")

	env := expirationEnv(f.url)
	first, _ := startReplica(t, bin, env)
	testwait.For(t, 60*time.Second, func() (bool, string) {
		var blocked bool
		require.NoError(t, f.db.Pool.QueryRow(ctx, blockedFinish).Scan(&blocked))
		return blocked, "the expiration's finish is not blocked on the audit chain"
	})
	require.Equal(t, catalog.ExpirationExecuting, f.status(t, id), "the first step committed")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.NoError(t, chain.Rollback(ctx))

	_, err = postgres.NewDatasetService(f.db).FindDatasetByID(ctx, f.caller, datasetID)
	require.NoError(t, err, "the killed replica's deletion never committed")
	require.Equal(t, catalog.ExpirationExecuting, f.status(t, id), "the killed replica left it executing")

	startReplica(t, bin, env)
	testwait.For(t, 150*time.Second, func() (bool, string) {
		status := f.status(t, id)
		return status == catalog.ExpirationCompleted, "the expiration is " + string(status)
	})
	f.requireExecutedOnce(t, datasetID, id)
}

// TestTwoReplicaProcessesExecuteExpirationsOnce starts two retentiond processes at once on due expirations: each is
// executed once, whichever process takes its job.
func TestTwoReplicaProcessesExecuteExpirationsOnce(t *testing.T) {
	t.Parallel()
	bin := buildRetentiond(t)
	f := newExpirationFixture(t, "EXPTWO@AdobeOrg")
	due := map[string]string{}
	for i := range 4 {
		ds, id := f.schedule(t, fmt.Sprintf("pilot-%d", i))
		due[id] = ds
	}
	env := expirationEnv(f.url)
	startReplica(t, bin, env)
	startReplica(t, bin, env)
	testwait.For(t, 120*time.Second, func() (bool, string) {
		for id := range due {
			if status := f.status(t, id); status != catalog.ExpirationCompleted {
				return false, "expiration " + id + " is " + string(status)
			}
		}
		return true, ""
	})
	for id, ds := range due {
		f.requireExecutedOnce(t, ds, id)
	}
}
