package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/acme/retention/postgres"
)

// openDB opens DATABASE_URL, or, when it is unset, the database of the `make run` of this checkout (dev.go).
func openDB(ctx context.Context, env getenv, errOut io.Writer) (*postgres.DB, error) {
	url, err := databaseURL(env, errOut)
	if err != nil {
		return nil, err
	}
	return postgres.Open(ctx, url, nil)
}

func runMigrate(ctx context.Context, args []string, env getenv, out, errOut io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(out, "usage: retentionctl migrate up | down [-steps N] | status")
		return errUsage
	}
	fs := flag.NewFlagSet("migrate "+args[0], flag.ContinueOnError)
	steps := fs.Int("steps", 1, "with down: how many migrations to revert, newest first")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if args[0] != "up" && args[0] != "down" && args[0] != "status" {
		fmt.Fprintf(out, "unknown migrate command %q: use up, down or status\n", args[0])
		return errUsage
	}
	if *steps < 1 {
		return fmt.Errorf("-steps must be at least 1, got %d", *steps)
	}
	db, err := openDB(ctx, env, errOut)
	if err != nil {
		return err
	}
	defer db.Close()
	switch args[0] {
	case "up":
		n, err := postgres.MigrateUp(ctx, db.Pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "applied %d migration(s)\n", n)
	case "down":
		n, err := postgres.MigrateDown(ctx, db.Pool, *steps)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "reverted %d migration(s)\n", n)
	case "status":
		status, err := postgres.MigrationStatus(ctx, db.Pool)
		if err != nil {
			return err
		}
		for _, m := range status {
			state := "pending"
			if m.Applied {
				state = "applied"
			}
			fmt.Fprintf(out, "%04d_%-30s %s\n", m.Version, m.Name, state)
		}
	}
	return nil
}
