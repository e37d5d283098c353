package pgcluster

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// devHelperVar names the data folder of the dev cluster that the test binary, run again as a child process by
// crashedOwner, starts in the role of a retentiond about to be killed.
const devHelperVar = "PGCLUSTER_DEV_HELPER_DIR"

// TestMain runs the tests, or, in crashedOwner's child process, only the owner's part.
func TestMain(m *testing.M) {
	if dir := os.Getenv(devHelperVar); dir != "" {
		os.Exit(devOwner(dir))
	}
	os.Exit(m.Run())
}

// devOwner starts a dev cluster as `make run` does, says so, and waits to be killed.
func devOwner(dir string) int {
	d, err := StartDev(context.Background(), dir, "retention", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev owner:", err)
		return 1
	}
	fmt.Printf("ready %d %s\n", os.Getpid(), d.URL())
	time.Sleep(10 * time.Minute) // until killed; bounded, should the test that started it die first
	return 0
}

// crashedOwner simulates `make run` killed with SIGKILL: a process starts the dev cluster of dataDir and dies
// without stopping it. It returns the URL the process recorded.
func crashedOwner(t *testing.T, dataDir string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real PostgreSQL server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), devHelperVar+"="+dataDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// Whatever the test did, leave no server behind.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_, _ = StopDev(context.Background(), dataDir, nil)
	})
	var pid int
	var url string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
			pidText, u, _ := strings.Cut(rest, " ")
			pid, url = mustAtoi(t, pidText), u
			break
		}
	}
	require.NotEmpty(t, url, "the owner never said it was ready")
	require.Equal(t, cmd.Process.Pid, pid)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	_, running := runningPID(dataDir)
	require.True(t, running, "the server outlives its owner, as after kill -9 of retentiond")
	return url
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// After a crash, the next start finds the cluster running with nobody owning it, takes it over and stops it when it
// stops; while it runs, another start only uses the cluster, and StopDev refuses to pull it from under it.
func TestDevTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "state", "postgres")
	url := crashedOwner(t, dataDir)
	found, path, err := DevURL(dataDir)
	require.NoError(t, err, "the URL stays readable while the orphaned server runs")
	require.Equal(t, url, found)
	require.Equal(t, filepath.Join(filepath.Dir(dataDir), URLFileName), path)

	ctx := t.Context()
	d, err := StartDev(ctx, dataDir, "retention", testLogger(t))
	require.NoError(t, err)
	require.True(t, d.TookOver())
	require.True(t, d.Owned(), "the orphan is this process's to stop")
	require.Equal(t, url, d.URL(), "same server, same port")
	st, err := os.Stat(d.URLFile())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the URL file is its owner's only")

	second, err := StartDev(ctx, dataDir, "retention", testLogger(t))
	require.NoError(t, err)
	require.False(t, second.Owned(), "a live owner keeps the cluster")
	require.False(t, second.TookOver())
	require.NoError(t, second.Stop(ctx))
	_, running := runningPID(dataDir)
	require.True(t, running, "a user that does not own the cluster leaves it running")

	_, err = StopDev(ctx, dataDir, nil)
	require.ErrorContains(t, err, fmt.Sprintf("retentiond (pid %d) is running", os.Getpid()))

	require.NoError(t, d.Stop(ctx))
	_, running = runningPID(dataDir)
	require.False(t, running, "the taken-over server stops with its new owner")
	require.NoFileExists(t, d.URLFile())
	_, _, err = DevURL(dataDir)
	require.ErrorIs(t, err, ErrNoDevCluster)
}

// `make stop` stops a cluster left running by a crash, and then has nothing to do.
func TestStopDevAfterCrash(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "state", "postgres")
	crashedOwner(t, dataDir)

	stopped, err := StopDev(t.Context(), dataDir, testLogger(t))
	require.NoError(t, err)
	require.True(t, stopped)
	_, running := runningPID(dataDir)
	require.False(t, running)
	require.NoFileExists(t, filepath.Join(filepath.Dir(dataDir), URLFileName))
	_, _, err = DevURL(dataDir)
	require.ErrorIs(t, err, ErrNoDevCluster)

	stopped, err = StopDev(t.Context(), dataDir, nil)
	require.NoError(t, err)
	require.False(t, stopped, "nothing left to stop")
	stopped, err = StopDev(t.Context(), filepath.Join(t.TempDir(), "none", "postgres"), nil)
	require.NoError(t, err)
	require.False(t, stopped, "a checkout that never ran make run")
}

func TestDevCheckout(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sub := filepath.Join(root, "cmd", "retentionctl")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	require.Equal(t, sub, DevCheckout(sub), "no go.mod above: the folder itself")
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o600))
	require.Equal(t, root, DevCheckout(sub), "from a subfolder, the checkout's root")
	require.Equal(t, root, DevCheckout(root))
}

// A checkout's dev cluster listens on the same port at every start (DevPort of its data folder), so that a copied
// DATABASE_URL keeps working; when another process holds that port, it takes a free one and says so.
func TestDevPortIsStablePerCheckout(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "state", "postgres")
	want := DevPort(dataDir)
	require.Equal(t, want, DevPort(dataDir), "a function of the folder")
	require.NotEqual(t, want, DevPort(dataDir+"-other"), "another checkout, another port (for these two)")
	require.GreaterOrEqual(t, want, devPortBase)
	require.Less(t, want, devPortBase+devPortSpan)

	ctx := t.Context()
	for range 2 {
		d, err := StartDev(ctx, dataDir, "retention", testLogger(t))
		require.NoError(t, err)
		require.Equal(t, want, d.Cluster().Port(), "the checkout's port, start after start")
		require.True(t, d.UsualPort())
		require.NoError(t, d.Stop(ctx))
	}

	// Someone else holds the port: the cluster starts on another one rather than failing.
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", want))
	require.NoError(t, err)
	defer l.Close()
	d, err := StartDev(ctx, dataDir, "retention", testLogger(t))
	require.NoError(t, err)
	require.NotEqual(t, want, d.Cluster().Port())
	require.False(t, d.UsualPort())
	require.NoError(t, d.Stop(ctx))
}
