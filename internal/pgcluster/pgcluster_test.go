package pgcluster

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/testwait"
)

// query runs sql through the cluster's own psql against databaseURL and
// returns its unaligned output, as a client of the URL would see it.
func query(t *testing.T, c *Cluster, databaseURL, sql string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir(), "psql"), "-X", "-tAc", sql, databaseURL).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real PostgreSQL server")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Logf("cluster in %s on port %d ready after %v", c.DataDir(), c.Port(), time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() {
		// Never leave a server behind, whatever the test did.
		_ = c.Stop(context.Background())
	})
	return c
}

func TestStartCreateStopRestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pg")

	c := startCluster(t, Config{DataDir: dir})
	require.True(t, c.Owned())
	require.NotZero(t, c.Port())
	require.Equal(t, dir, c.DataDir())

	out, err := query(t, c, c.URL("postgres"), "select 1")
	require.NoError(t, err, out)
	require.Equal(t, "1", out)

	ctx := t.Context()
	const db = `retention "odd" name`
	require.NoError(t, c.CreateDatabase(ctx, db))
	require.NoError(t, c.CreateDatabase(ctx, db), "creating an existing database is a no-op")
	out, err = query(t, c, c.URL(db), "select current_database()")
	require.NoError(t, err, out)
	require.Equal(t, db, out)

	// A second Start on the running folder adopts the server and must
	// not stop it.
	again := startCluster(t, Config{DataDir: dir})
	require.False(t, again.Owned())
	require.Equal(t, c.Port(), again.Port())
	require.NoError(t, again.Stop(ctx))
	out, err = query(t, c, c.URL(db), "select 1")
	require.NoError(t, err, "Stop on a reused cluster stopped the server: %s", out)

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "second Stop")
	_, err = query(t, c, c.URL("postgres"), "select 1")
	require.Error(t, err, "server still answers after Stop")

	// Starting on the same folder keeps the data.
	restarted := startCluster(t, Config{DataDir: dir, Settings: map[string]string{"fsync": "off", "application_name": "it's quoted"}})
	require.True(t, restarted.Owned())
	out, err = query(t, restarted, restarted.URL(db), "select current_database()")
	require.NoError(t, err, out)
	require.Equal(t, db, out)
	out, err = query(t, restarted, restarted.URL("postgres"), "show fsync")
	require.NoError(t, err, out)
	require.Equal(t, "off", out, "Settings are passed to the server")
	require.NoError(t, restarted.Stop(ctx))
}

func TestStartAfterKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := startCluster(t, Config{DataDir: dir, Settings: map[string]string{"fsync": "off"}})

	pf, running := runningPID(dir)
	require.True(t, running)
	require.Equal(t, c.Port(), pf.port)
	require.NoError(t, syscall.Kill(pf.pid, syscall.SIGKILL))
	testwait.For(t, 10*time.Second, func() (bool, string) {
		_, running := runningPID(dir)
		return !running, "the killed postmaster still runs"
	})
	require.FileExists(t, filepath.Join(dir, "postmaster.pid"), "the stale lock file stays behind")

	c2 := startCluster(t, Config{DataDir: dir, Settings: map[string]string{"fsync": "off"}})
	require.True(t, c2.Owned())
	out, err := query(t, c2, c2.URL("postgres"), "select 1")
	require.NoError(t, err, out)
	require.NoError(t, c2.Stop(t.Context()))
}

func TestStartRefusesManagedSettings(t *testing.T) {
	t.Parallel()
	_, err := Start(t.Context(), Config{DataDir: t.TempDir(), Settings: map[string]string{"port": "5432"}})
	require.ErrorContains(t, err, "managed by pgcluster")
	_, err = Start(t.Context(), Config{DataDir: t.TempDir(), Settings: map[string]string{"x; rm": "1"}})
	require.ErrorContains(t, err, "bad setting name")
}

func TestStartRefusesForeignFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))
	_, err := Start(t.Context(), Config{DataDir: dir})
	require.ErrorContains(t, err, "neither empty nor a PostgreSQL cluster")
}

func TestURL(t *testing.T) {
	t.Parallel()
	c := &Cluster{port: 54321}
	require.Equal(t, "postgres://postgres@127.0.0.1:54321/retention_test?sslmode=disable", c.URL("retention_test"))
	require.Equal(t, "postgres://postgres@127.0.0.1:54321/a%20b?sslmode=disable", c.URL("a b"))
}

func TestDevDataDir(t *testing.T) {
	t.Parallel()
	// t.TempDir() makes /tmp/TestDevDataDirNNN (0700) and a folder in it:
	// closed to the postgres user until the 0700 folder is opened.
	checkout := t.TempDir()
	dir, why, err := DevDataDir(checkout)
	require.NoError(t, err)
	require.NotEmpty(t, why)
	t.Log(why)
	local := filepath.Join(checkout, ".data", "postgres")
	if os.Geteuid() != 0 {
		require.Equal(t, local, dir)
		return
	}
	require.Regexp(t, `^/var/tmp/retentiond-[0-9a-f]{12}/postgres$`, dir)
	again, _, err := DevDataDir(checkout + "/.")
	require.NoError(t, err)
	require.Equal(t, dir, again, "the same checkout keeps the same folder")

	require.NoError(t, os.Chmod(filepath.Dir(checkout), 0o755))
	dir, _, err = DevDataDir(checkout)
	require.NoError(t, err)
	require.Equal(t, local, dir)
}
