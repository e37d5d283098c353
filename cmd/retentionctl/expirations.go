package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/acme/retention/catalog"
)

// expirationsPath is where the service serves Adobe's Data Hygiene dataset expirations.
const expirationsPath = "/data/core/hygiene/ttl"

// expiration is the part of an expiration's document the CLI shows.
type expiration struct {
	TTLID       string `json:"ttlId"`
	DatasetID   string `json:"datasetId"`
	DatasetName string `json:"datasetName"`
	DisplayName string `json:"displayName"`
	Status      string `json:"status"`
	Expiry      string `json:"expiry"`
	UpdatedBy   string `json:"updatedBy"`
	Reason      string `json:"reason,omitempty"`
}

// runExpirations lists, schedules and cancels dataset expirations through the API, so that it obeys the same rules,
// scopes and audit as any client.
func runExpirations(ctx context.Context, args []string, env getenv, out io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "create" && args[0] != "cancel") {
		fmt.Fprintln(out, "usage: retentionctl expirations list [-status S,...] [-dataset ID] | create -dataset ID -expiry DATE -name NAME [-description D] | cancel ID")
		return errUsage
	}
	fs := flag.NewFlagSet("expirations "+args[0], flag.ContinueOnError)
	org, sandbox := tenantFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	dataset := fs.String("dataset", "", "with create: the dataset to delete; with list: only its expirations")
	expiry := fs.String("expiry", "", "with create: when, an ISO 8601 date (midnight UTC) or UTC date-time, at least 24 hours ahead")
	name := fs.String("name", "", "with create: the expiration's display name")
	description := fs.String("description", "", "with create: a description")
	status := fs.String("status", "", "with list: only these statuses (pending, executing, cancelled, completed; comma-separated)")
	limit := fs.Int("limit", 25, "with list: how many, 1 to 100")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	client, err := newScopedAPIClient(env, *org, *sandbox, catalog.ScopeDatasetsManage)
	if err != nil {
		return err
	}
	var e expiration
	switch args[0] {
	case "create":
		body := map[string]any{"datasetId": *dataset, "expiry": *expiry, "displayName": *name}
		if *description != "" {
			body["description"] = *description
		}
		if err := client.do(ctx, http.MethodPost, expirationsPath, body, &e); err != nil {
			return err
		}
		return printExpirations(out, []expiration{e}, *asJSON)
	case "cancel":
		if fs.NArg() != 1 {
			return errors.New("expirations cancel needs one ID (SD-… or a dataset id)")
		}
		if err := client.do(ctx, http.MethodDelete, expirationsPath+"/"+url.PathEscape(fs.Arg(0)), nil, &e); err != nil {
			return err
		}
		return printExpirations(out, []expiration{e}, *asJSON)
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}, "orderBy": {"expiry"}}
	if *status != "" {
		q.Set("status", *status)
	}
	if *dataset != "" {
		q.Set("datasetId", *dataset)
	}
	var page struct {
		Results []expiration `json:"results"`
	}
	if err := client.do(ctx, http.MethodGet, expirationsPath+"?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	return printExpirations(out, page.Results, *asJSON)
}

func printExpirations(out io.Writer, list []expiration, asJSON bool) error {
	if asJSON {
		return writeJSON(out, list)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tEXPIRY\tDATASET\tNAME\tUPDATED BY\tREASON")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%s)\t%s\t%s\t%s\n", termSafe(e.TTLID), termSafe(e.Status), termSafe(e.Expiry),
			termSafe(e.DatasetName), termSafe(e.DatasetID), termSafe(e.DisplayName), termSafe(e.UpdatedBy), termSafe(e.Reason))
	}
	return tw.Flush()
}
