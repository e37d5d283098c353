package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/pgcluster"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/internal/testwait"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/riverjobs"
)

// content is the org's lake rows in db, as "_id payload", sorted: what a move must carry over unchanged.
func (c *moveCells) content(t *testing.T, db *postgres.DB) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT r.row_id || ' ' || r.payload::text FROM lake_rows r
		WHERE r.dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`, moveOrg)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// cellCluster is a cell's database on a PostgreSQL cluster of the test's own, which the test restarts.
type cellCluster struct {
	cluster *pgcluster.Cluster
	url     string
}

// cellSettings are the settings of a test's own cluster: a throwaway, so no fsync.
func cellSettings() map[string]string { return map[string]string{"fsync": "off"} }

func startCellCluster(t *testing.T) *cellCluster {
	t.Helper()
	ctx := context.Background()
	cl, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: filepath.Join(t.TempDir(), "pg"), Settings: cellSettings()})
	require.NoError(t, err)
	cc := &cellCluster{cluster: cl}
	t.Cleanup(func() { _ = cc.cluster.Stop(context.Background()) })
	require.NoError(t, cl.CreateDatabase(ctx, "cell"))
	cc.url = cl.URL("cell")
	pool, err := pgxpool.New(ctx, cc.url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = postgres.MigrateUp(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, riverjobs.Migrate(ctx, pool))
	return cc
}

// restart stops the cluster as `pg_ctl stop -m fast` does (every session cut, every open transaction rolled back)
// and starts it again on the same folder and port; db's pool drops the connections the restart cut.
func (cc *cellCluster) restart(t *testing.T, db *postgres.DB) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cc.cluster.Stop(ctx))
	again, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: cc.cluster.DataDir(), Port: cc.cluster.Port(), Settings: cellSettings()})
	require.NoError(t, err)
	cc.cluster = again
	db.Pool.Reset()
}

// requireDraining holds the state a move cut in its copy, made before the fence, leaves on the source: the fence
// draining (no run lists the org) and the org's writes passing.
func (c *moveCells) requireDraining(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var state *string
	require.NoError(t, c.src.Pool.QueryRow(ctx, `SELECT org_write_fence($1)`, moveOrg).Scan(&state))
	require.Nil(t, state, "the org's writes pass while a move cut before its fence waits to be run again")
	var fence string
	require.NoError(t, c.src.Pool.QueryRow(ctx, `SELECT state FROM org_write_fences WHERE org_id = $1`, moveOrg).Scan(&fence))
	require.Equal(t, "draining", fence)
}

// TestOrgMoveSurvivesAPostgresRestart restarts the source's or the target's PostgreSQL while `retentionctl org
// move` is in the middle of a step, each held there by a lock the test takes: the tool fails, the org stays whole
// on the source (its writes passing when the copy, made before the fence, was cut), and the tool run again finishes
// the move with the org's rows as they were.
func TestOrgMoveSurvivesAPostgresRestart(t *testing.T) {
	t.Parallel()
	bin := buildCtl(t)
	for name, tc := range map[string]struct {
		restartSource bool   // else the target
		lockSource    bool   // the test's lock is on the source, else on the target
		lock          string // the table the test locks in SHARE mode, which the step waits for
	}{
		"OfTheTargetInTheCopy":    {lock: "audit_events"}, // the copy writes the events after the rows
		"OfTheSourceInTheCopy":    {restartSource: true, lock: "audit_events"},
		"OfTheSourceInTheRemoval": {restartSource: true, lockSource: true, lock: "lake_rows"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			restarted := startCellCluster(t)
			srcURL, dstURL := testdb.New(t), restarted.url
			if tc.restartSource {
				srcURL, dstURL = restarted.url, testdb.New(t)
			}
			c := setupMoveCellsOn(t, srcURL, dstURL)
			c.before = c.content(t, c.src)
			locked, restartedDB := c.dst, c.dst
			if tc.lockSource {
				locked = c.src
			}
			if tc.restartSource {
				restartedDB = c.src
			}
			tx, err := locked.Pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, `LOCK TABLE `+tc.lock+` IN SHARE MODE`)
			require.NoError(t, err)
			cmd, out := c.startMove(t, bin)
			waitBlocked(t, locked, "relation")
			restarted.restart(t, restartedDB)
			_ = tx.Rollback(ctx) // cut by the restart, or released now
			require.Error(t, cmd.Wait(), "the move fails when its database restarts under it: %s", out)
			if !tc.lockSource {
				c.requireDraining(t)
				require.Zero(t, c.count(t, c.dst, `SELECT count(*) FROM datasets WHERE org_id = $1`), "a cut copy leaves nothing on the target")
			}
			c.waitMoveLockFree(t)
			cmd, out = c.startMove(t, bin)
			require.NoError(t, cmd.Wait(), out.String())
			c.requireMoved(t, out.String())
		})
	}
}

// ctlBuild builds a command of this module into the test's temporary folder.
func ctlBuild(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}

// cellReplica is a retentiond serving one cell's database, as a process the test kills with SIGKILL.
type cellReplica struct {
	cmd   *exec.Cmd
	addr  string
	token string
}

