// Command pgrun runs a command against a throwaway PostgreSQL cluster.
//
//	go run ./internal/tools/pgrun [-keep] [-var NAME] -- COMMAND ARGS...
//
// It starts a private cluster (see internal/pgcluster) in a fresh folder
// under the temporary folder, tuned for speed over durability, creates the
// database retention_test, runs COMMAND with NAME (default
// TEST_DATABASE_URL) set to that database's URL, then stops the cluster,
// removes its folder and exits with COMMAND's exit code. That lets
// `make test` run the database tests on any machine with PostgreSQL
// installed, without a configured server.
//
// When NAME is already set, the caller has a database of their own, so
// pgrun just runs COMMAND.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/acme/retention/internal/pgcluster"
)

// database is the name the test suites expect in TEST_DATABASE_URL.
const database = "retention_test"

// fastSettings trade durability for speed: a throwaway cluster is deleted
// after the run, so a crash can lose nothing of value. max_connections
// leaves room for parallel test packages each holding a pool, and
// shared_buffers keeps a test run's data in memory.
var fastSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "300",
	"shared_buffers":     "256MB",
}

func main() {
	os.Exit(run())
}

func run() int {
	keep := flag.Bool("keep", false, "keep the cluster's folder (with server.log) after the command ends")
	varName := flag.String("var", "TEST_DATABASE_URL", "environment variable that receives the database URL")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: pgrun [-keep] [-var NAME] -- COMMAND ARGS...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		return 2
	}

	// Catch SIGINT/SIGTERM from here on, so that neither interrupts the
	// cleanup below: the cluster must be stopped and its folder removed
	// whatever happens to the command.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)

	if os.Getenv(*varName) != "" {
		return runCommand(args, nil, signals)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var mu sync.Mutex // orders a signal's cancel against the end of the start
	started := false
	var startSignal os.Signal // the signal that canceled the start, if any
	startDone := make(chan struct{})
	go func() {
		// A signal while the cluster starts cancels the start; one that
		// arrives after is put back for runCommand to pass on.
		select {
		case sig := <-signals:
			mu.Lock()
			defer mu.Unlock()
			if started {
				signals <- sig
				return
			}
			startSignal = sig
			cancel(fmt.Errorf("%v while starting PostgreSQL", sig))
		case <-startDone:
		}
	}()

	folder, err := os.MkdirTemp("", "pgrun-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgrun: %v\n", err)
		return 1
	}
	begin := time.Now()
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: folder, Logger: logger, Settings: fastSettings})
	if err == nil {
		err = cluster.CreateDatabase(ctx, database)
	}
	mu.Lock()
	started = true
	cause := context.Cause(ctx)
	interrupted := startSignal
	mu.Unlock()
	close(startDone)
	if err != nil || cause != nil {
		if cause != nil && errors.Is(err, context.Canceled) {
			err = nil // the cause says it better
		}
		fmt.Fprintf(os.Stderr, "pgrun: %v\n", errors.Join(cause, err))
		cleanup(cluster, folder, *keep)
		if sig, ok := interrupted.(syscall.Signal); ok {
			return 128 + int(sig) // as if the command had been killed by it
		}
		return 1
	}
	url := cluster.URL(database)
	fmt.Fprintf(os.Stderr, "pgrun: throwaway PostgreSQL on 127.0.0.1:%d, data in %s (ready in %v); %s=%s\n",
		cluster.Port(), folder, time.Since(begin).Round(time.Millisecond), *varName, url)

	code := runCommand(args, []string{*varName + "=" + url}, signals)
	cleanup(cluster, folder, *keep)
	return code
}

// runCommand runs args with the extra environment and returns its exit
// code, 128+N when a signal N killed it (as shells report it). Signals sent
// to pgrun alone (kill PID) are passed on; on a terminal's Ctrl-C the
// command gets its own SIGINT from the terminal as well.
func runCommand(args, extraEnv []string, signals <-chan os.Signal) int {
	// A context that is never canceled: the command ends on its own or
	// through the signals passed on below, never by pgrun killing it.
	cmd := exec.CommandContext(context.Background(), args[0], args[1:]...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdin = os.Stdin
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pgrun: %v\n", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return exitCode(err)
		}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		fmt.Fprintf(os.Stderr, "pgrun: %v\n", err)
		return 1
	}
	if status, ok := exitErr.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int(status.Signal())
	}
	return exitErr.ExitCode()
}

// cleanup stops the cluster and removes its folder. It runs on a fresh
// context so that a canceled start still gets cleaned up.
func cleanup(cluster *pgcluster.Cluster, folder string, keep bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cluster != nil {
		if err := cluster.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgrun: %v\n", err)
			keep = true // a server may still use the folder
		}
	}
	if keep {
		fmt.Fprintf(os.Stderr, "pgrun: kept %s\n", folder)
		return
	}
	if err := os.RemoveAll(folder); err != nil {
		fmt.Fprintf(os.Stderr, "pgrun: remove %s: %v\n", folder, err)
	}
}
