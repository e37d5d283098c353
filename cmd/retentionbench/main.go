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
	"strings"
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
	if cfg.CurvesDir != "" {
		return curves(ctx, cfg)
	}
	report, runErr := bench.Run(ctx, cfg)
	if report != nil {
		fmt.Println()
		if err := report.WriteText(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "retentionbench:", err)
			return 1
		}
		fmt.Printf("\nharness wall time: %s\n", report.Elapsed.Round(1e9))
		if cfg.JSONPath != "" {
			if err := report.WriteJSON(cfg.JSONPath); err != nil {
				fmt.Fprintln(os.Stderr, "retentionbench:", err)
				return 1
			}
		}
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

// curves measures the cost curves, each point one invocation of this binary with the flags given besides -curves.
func curves(ctx context.Context, cfg bench.Config) int {
	exe, err := os.Executable()
	if err == nil {
		err = bench.RunCurves(ctx, exe, cfg.CurvesDir, cfg.CurvesPNG, cfg.CurvesMaxSize, curveFlags(os.Args[1:]), os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retentionbench:", err)
		return 1
	}
	return 0
}

// curveFlags are the flags of this invocation that each point takes too: all but the curves' own.
func curveFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if strings.HasPrefix(name, "curves") {
			if !hasValue && i+1 < len(args) {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}
