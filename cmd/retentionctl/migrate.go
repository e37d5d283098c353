package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/acme/retention/postgres"
)

func openDB(ctx context.Context, env getenv) (*postgres.DB, error) {
	url := env("DATABASE_URL")
	if url == "" {
		return nil, errors.New("DATABASE_URL is required (a postgres:// URL)")
	}
	return postgres.Open(ctx, url, nil)
}

func runMigrate(ctx context.Context, args []string, env getenv, out io.Writer) error {
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
	db, err := openDB(ctx, env)
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
