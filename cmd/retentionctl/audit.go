package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/acme/retention/httpapi"
)

const auditUsage = `usage: retentionctl audit list | export | verify [flags]
  list     the org's audit events in the sandbox, newest first, as a table (-json: the events as JSON)
  export   every matching event of the last 365 days, streamed as CSV (-format json: a JSON array) to stdout or -o
  verify   walk the org's hash chain; exits non-zero when it is broken
Filters (list, export): -property TERM (repeatable, Adobe's syntax such as action==Update or timestamp>2025-01-01T00:00:00Z),
or the shorthands -action, -asset-type, -asset-id, -asset-name, -user, -status, -request-id (comma-separated values,
any of which may match), -since and -until (RFC 3339); -order-by such as -timestamp or +assetName.`

// auditFlags are the flags every audit command takes, and the filters of list and export.
type auditFlags struct {
	org, sandbox *string
	asJSON       bool
	properties   stringList
	shorthands   map[string]*string
	since, until string
	orderBy      string
}

// shorthandFields maps each shorthand flag to the property it filters.
var shorthandFields = []struct{ flag, field, help string }{
	{"action", "action", "action, such as Update or Create,Delete"},
	{"asset-type", "assetType", "asset type, such as Dataset"},
	{"asset-id", "assetId", "asset id, such as a dataset id"},
	{"asset-name", "assetName", "asset name"},
	{"user", "user", "user (the token's subject)"},
	{"status", "status", "status, Success or Failure"},
	{"request-id", "requestId", "request id"},
}

func (f *auditFlags) register(fs *flag.FlagSet) {
	f.org, f.sandbox = tenantFlags(fs)
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	fs.Var(&f.properties, "property", "a filter in Adobe's syntax, such as action==Update (repeatable; all must hold)")
	f.shorthands = map[string]*string{}
	for _, s := range shorthandFields {
		f.shorthands[s.field] = fs.String(s.flag, "", "only events of this "+s.help)
	}
	fs.StringVar(&f.since, "since", "", "only events after this time (RFC 3339)")
	fs.StringVar(&f.until, "until", "", "only events before this time (RFC 3339)")
	fs.StringVar(&f.orderBy, "order-by", "", "order, such as -timestamp (the default) or +assetName,-timestamp")
}

// query renders the filters as the API's query parameters; the service validates them.
func (f *auditFlags) query() url.Values {
	v := url.Values{}
	for _, p := range f.properties {
		v.Add("property", p)
	}
	for _, s := range shorthandFields {
		if val := *f.shorthands[s.field]; val != "" {
			v.Add("property", s.field+"=="+val)
		}
	}
	if f.since != "" {
		v.Add("property", "timestamp>"+f.since)
	}
	if f.until != "" {
		v.Add("property", "timestamp<"+f.until)
	}
	if f.orderBy != "" {
		v.Set("orderBy", f.orderBy)
	}
	return v
}

func runAudit(ctx context.Context, args []string, env getenv, out io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "export" && args[0] != "verify") {
		fmt.Fprintln(out, auditUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("audit "+args[0], flag.ContinueOnError)
	var f auditFlags
	f.register(fs)
	limit := fs.Int("limit", 50, "with list: events per page, 1 to 1000")
	start := fs.Int("start", 0, "with list: the first event to show, counting from 0")
	all := fs.Bool("all", false, "with list: follow the pages to the end")
	format := fs.String("format", "csv", "with export: csv or json")
	output := fs.String("o", "", "with export: write to this file instead of stdout")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	client, err := newAPIClient(env, *f.org, *f.sandbox)
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		return auditList(ctx, client, &f, *limit, *start, *all, out)
	case "export":
		return auditExport(ctx, client, &f, *format, *output, out)
	}
	return auditVerify(ctx, client, f.asJSON, out)
}

// auditEventView is the part of an event the table shows; with -json the events are printed whole.
type auditEventView struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Action    string `json:"action"`
	AssetType string `json:"assetType"`
	AssetID   string `json:"assetId"`
	AssetName string `json:"assetName"`
	User      string `json:"userEmail"`
	Status    string `json:"status"`
	RequestID string `json:"requestId"`
	Chain     struct {
		Seq int64 `json:"seq"`
	} `json:"chain"`
}

type auditPageView struct {
	Embedded struct {
		Events []json.RawMessage `json:"events"`
	} `json:"_embedded"`
	Links map[string]struct {
		Href string `json:"href"`
	} `json:"_links"`
	Page struct {
		TotalElements       int  `json:"totalElements"`
		TotalElementsCapped bool `json:"totalElementsCapped"`
	} `json:"page"`
}

