package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/acme/retention/catalog"
)

// rowExpiry is the part of GET /dataSets/{id}/rows/{rowId}/expiry the CLI shows.
type rowExpiry struct {
	ID         string `json:"_id"`
	DatasetID  string `json:"dataSetId"`
	Store      string `json:"store"`
	At         string `json:"evaluatedAt"`
	IngestedAt string `json:"ingestedAt"`
	Clock      struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	} `json:"clock"`
	GovernedBy struct {
		Source  string `json:"source"`
		Message string `json:"message"`
	} `json:"governedBy"`
	ExpiresAt   *string `json:"expiresAt"`
	Expired     bool    `json:"expired"`
	Grace       string  `json:"graceValue"`
	DeletableAt *string `json:"deletableAt"`
	HeldBy      []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	} `json:"heldBy"`
	NextRunAt *string `json:"nextRunAt"`
	// The row's own expiry, when it has one: the field that set it, and what a _ttl added to its clock.
	OwnExpiresAt   string `json:"ownExpiresAt"`
	OwnExpiryField string `json:"ownExpiryField"`
	OwnTTLSeconds  int64  `json:"ownTtlSeconds"`
}

// runRows explains a row's expiry through the API, under the same rules, scopes and tenancy as any client.
func runRows(ctx context.Context, args []string, env getenv, out io.Writer) error {
	if len(args) == 0 || args[0] != "explain" {
		fmt.Fprintln(out, "usage: retentionctl rows explain [-store S] [-json] DATASET_ID _ID")
		return errUsage
	}
	fs := flag.NewFlagSet("rows explain", flag.ContinueOnError)
	org, sandbox := tenantFlags(fs)
	store := fs.String("store", string(catalog.LakeHouse), "the store: adobe_lakeHouse or adobe_unifiedProfile")
	asJSON := fs.Bool("json", false, "print the API's JSON instead of lines")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if fs.NArg() != 2 {
		return errors.New("rows explain needs a dataset id and a row's _id")
	}
	client, err := newScopedAPIClient(env, *org, *sandbox, catalog.ScopeDatasetsRead)
	if err != nil {
		return err
	}
	path := "/dataSets/" + url.PathEscape(fs.Arg(0)) + "/rows/" + url.PathEscape(fs.Arg(1)) + "/expiry?" + url.Values{"store": {*store}}.Encode()
	if *asJSON {
		var doc map[string]any
		if err := client.do(ctx, http.MethodGet, path, nil, &doc); err != nil {
			return err
		}
		return writeJSON(out, doc)
	}
	var x rowExpiry
	if err := client.do(ctx, http.MethodGet, path, nil, &x); err != nil {
		return err
	}
	return printRowExpiry(out, x)
}

// printRowExpiry writes the explanation as one line per term of the rule.
func printRowExpiry(out io.Writer, x rowExpiry) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	held := make([]string, 0, len(x.HeldBy))
	for _, h := range x.HeldBy {
		held = append(held, h.ID+" ("+h.Reason+")")
	}
	expired := "no"
	if x.Expired {
		expired = "yes"
	}
	lines := [][2]string{
		{"row", x.ID + " of dataset " + x.DatasetID + " in " + x.Store + ", at " + x.At},
		{"clock", x.Clock.Kind + " " + x.Clock.Value},
		{"ingested", x.IngestedAt},
		{"governed by", x.GovernedBy.Source + ": " + x.GovernedBy.Message},
	}
	if x.OwnExpiresAt != "" {
		lines = append(lines, [2]string{"own expiry", ownExpiry(x)})
	}
	for _, l := range append(lines, [][2]string{
		{"expires", orNever(x.ExpiresAt) + " (expired: " + expired + ")"},
		{"deletable", orNever(x.DeletableAt) + " (grace " + x.Grace + ")"},
		{"held by", orText(strings.Join(held, ", "), "no hold")},
		{"next run", orText(deref(x.NextRunAt), "none that deletes it")},
	}...) {
		fmt.Fprintf(tw, "%s:\t%s\n", l[0], termSafe(l[1]))
	}
	return tw.Flush()
}

// ownExpiry is the row's own expiry and the field that set it: a _ttl with the seconds it added to the row's clock,
// an _expiresAt, or unknown for a row stored before the service recorded which.
func ownExpiry(x rowExpiry) string {
	switch x.OwnExpiryField {
	case "_ttl":
		return fmt.Sprintf("%s (_ttl, %d seconds after the clock)", x.OwnExpiresAt, x.OwnTTLSeconds)
	case "_expiresAt":
		return x.OwnExpiresAt + " (_expiresAt)"
	}
	return x.OwnExpiresAt + " (_expiresAt or _ttl: stored before the service recorded which)"
}

func orNever(t *string) string { return orText(deref(t), "never") }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orText(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
