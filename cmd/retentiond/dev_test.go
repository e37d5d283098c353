package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/pgcluster"
)

// devRun is a `retentiond --dev` process with no DATABASE_URL, as `make run` starts it, its output (stdout and
// stderr, as `make run 2>&1 | tee log` has them) read through a pipe.
type devRun struct {
	cmd    *exec.Cmd
	out    *os.File        // the pipe's reading end
	stdout strings.Builder // what it printed up to its banner, log lines left out
	dialed error           // dialling its address the moment the banner was read
	copied chan struct{}   // closed once the rest of the output has been read
}

// startDevRun starts bin --dev on addr for checkout and reads its output until the banner: then it dials addr at
// once, which must work, since the banner is printed only once the port is bound.
func startDevRun(t *testing.T, bin, checkout, addr string) *devRun {
	t.Helper()
	cmd := exec.Command(bin, "--dev", "-addr", addr)
	cmd.Env = append(os.Environ(), "RETENTION_CHECKOUT="+checkout, "DATABASE_URL=")
	out, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	require.NoError(t, w.Close())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = out.Close()
	})
	r := &devRun{cmd: cmd, out: out, dialed: io.ErrUnexpectedEOF, copied: make(chan struct{})}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "{") {
			continue // a log line
		}
		r.stdout.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "retentiond is serving at ") {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = conn.Close()
			}
			r.dialed = err
			break
		}
	}
	// Read the rest in the background, so that the process never blocks on a full pipe.
	go func() {
		defer close(r.copied)
		_, _ = io.Copy(io.Discard, out)
	}()
	return r
}

// The newcomer's `make run`: it says once where the data is, prints its banner once it listens, with the demo
// datasets and the database URL for a second shell; killed with SIGKILL, it leaves PostgreSQL running, and the
// next `make run` takes it over and stops it when it stops.
func TestMakeRunAfterKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a real PostgreSQL server")
	}
	bin := filepath.Join(t.TempDir(), "retentiond")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	checkout := t.TempDir()
	// As root, PostgreSQL runs as the postgres OS user: let it reach the checkout, so that the cluster lives in
	// checkout/.data, which the test removes, and not in /var/tmp.
	require.NoError(t, os.Chmod(filepath.Dir(checkout), 0o755))
	dataDir := filepath.Join(checkout, ".data", "postgres")
	t.Cleanup(func() { _, _ = pgcluster.StopDev(context.Background(), dataDir, nil) })

	first := startDevRun(t, bin, checkout, freeAddr(t))
	require.NoError(t, first.dialed, "the banner comes once the port is bound:\n%s", first.stdout.String())
	out := first.stdout.String()
	require.Equal(t, 1, strings.Count(out, dataDir), "the data folder is named once:\n%s", out)
	require.True(t, strings.HasPrefix(out, "PostgreSQL data for this checkout is in "+dataDir), "%s", out)
	require.Contains(t, out, "with 4 demo datasets in org ACME00000000000000000001@AdobeOrg.")
	url, urlFile, err := pgcluster.DevURL(dataDir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(checkout, ".data", pgcluster.URLFileName), urlFile)

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()
	again, _, err := pgcluster.DevURL(dataDir)
	require.NoError(t, err, "PostgreSQL outlives a killed retentiond")
	require.Equal(t, url, again)

	second := startDevRun(t, bin, checkout, freeAddr(t))
	require.NoError(t, second.dialed)
	require.Contains(t, second.stdout.String(), "took it over and stops it on exit")
	require.Contains(t, second.stdout.String(), "with 4 demo datasets", "a second run adds no demo datasets")
	// Ctrl-C on `make run 2>&1 | tee log` ends tee too: retentiond's output goes nowhere from then on, and its
	// shutdown must go on all the same, up to stopping PostgreSQL.
	require.NoError(t, second.out.Close())
	<-second.copied
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, second.cmd.Wait(), "Ctrl-C is a clean exit, even with nobody reading the output")
	_, _, err = pgcluster.DevURL(dataDir)
	require.ErrorIs(t, err, pgcluster.ErrNoDevCluster, "the taken-over PostgreSQL stopped with retentiond")
}