func auditList(ctx context.Context, client *apiClient, f *auditFlags, limit, start int, all bool, out io.Writer) error {
	v := f.query()
	v.Set("limit", strconv.Itoa(limit))
	v.Set("start", strconv.Itoa(start))
	path := "/audit/events?" + v.Encode()
	var events []json.RawMessage
	var page auditPageView
	for {
		page = auditPageView{}
		if err := client.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return err
		}
		events = append(events, page.Embedded.Events...)
		next, ok := page.Links["next"]
		if !all || !ok {
			break
		}
		path = next.Href
	}
	if f.asJSON {
		if events == nil {
			events = []json.RawMessage{}
		}
		return writeJSON(out, events)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tACTION\tASSET TYPE\tASSET ID\tASSET NAME\tUSER\tSTATUS\tREQUEST\tSEQ")
	for _, raw := range events {
		var ev auditEventView
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("read event: %w", err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", termSafe(ev.Timestamp), termSafe(ev.Action),
			termSafe(ev.AssetType), termSafe(ev.AssetID), termSafe(ev.AssetName), termSafe(ev.User), termSafe(ev.Status),
			termSafe(ev.RequestID), ev.Chain.Seq)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := strconv.Itoa(page.Page.TotalElements)
	if page.Page.TotalElementsCapped {
		total = "more than " + total
	}
	fmt.Fprintf(out, "%d event(s) shown of %s", len(events), total)
	if _, more := page.Links["next"]; more && !all {
		fmt.Fprintf(out, "; more with -start %d or -all", start+len(events))
	}
	fmt.Fprintln(out)
	return nil
}

// auditExport streams the export to out (or the -o file) as it arrives. A cut connection is an error, so a partial
// file is never taken for a whole one.
func auditExport(ctx context.Context, client *apiClient, f *auditFlags, format, output string, out io.Writer) error {
	if format != "csv" && format != "json" {
		return fmt.Errorf("-format must be csv or json, got %q", format)
	}
	v := f.query()
	v.Set("format", format)
	resp, err := auditGet(ctx, client, "/audit/export?"+v.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if output == "" {
		if _, err := io.Copy(out, resp.Body); err != nil {
			return fmt.Errorf("export cut short: %w", err)
		}
		return nil
	}
	file, err := os.Create(output) //nolint:gosec // G304: the operator names the file to write
	if err != nil {
		return err
	}
	if _, err := io.Copy(file, resp.Body); err != nil {
		_ = file.Close()
		return fmt.Errorf("export cut short, %s is incomplete: %w", output, err)
	}
	return file.Close()
}

// auditGet calls GET path on the API without the client's overall timeout, since an export of a year of events or a
// walk of a long chain may take a while (ctx still ends it), and turns an answer other than 200 into an error.
func auditGet(ctx context.Context, client *apiClient, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, client.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+client.token)
	req.Header.Set("x-api-key", "retentionctl")
	req.Header.Set("x-gw-ims-org-id", client.org)
	req.Header.Set("x-sandbox-name", client.sandbox)
	resp, err := (&http.Client{}).Do(req) //nolint:gosec // G704: the operator sets RETENTION_URL
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w (is retentiond running at RETENTION_URL?)", path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	route, _, _ := strings.Cut(path, "?")
	var p httpapi.Problem
	if json.Unmarshal(raw, &p) == nil && p.Detail != "" {
		return nil, fmt.Errorf("GET %s: %d %s", route, resp.StatusCode, p.Detail)
	}
	return nil, fmt.Errorf("GET %s: %d %s", route, resp.StatusCode, strings.TrimSpace(string(raw)))
}

// verificationView is GET /audit/verify's answer.
type verificationView struct {
	Valid    bool   `json:"valid"`
	Events   int64  `json:"events"`
	ImsOrgID string `json:"imsOrgId"`
	Head     struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	} `json:"head"`
	Anchor struct {
		Seq int64 `json:"seq"`
	} `json:"anchor"`
	FirstBroken *struct {
		Seq       int64  `json:"seq"`
		ID        string `json:"id"`
		Sandbox   string `json:"sandboxName"`
		Timestamp string `json:"timestamp"`
		Reason    string `json:"reason"`
		Detail    string `json:"detail"`
	} `json:"firstBroken"`
}

// errChainBroken makes verify exit non-zero, so a scheduled check alerts.
var errChainBroken = errors.New("the audit chain is broken")

func auditVerify(ctx context.Context, client *apiClient, asJSON bool, out io.Writer) error {
	resp, err := auditGet(ctx, client, "/audit/verify")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var v verificationView
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	switch {
	case asJSON:
		fmt.Fprintln(out, termSafeJSON(strings.TrimSpace(string(raw))))
	case v.Valid:
		fmt.Fprintf(out, "audit chain of %s: valid, %d event(s) verified (seq %d to %d), head %s\n",
			termSafe(v.ImsOrgID), v.Events, v.Anchor.Seq+1, v.Head.Seq, termSafe(v.Head.Hash))
	default:
		b := v.FirstBroken
		fmt.Fprintf(out, "audit chain of %s: BROKEN at seq %d", termSafe(v.ImsOrgID), b.Seq)
		if b.ID != "" {
			fmt.Fprintf(out, " (event %s in %s at %s)", termSafe(b.ID), termSafe(b.Sandbox), termSafe(b.Timestamp))
		}
		fmt.Fprintf(out, ": %s: %s; %d event(s) walked\n", termSafe(b.Reason), termSafe(b.Detail), v.Events)
	}
	if !v.Valid {
		return errChainBroken
	}
	return nil
}
