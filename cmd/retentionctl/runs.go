package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/config"
)

// apiClient calls the service's REST API as an operator: the runs commands go through the API, so they work against
// any replica and obey the same scopes as every other client.
type apiClient struct {
	base, token, org, sandbox string
	http                      *http.Client
}

// newAPIClient reads RETENTION_URL (default http://127.0.0.1:8080) and the exported token (RETENTION_TOKEN, else
// TOKEN); without one it mints one for org from AUTH_HS256_SECRET, or the development secret, with the identity of
// `retentionctl token`'s (devUser), so that the API records the CLI's work as the README's $TOKEN's.
func newAPIClient(env getenv, org, sandbox string) (*apiClient, error) {
	return newScopedAPIClient(env, org, sandbox, catalog.ScopeDatasetsRead+" "+catalog.ScopeRetentionRun+" "+catalog.ScopeAuditRead)
}

// newScopedAPIClient is newAPIClient whose minted token grants scope (space-separated scopes).
func newScopedAPIClient(env getenv, org, sandbox, scope string) (*apiClient, error) {
	c := &apiClient{base: strings.TrimSuffix(env("RETENTION_URL"), "/"), token: exportedToken(env), org: org, sandbox: sandbox,
		http: &http.Client{Timeout: 30 * time.Second}}
	if c.base == "" {
		c.base = "http://127.0.0.1:8080"
	}
	if c.token != "" {
		return c, nil
	}
	secret := env("AUTH_HS256_SECRET")
	if secret == "" {
		secret = config.DevSecret
	}
	token, err := httpapi.MintToken(secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: devUser, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, ClientID: devClient, Scope: scope,
	})
	c.token = token
	return c, err
}

func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd) //nolint:gosec // G704: the operator sets RETENTION_URL
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("x-api-key", "retentionctl")
	req.Header.Set("x-gw-ims-org-id", c.org)
	req.Header.Set("x-sandbox-name", c.sandbox)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req) //nolint:gosec // G704: the operator sets RETENTION_URL
	if err != nil {
		return fmt.Errorf("%s %s: %w (is retentiond running at RETENTION_URL?)", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var p httpapi.Problem
		if json.Unmarshal(raw, &p) == nil && p.Detail != "" {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, termSafe(p.Detail))
		}
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, termSafe(strings.TrimSpace(string(raw))))
	}
	return json.Unmarshal(raw, out)
}

// runEnded reports whether the run is over: it ended in one of the statuses a run ends in.
func runEnded(r httpapi.RunDoc) bool {
	return r.Status == "succeeded" || r.Status == "failed" || r.Status == "partial"
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runRuns(ctx context.Context, args []string, env getenv, out, errOut io.Writer) error {
	if len(args) == 0 || (args[0] != "start" && args[0] != "list" && args[0] != "show") {
		fmt.Fprintln(out, "usage: retentionctl runs start [-dataset ID]... [-dry-run] [-store S] [-wait] | list | show RUN_ID (or its first digits)")
		return errUsage
	}
	fs := flag.NewFlagSet("runs "+args[0], flag.ContinueOnError)
	org, sandbox := tenantFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	var datasets stringList
	fs.Var(&datasets, "dataset", "with start: limit the run to this dataset (repeatable)")
	dryRun := fs.Bool("dry-run", false, "with start: count what would be deleted, delete nothing")
	store := fs.String("store", string(catalog.LakeHouse), "with start: adobe_lakeHouse or adobe_unifiedProfile")
	wait := fs.Bool("wait", false, "with start: show progress until the run ends")
	limit := fs.Int("limit", 20, "with list: how many runs, newest first")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	client, err := newAPIClient(env, *org, *sandbox)
	if err != nil {
		return err
	}
	switch args[0] {
	case "start":
		body := map[string]any{"dryRun": *dryRun, "store": *store}
		if len(datasets) > 0 {
			body["datasetIds"] = []string(datasets)
		}
		var run httpapi.RunDoc
		if err := client.do(ctx, http.MethodPost, "/retention/runs", body, &run); err != nil {
			return err
		}
		if *wait {
			if run, err = waitForRun(ctx, client, run.ID, errOut); err != nil {
				return err
			}
		}
		return printRun(out, run, *asJSON)
	case "show":
		if fs.NArg() != 1 {
			return errors.New("runs show needs one RUN_ID")
		}
		id, err := resolveRunID(ctx, client, fs.Arg(0))
		if err != nil {
			return err
		}
		var run httpapi.RunDoc
		if err := client.do(ctx, http.MethodGet, "/retention/runs/"+id, nil, &run); err != nil {
			return err
		}
		return printRun(out, run, *asJSON)
	}
	var page struct {
		Embedded struct {
			Runs []httpapi.RunDoc `json:"runs"`
		} `json:"_embedded"`
	}
	if err := client.do(ctx, http.MethodGet, fmt.Sprintf("/retention/runs?limit=%d", *limit), nil, &page); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(out, page.Embedded.Runs)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTRIGGER\tSTORE\tDRY RUN\tDATASETS\tROWS DELETED\tCREATED")
	for _, r := range page.Embedded.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d/%d\t%d\t%s\n", r.ID, r.Status, r.Trigger, r.Store, r.DryRun,
			r.Progress.DatasetsDone, r.Progress.DatasetsTotal, r.Progress.RowsDeleted, r.CreatedAt)
	}
	return tw.Flush()
}

