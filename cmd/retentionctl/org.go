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
       [-cells-map PATH] [-cells-socket PATH] [-run-wait DURATION]

Moves every row of ORG from the source cell's database (-from, else DATABASE_URL) to the target cell's (-to), and
its route in the proxy to CELL (-cells-map and -cells-socket, else CELLS_MAP and CELLS_SOCKET: the map file and
admin socket of deploy/cells/haproxy.cfg). Writes of the org answer 503 with Retry-After from the fence to the end;
reads go on. Run it again after any failure or kill: it resumes where it stopped.`

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
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	switch {
	case *org == "":
		return errors.New("-org is required")
	case *to == "" || *cell == "":
		return errors.New("-to and -to-cell are required")
	case *mapFile == "" || *socket == "":
		return errors.New("-cells-map and -cells-socket (or CELLS_MAP and CELLS_SOCKET) are required: the move switches the org's route")
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
		Router: &cells.Router{MapFile: absMap, Socket: *socket}, RunWait: *runWait,
		Logf: func(format string, args ...any) { fmt.Fprintf(errOut, "retentionctl: "+format+"\n", args...) }}
	started := time.Now()
	rep, err := move.Run(ctx)
	if err != nil {
		return err
	}
	printMove(out, *org, *cell, rep, time.Since(started))
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
}