func startCellReplica(t *testing.T, bin, url string) *cellReplica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &cellReplica{addr: ln.Addr().String()}
	require.NoError(t, ln.Close())
	r.cmd = exec.Command(bin, "-addr", r.addr)
	r.cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "AUTH_HS256_SECRET="+testSecret, "LOG_LEVEL=warn")
	r.cmd.Stderr = os.Stderr
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	})
	r.token = strings.TrimSpace(mustCtl(t, map[string]string{"AUTH_HS256_SECRET": testSecret}, "token", "-org", moveOrg, "-sub", "writer"))
	testwait.For(t, time.Minute, func() (bool, string) {
		resp, err := http.Get("http://" + r.addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "/readyz " + resp.Status
	})
	return r
}

// do sends a request of the org to the replica and returns the status and body; a status of -1 is a request the
// replica never answered.
func (r *cellReplica) do(method, path, body string) (int, string) {
	req, err := http.NewRequestWithContext(context.Background(), method, "http://"+r.addr+path, strings.NewReader(body))
	if err != nil {
		return -1, err.Error()
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + r.token, "x-api-key": "k", "x-gw-ims-org-id": moveOrg,
		"Content-Type": "application/x-ndjson"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ingest posts one event with _id id to the org's dataset through the replica.
func (r *cellReplica) ingest(c *moveCells, id string) (int, string) {
	return r.do(http.MethodPost, "/dataSets/"+c.datasetID+"/rows",
		fmt.Sprintf(`{"timestamp":%q,"_id":%q,"v":"written by a client"}`+"\n", time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), id))
}

// acked adds a write the service acknowledged to what the target must hold after the move.
func (c *moveCells) acked(t *testing.T, id string) {
	t.Helper()
	var line string
	require.NoError(t, c.src.Pool.QueryRow(context.Background(), `SELECT row_id || ' ' || payload::text FROM lake_rows
		WHERE dataset_id = $1 AND row_id = $2`, c.datasetID, id).Scan(&line))
	c.before = append(c.before, line)
	slices.Sort(c.before)
	c.rows++
}

// TestOrgMoveSurvivesAKilledRetentiond kills a cell's retentiond with SIGKILL in the middle of a move.
//   - The source's, while an ingestion it runs has passed the fence check and holds the org's fence lock (held
//     there by the dataset's row lock, which the test takes) and the move waits for that lock to raise the fence:
//     the killed write's transaction rolls back, the fence rises, and the move ends with every acknowledged write
//     and nothing of the killed one.
//   - The target's, while the copy is held by a lock the test takes on the target: the move ends, and a retentiond
//     started again on the target serves the org's dataset and takes its writes.
func TestOrgMoveSurvivesAKilledRetentiond(t *testing.T) {
	t.Parallel()
	ctlBin, server := buildCtl(t), ctlBuild(t, "../retentiond")
	ctx := context.Background()

	t.Run("OfTheSource", func(t *testing.T) {
		t.Parallel()
		c := setupMoveCells(t)
		c.before = c.content(t, c.src)
		replica := startCellReplica(t, server, c.srcURL)
		status, body := replica.ingest(c, "acked-before")
		require.Equal(t, http.StatusOK, status, body)
		c.acked(t, "acked-before")

		tx, err := c.src.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('rows:' || $1, 0))`, c.datasetID)
		require.NoError(t, err)
		killed := make(chan int, 1)
		go func() {
			status, _ := replica.ingest(c, "killed")
			killed <- status
		}()
		waitBlockedN(t, c.src, "advisory", 1) // the ingestion, past the fence check, at the dataset's lock
		cmd, out := c.startMove(t, ctlBin)
		waitBlockedN(t, c.src, "advisory", 2) // and the move, raising the fence
		require.NoError(t, replica.cmd.Process.Signal(syscall.SIGKILL))
		_ = replica.cmd.Wait()
		require.Equal(t, -1, <-killed, "the killed replica never acknowledged the write")
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, cmd.Wait(), out.String())
		c.requireMoved(t, out.String())
		require.Zero(t, c.count(t, c.dst, `SELECT count(*) FROM lake_rows WHERE row_id = 'killed' AND dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`))
	})

	t.Run("OfTheTarget", func(t *testing.T) {
		t.Parallel()
		c := setupMoveCells(t)
		c.before = c.content(t, c.src)
		replica := startCellReplica(t, server, c.dstURL)
		tx, err := c.dst.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `LOCK TABLE audit_events IN SHARE MODE`)
		require.NoError(t, err)
		cmd, out := c.startMove(t, ctlBin)
		waitBlocked(t, c.dst, "relation")
		require.NoError(t, replica.cmd.Process.Signal(syscall.SIGKILL))
		_ = replica.cmd.Wait()
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, cmd.Wait(), out.String())
		c.requireMoved(t, out.String())

		replica = startCellReplica(t, server, c.dstURL)
		status, body := replica.do(http.MethodGet, "/dataSets/"+c.datasetID, "")
		require.Equal(t, http.StatusOK, status, "the target serves the moved dataset: %s", body)
		status, body = replica.ingest(c, "after")
		require.Equal(t, http.StatusOK, status, "the target takes the org's writes: %s", body)
		require.Equal(t, c.rows+1, c.count(t, c.dst, `SELECT count(*) FROM lake_rows WHERE dataset_id IN (SELECT id FROM datasets WHERE org_id = $1)`))
	})
}

// waitBlockedN waits until at least n sessions of db other than the test's wait for a lock of the kind.
func waitBlockedN(t *testing.T, db *postgres.DB, kind string, n int) {
	t.Helper()
	testwait.For(t, time.Minute, func() (bool, string) {
		var waiting int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = $1`, kind).Scan(&waiting))
		return waiting >= n, fmt.Sprintf("%d sessions wait for a lock of kind %s, not %d", waiting, kind, n)
	})
}