// runPrefixSearch is how many of the latest runs `runs show` searches for an id that starts with a short id.
const runPrefixSearch = 1000

// resolveRunID returns arg when it is a whole run id (a UUID), or the id of the one run among the latest
// runPrefixSearch of the sandbox whose id starts with it: the progress bar, the console and logs print the first 8
// hex digits. Several runs starting with it, or none, is an error that says so.
func resolveRunID(ctx context.Context, client *apiClient, arg string) (string, error) {
	prefix := strings.ToLower(arg)
	if _, err := uuid.Parse(prefix); err == nil && len(prefix) == 36 {
		return prefix, nil
	}
	if prefix == "" || len(prefix) > 36 || strings.Trim(prefix, "0123456789abcdef-") != "" {
		return "", fmt.Errorf("RUN_ID must be a run's id or the start of one (hex digits and dashes), got %q", arg)
	}
	var found []string
	for start := 0; start < runPrefixSearch; start += maxRunsPage {
		var page struct {
			Embedded struct {
				Runs []httpapi.RunDoc `json:"runs"`
			} `json:"_embedded"`
		}
		if err := client.do(ctx, http.MethodGet, fmt.Sprintf("/retention/runs?limit=%d&start=%d", maxRunsPage, start), nil, &page); err != nil {
			return "", err
		}
		for _, r := range page.Embedded.Runs {
			if strings.HasPrefix(r.ID, prefix) {
				found = append(found, r.ID)
			}
		}
		if len(page.Embedded.Runs) < maxRunsPage {
			break
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("no run of the latest %d of this sandbox has an id starting with %s", runPrefixSearch, prefix)
	}
	return "", fmt.Errorf("%d runs have an id starting with %s (%s): give more of it", len(found), prefix, strings.Join(found, ", "))
}

// maxRunsPage is the most runs GET /retention/runs answers at once.
const maxRunsPage = 100

// rowsText says what a run did to its rows, or, for a dry run, what it would do.
func rowsText(r httpapi.RunDoc) string {
	if r.DryRun {
		return fmt.Sprintf("%d rows would be deleted", r.Progress.RowsDeleted)
	}
	return fmt.Sprintf("%d rows deleted", r.Progress.RowsDeleted)
}

// waitForRun shows a progress bar of the run's datasets on errOut until it ends, and leaves it showing how the run
// ended: all its datasets done, and its rows. The bar is made once the total is known: an open-ended bar would
// spin in a goroutine of its own. Where errOut is not a terminal, each redraw is a line of its own.
func waitForRun(ctx context.Context, client *apiClient, id string, errOut io.Writer) (httpapi.RunDoc, error) {
	var bar *progressbar.ProgressBar
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var run httpapi.RunDoc
		if err := client.do(ctx, http.MethodGet, "/retention/runs/"+id, nil, &run); err != nil {
			if bar != nil {
				_ = bar.Exit()
			}
			return run, err
		}
		if bar == nil && run.Progress.DatasetsTotal > 0 {
			bar = newRunBar(errOut, run.Progress.DatasetsTotal)
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("run %s: %s", id[:8], rowsText(run)))
			_ = bar.Set(run.Progress.DatasetsDone)
		}
		if runEnded(run) {
			if bar != nil {
				_ = bar.Finish() // draws the final state, past any throttling, and ends its line
			}
			return run, nil
		}
		select {
		case <-ctx.Done():
			if bar != nil {
				_ = bar.Exit()
			}
			return run, ctx.Err()
		case <-tick.C:
		}
	}
}

// newRunBar is the progress bar of a run of total datasets, on w.
func newRunBar(w io.Writer, total int) *progressbar.ProgressBar {
	opts := []progressbar.Option{progressbar.OptionShowCount(), progressbar.OptionSetWidth(30)}
	if isTerminal(w) {
		opts = append(opts, progressbar.OptionSetWriter(w), progressbar.OptionThrottle(terminalThrottle),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
	} else {
		opts = append(opts, progressbar.OptionSetWriter(lineWriter{w}), progressbar.OptionThrottle(logThrottle),
			progressbar.OptionSetTheme(progressbar.ThemeASCII))
	}
	return progressbar.NewOptions(total, opts...)
}

func printRun(out io.Writer, r httpapi.RunDoc, asJSON bool) error {
	if asJSON {
		return writeJSON(out, r)
	}
	fmt.Fprintf(out, "run %s: %s (%s, %s, dry run %v), %d/%d datasets, %s\n", r.ID, r.Status, r.Trigger,
		r.Store, r.DryRun, r.Progress.DatasetsDone, r.Progress.DatasetsTotal, rowsText(r))
	if len(r.Datasets) == 0 {
		return nil
	}
	rowsHeader := "ROWS DELETED"
	if r.DryRun {
		rowsHeader = "ROWS TO DELETE"
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DATASET\tSTATUS\tTTL\t%s\tPARTITIONS DROPPED\tERROR\n", rowsHeader)
	for _, d := range r.Datasets {
		ttl := "null"
		if d.TTLValue != nil {
			ttl = *d.TTLValue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", termSafe(d.DatasetID), termSafe(d.Status), termSafe(ttl), d.RowsDeleted, d.PartitionsDropped, termSafe(d.Error))
	}
	return tw.Flush()
}
