// Command retentionbench runs the benchmark scenarios of docs/benchmarks.md (`make bench`, `make bench-smoke`): it
// builds the service, starts its own PostgreSQL, runs each scenario against its baseline and prints one table. This
// file only wires flags, signals and output to internal/bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/retention/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	cfg, err := bench.ParseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retentionbench:", err)
		return 2
	}
	cfg.Progress = os.Stderr
	report, runErr := bench.Run(ctx, cfg)
	if report != nil {
		fmt.Println()
		if err := report.WriteText(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "retentionbench:", err)
			return 1
		}
		fmt.Printf("\nharness wall time: %s\n", report.Elapsed.Round(1e9))
		if cfg.WriteDoc {
			if err := report.WriteDoc(cfg.DocPath); err != nil {
				fmt.Fprintln(os.Stderr, "retentionbench:", err)
				return 1
			}
			fmt.Fprintf(os.Stderr, "wrote %s\n", cfg.DocPath)
		}
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "retentionbench:", runErr)
		return 1
	}
	return 0
}
