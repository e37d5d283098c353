package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/pgcluster"
)

// devCheckout starts the dev cluster of a new checkout as `make run` does, and returns the checkout.
func devCheckout(t *testing.T) (string, *pgcluster.Dev) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real PostgreSQL server")
	}
	checkout := t.TempDir()
	// As root, PostgreSQL runs as the postgres OS user: let it reach the checkout, so that the cluster lives in
	// checkout/.data, which the test removes, and not in /var/tmp.
	require.NoError(t, os.Chmod(filepath.Dir(checkout), 0o755))
	dir, _, err := pgcluster.DevDataDir(checkout)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(checkout, ".data", "postgres"), dir)
	dev, err := pgcluster.StartDev(context.Background(), dir, "retention", slog.New(slog.NewTextHandler(t.Output(), nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Stop(context.Background()) })
	return checkout, dev
}

// With `make run` running, the CLI's database commands work from a second shell with DATABASE_URL unset: they read
// the URL it recorded, and say where they got it.
func TestDatabaseOfMakeRun(t *testing.T) {
	t.Parallel()
	checkout, dev := devCheckout(t)
	env := map[string]string{"RETENTION_CHECKOUT": checkout}

	out, errOut, err := ctlBoth(t, env, "migrate", "up")
	require.NoError(t, err, "stderr: %s", errOut)
	require.Regexp(t, `^applied \d+ migration\(s\)\n$`, out)
	require.Equal(t, "retentionctl: DATABASE_URL is unset: using the database of `make run` ("+dev.URL()+", from "+
		filepath.Join(checkout, ".data", pgcluster.URLFileName)+")\n", errOut)

	out, _, err = ctlBoth(t, env, "policy", "show", "-org", "O")
	require.NoError(t, err)
	require.Equal(t, builtinRows(), policyRows(t, out))

	// DATABASE_URL, when set, wins, and nothing is said.
	env["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"
	_, errOut, err = ctlBoth(t, env, "migrate", "status")
	require.Error(t, err)
	require.Empty(t, errOut)
}

// `retentionctl dev stop` (make stop) leaves alone a cluster whose retentiond still runs, and says when there is
// nothing to stop. Stopping one left by a killed retentiond is pgcluster's TestStopDevAfterCrash.
func TestDevStop(t *testing.T) {
	t.Parallel()
	checkout, _ := devCheckout(t)
	_, err := ctl(t, map[string]string{"RETENTION_CHECKOUT": checkout}, "dev", "stop")
	require.ErrorContains(t, err, "is running with the PostgreSQL in")
	require.ErrorContains(t, err, "Ctrl-C")

	empty := t.TempDir()
	out := mustCtl(t, map[string]string{"RETENTION_CHECKOUT": empty}, "dev", "stop")
	require.True(t, strings.HasSuffix(out, "is not running: nothing to stop\n"), "%q", out)

	_, err = ctl(t, map[string]string{}, "dev", "start")
	require.ErrorIs(t, err, errUsage)
}
