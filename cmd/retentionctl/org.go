package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/acme/retention/internal/cells"
	"github.com/acme/retention/postgres"
)

const orgUsage = `usage: retentionctl org move -org ORG -to TARGET_DATABASE_URL -to-cell CELL [-from SOURCE_DATABASE_URL]
       [-cells-map PATH] [-cells-socket PATH] [-run-wait DURATION] [-drain-wait DURATION]
       retentionctl org move -abort -org ORG -to TARGET_DATABASE_URL [-from SOURCE_DATABASE_URL]

Moves every row of ORG from the source cell's database (-from, else DATABASE_URL) to the target cell's (-to), and
its route in the proxy to CELL (-cells-map and -cells-socket, else CELLS_MAP and CELLS_SOCKET: the map file and
admin socket of deploy/cells/haproxy.cfg). The org is copied while its writes still pass; its writes then answer
503 with Retry-After from the fence until the route switches, while what changed since the copy is caught up and
verified; reads go on. Before the org leaves the source, the requests the proxy had forwarded there end (at most
-drain-wait). Run it again after any failure or kill: it resumes where it stopped.

With -abort, it ends the org's move before it is verified: the target's copy is removed, the fence lifted and
the abort recorded in the org's audit log; the source has held the org throughout.`

// runOrg is `retentionctl org move`.
func runOrg(ctx context.Context, args []string, env getenv, out, errOut io.Writer) error {
	if len(args) == 0 || args[0] != "move" {
		fmt.Fprintln(errOut, orgUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("org move", flag.ContinueOnError)
	fs.SetOutput(errOut)
	org := fs.String("org", "", "the org to move (required)")
	from := fs.String("from", "", "the source cell's database URL; default DATABASE_URL")
	to := fs.String("to", "", "the target cell's database URL (required)")
	cell := fs.String("to-cell", "", "the target cell's name in the proxy (required)")
	mapFile := fs.String("cells-map", env("CELLS_MAP"), "the proxy's org -> cell map file")
	socket := fs.String("cells-socket", env("CELLS_SOCKET"), "the proxy's admin socket")
	runWait := fs.Duration("run-wait", 30*time.Minute, "how long to wait for the runs in flight over the org")
	drainWait := fs.Duration("drain-wait", 30*time.Second, "how long to wait, after the switch, for the requests in flight to the source")
	abort := fs.Bool("abort", false, "end the org's move before its verification: remove the target's copy, lift the fence")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if *abort {
		return abortMove(ctx, *org, *from, *to, env, out, errOut)
	}
	switch {
	case *org == "":
		return errors.New("-org is required")
	case *to == "" || *cell == "":
		return errors.New("-to and -to-cell are required")
	case *mapFile == "" || *socket == "":
		return errors.New("-cells-map and -cells-socket (or CELLS_MAP and CELLS_SOCKET) are required: the move switches the org's route")
	case *runWait <= 0 || *drainWait <= 0:
		return errors.New("-run-wait and -drain-wait must be positive durations")
	}
	// The proxy names its map by the absolute path it loaded, and the runtime API takes no other name for it.
	absMap, err := filepath.Abs(*mapFile)
	if err != nil {
		return fmt.Errorf("-cells-map %s: %w", *mapFile, err)
	}
	source, target, err := openCells(ctx, *from, *to, env, errOut)
	if err != nil {
		return err
	}
	defer source.Close()
	defer target.Close()
	move := &postgres.OrgMove{Org: *org, Source: source, Target: target, TargetCell: *cell,
		Router: &cells.Router{MapFile: absMap, Socket: *socket}, RunWait: *runWait, DrainWait: *drainWait,
		Logf: func(format string, args ...any) { fmt.Fprintf(errOut, "retentionctl: "+format+"\n", args...) }}
	started := time.Now()
	rep, err := move.Run(ctx)
	if err != nil {
		return err
	}
	printMove(out, *org, *cell, rep, time.Since(started))
	return nil
}

// abortMove is `retentionctl org move -abort`.
func abortMove(ctx context.Context, org, from, to string, env getenv, out, errOut io.Writer) error {
	if org == "" || to == "" {
		return errors.New("-org and -to are required")
	}
	source, target, err := openCells(ctx, from, to, env, errOut)
	if err != nil {
		return err
	}
	defer source.Close()
	defer target.Close()
	rep, err := (&postgres.OrgMove{Org: org, Source: source, Target: target}).Abort(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "aborted move %s of org %s: its writes pass again on the source cell, which holds it whole\n", rep.ID, org)
	for _, table := range slices.Sorted(maps.Keys(rep.Removed)) {
		fmt.Fprintf(out, "  %-28s %d rows removed from the target\n", table, rep.Removed[table])
	}
	return nil
}

func openCells(ctx context.Context, from, to string, env getenv, errOut io.Writer) (source, target *postgres.DB, err error) {
	if from == "" {
		if from, err = databaseURL(env, errOut); err != nil {
			return nil, nil, err
		}
	}
	if source, err = postgres.Open(ctx, from, nil); err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	if target, err = postgres.Open(ctx, to, nil); err != nil {
		source.Close()
		return nil, nil, fmt.Errorf("target: %w", err)
	}
	return source, target, nil
}

func printMove(out io.Writer, org, cell string, rep *postgres.MoveReport, took time.Duration) {
	fmt.Fprintf(out, "moved org %s to cell %s (move %s) in %s", org, cell, rep.ID, took.Round(time.Millisecond))
	if rep.Fenced > 0 {
		fmt.Fprintf(out, "; writes refused for %s", rep.Fenced.Round(time.Millisecond))
	}
	fmt.Fprintln(out)
	for _, table := range slices.Sorted(maps.Keys(rep.Copied)) {
		fmt.Fprintf(out, "  %-28s %d rows copied\n", table, rep.Copied[table])
	}
	if rep.Chunks > 0 || rep.ChunksChanged > 0 {
		fmt.Fprintf(out, "caught up while fenced: %d of %d chunks of rows changed since the copy; %d lake rows, %d profile rows and %d audit events written again\n",
			rep.ChunksChanged, rep.Chunks, rep.CaughtUp["lake_rows"], rep.CaughtUp["profile_rows"], rep.CaughtUp["audit_events"])
	}
}
