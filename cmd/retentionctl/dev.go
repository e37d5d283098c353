package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/acme/retention/internal/pgcluster"
)

// devDataDir is the data folder of the `make run` cluster of the checkout: RETENTION_CHECKOUT, else the checkout
// holding the current folder.
func devDataDir(env getenv) (string, error) {
	checkout := env("RETENTION_CHECKOUT")
	if checkout == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("find the checkout: %w", err)
		}
		checkout = pgcluster.DevCheckout(wd)
	}
	dir, _, err := pgcluster.DevDataDir(checkout)
	return dir, err
}

// databaseURL is DATABASE_URL or, when it is unset, the URL `make run` recorded for its database in this checkout,
// read from the file it writes beside the data; the note on errOut says where it came from, so that nothing is
// magic.
func databaseURL(env getenv, errOut io.Writer) (string, error) {
	if url := env("DATABASE_URL"); url != "" {
		return url, nil
	}
	dir, err := devDataDir(env)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL is required (a postgres:// URL): %w", err)
	}
	url, path, err := pgcluster.DevURL(dir)
	if errors.Is(err, pgcluster.ErrNoDevCluster) {
		return "", fmt.Errorf("DATABASE_URL is required (a postgres:// URL), or a `make run` running in this checkout: %w", err)
	}
	if err != nil {
		return "", err
	}
	fmt.Fprintf(errOut, "retentionctl: DATABASE_URL is unset: using the database of `make run` (%s, from %s)\n", url, path)
	return url, nil
}

const devUsage = "usage: retentionctl dev stop: stop the PostgreSQL of `make run` of this checkout that a killed retentiond left running"

func runDev(ctx context.Context, args []string, env getenv, out io.Writer) error {
	if len(args) != 1 || args[0] != "stop" {
		fmt.Fprintln(out, devUsage)
		return errUsage
	}
	dir, err := devDataDir(env)
	if err != nil {
		return err
	}
	stopped, err := pgcluster.StopDev(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if stopped {
		fmt.Fprintf(out, "stopped PostgreSQL in %s\n", dir)
	} else {
		fmt.Fprintf(out, "PostgreSQL in %s is not running: nothing to stop\n", dir)
	}
	return nil
}
