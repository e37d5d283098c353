// Command retentionctl is the operator CLI: dev tokens, migrations, TTL policies and the version. This file only
// parses arguments and wires packages together.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(exitCode()) }

// exitCode runs the CLI and returns its exit status, so that deferred cleanups run before main exits.
func exitCode() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if errors.Is(err, errUsage) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retentionctl:", err)
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

const usage = `retentionctl: operate the row-retention service

Commands:
  token     mint a development token signed with AUTH_HS256_SECRET (or the dev secret)
  migrate   up | down [-steps N] | status: manage the schema of DATABASE_URL
  policy    show | set: the TTL limits of an org
  load      bulk-load NDJSON files, or generated rows, into datasets
  runs      start [-dataset ID] [-dry-run] [-wait] | list | show ID: retention runs, through the API (RETENTION_URL)
  expirations list | create -dataset ID -expiry DATE -name NAME | cancel ID: dataset expirations (scheduled
            deletions of whole datasets), through the API (RETENTION_URL)
  rows      explain DATASET_ID _ID: why a row is still stored and when a run deletes it, through the API
            (RETENTION_URL)
  workorders create -dataset ID|ALL -name NAME -identity NS:VALUE ... | list | show ID | hash NS VALUE: record-delete
            work orders (erase a person's rows by identity), through the API (RETENTION_URL)
  audit     list | export | verify: the audit log, through the API (RETENTION_URL), with Adobe's filters as flags
  org       move -org ORG -to URL -to-cell CELL: move an org's rows, audit log and route to another cell
  dev       stop: stop the PostgreSQL of ` + "`make run`" + ` that a killed retentiond left running (make stop)
  version   print the build's version

migrate, policy, load and org move (its source) use DATABASE_URL; when it is unset, they use the database of the ` + "`make run`" + `
running in this checkout (RETENTION_CHECKOUT names another), and say so on stderr.

Run 'retentionctl COMMAND -h' for a command's flags.
`

type getenv func(string) string

// run is the whole CLI: results go to out, progress, notes and usage to errOut.
func run(ctx context.Context, args []string, env getenv, out, errOut io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(errOut, usage)
		return errUsage
	}
	switch args[0] {
	case "token":
		return runToken(args[1:], env, out)
	case "migrate":
		return runMigrate(ctx, args[1:], env, out, errOut)
	case "policy":
		return runPolicy(ctx, args[1:], env, out, errOut)
	case "load":
		return runLoad(ctx, args[1:], env, os.Stdin, out, errOut)
	case "runs":
		return runRuns(ctx, args[1:], env, out, errOut)
	case "rows":
		return runRows(ctx, args[1:], env, out)
	case "audit":
		return runAudit(ctx, args[1:], env, out)
	case "expirations":
		return runExpirations(ctx, args[1:], env, out)
	case "org":
		return runOrg(ctx, args[1:], env, out, errOut)
	case "workorders":
		return runWorkOrders(ctx, args[1:], env, out)
	case "dev":
		return runDev(ctx, args[1:], env, out)
	case "version":
		return runVersion(out)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	fmt.Fprintf(errOut, "unknown command %q\n\n%s", args[0], usage)
	return errUsage
}
