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
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/config"
)

// workOrdersPath is where the service serves Adobe's Data Hygiene record-delete work orders.
const workOrdersPath = "/data/core/hygiene/workorder"

// workOrder is the part of an order's document the CLI shows.
type workOrder struct {
	WorkOrderID   string          `json:"workorderId"`
	Status        string          `json:"status"`
	Reason        string          `json:"reason,omitempty"`
	DatasetID     string          `json:"datasetId"`
	DatasetName   string          `json:"datasetName"`
	DisplayName   string          `json:"displayName"`
	IdentityCount int             `json:"identityCount"`
	RowsDeleted   int64           `json:"rowsDeleted"`
	CreatedBy     string          `json:"createdBy"`
	CreatedAt     string          `json:"createdAt"`
	Parts         []workOrderPart `json:"parts,omitempty"`
}

type workOrderPart struct {
	DatasetID   string `json:"datasetId"`
	DatasetName string `json:"datasetName"`
	Status      string `json:"status"`
	Reason      string `json:"reason,omitempty"`
	RowsDeleted int64  `json:"rowsDeleted"`
}

// identityFlags collects -identity NAMESPACE:VALUE, repeated.
type identityFlags []catalog.Identity

func (f *identityFlags) String() string { return fmt.Sprint(len(*f), " identities") }

func (f *identityFlags) Set(v string) error {
	ns, value, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("an identity is NAMESPACE:VALUE (email:alice@example.com), got %q", v)
	}
	*f = append(*f, catalog.Identity{Namespace: ns, Value: value})
	return nil
}

const workOrdersUsage = "usage: retentionctl workorders create -dataset ID|ALL -name NAME (-identity NS:VALUE ... | -file IDS.json) [-description D] [-wait] | preview -dataset ID|ALL (-identity NS:VALUE ... | -file IDS.json) | list [-status S,...] | show ID | hash NAMESPACE VALUE"

// runWorkOrders creates, lists and shows record-delete work orders through the API, so that it obeys the same
// rules, scopes and audit as any client; hash prints the keyed hash an audit event names an identity by.
func runWorkOrders(ctx context.Context, args []string, env getenv, out io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"create", "preview", "list", "show", "hash"}, args[0]) {
		fmt.Fprintln(out, workOrdersUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("workorders "+args[0], flag.ContinueOnError)
	org, sandbox := tenantFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	dataset := fs.String("dataset", "", "with create and preview: the dataset to erase from, or ALL for every dataset of the sandbox")
	name := fs.String("name", "", "with create: the order's display name")
	description := fs.String("description", "", "with create: a description")
	var identities identityFlags
	fs.Var(&identities, "identity", "with create and preview: an identity, NAMESPACE:VALUE (email:alice@example.com); repeat it")
	file := fs.String("file", "", `with create and preview: a JSON file of identities in Adobe's upload format, [{"namespaceCode":"email","value":"…"}]`)
	wait := fs.Bool("wait", false, "with create: wait until the order completes, fails, or waits for a held dataset (ingested), at most 5 minutes")
	status := fs.String("status", "", "with list: only these statuses (received, validated, submitted, ingested, completed, failed; comma-separated)")
	limit := fs.Int("limit", 25, "with list: how many, 1 to 100")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if args[0] == "hash" {
		return printIdentityHash(fs, env, out)
	}
	client, err := newScopedAPIClient(env, *org, *sandbox, catalog.ScopeWorkOrdersManage+" "+catalog.ScopeDatasetsRead)
	if err != nil {
		return err
	}
	var w workOrder
	switch args[0] {
	case "create", "preview":
		if *file != "" {
			if identities, err = readIdentityFile(*file, identities); err != nil {
				return err
			}
		}
		if args[0] == "preview" {
			return previewWorkOrder(ctx, client, out, orderBody(*dataset, "preview", "", identities), *asJSON)
		}
		if err := client.do(ctx, http.MethodPost, workOrdersPath, orderBody(*dataset, *name, *description, identities), &w); err != nil {
			return err
		}
		if *wait {
			if w, err = waitForWorkOrder(ctx, client, w.WorkOrderID); err != nil {
				return err
			}
		}
		return printWorkOrders(out, []workOrder{w}, *asJSON)
	case "show":
		if fs.NArg() != 1 {
			return errors.New("workorders show needs one ID (DI-…)")
		}
		if err := client.do(ctx, http.MethodGet, workOrdersPath+"/"+url.PathEscape(fs.Arg(0)), nil, &w); err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(out, w)
		}
		if err := printWorkOrders(out, []workOrder{w}, false); err != nil {
			return err
		}
		return printParts(out, w.Parts)
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	if *status != "" {
		q.Set("status", *status)
	}
	var page struct {
		Results []workOrder `json:"results"`
	}
	if err := client.do(ctx, http.MethodGet, workOrdersPath+"?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	return printWorkOrders(out, page.Results, *asJSON)
}

// orderBody is a POST /workorder body (and a preview's).
func orderBody(dataset, name, description string, identities identityFlags) map[string]any {
	body := map[string]any{"action": "delete_identity", "datasetId": dataset, "displayName": name,
		"namespacesIdentities": groupIdentities(identities)}
	if description != "" {
		body["description"] = description
	}
	return body
}

// workOrderPreview is POST /workorder/preview's answer.
type workOrderPreview struct {
	DatasetCount int   `json:"datasetCount"`
	RowCount     int64 `json:"rowCount"`
	Datasets     []struct {
		DatasetID   string           `json:"datasetId"`
		DatasetName string           `json:"datasetName"`
		RowCount    int64            `json:"rowCount"`
		Stores      map[string]int64 `json:"stores"`
		HeldBy      string           `json:"heldBy,omitempty"`
	} `json:"datasets"`
}

// previewWorkOrder prints what the order in body would delete now, per dataset, and in all.
func previewWorkOrder(ctx context.Context, client *apiClient, out io.Writer, body map[string]any, asJSON bool) error {
	var p workOrderPreview
	if err := client.do(ctx, http.MethodPost, workOrdersPath+"/preview", body, &p); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(out, p)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASET\tROWS\tLAKE\tPROFILE\tHELD BY")
	for _, d := range p.Datasets {
		fmt.Fprintf(tw, "%s (%s)\t%d\t%d\t%d\t%s\n", termSafe(d.DatasetName), termSafe(d.DatasetID), d.RowCount,
			d.Stores[string(catalog.LakeHouse)], d.Stores[string(catalog.Profile)], termSafe(d.HeldBy))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "%d %s in %d of the %d %s the order covers\n", p.RowCount, plural(int(min(p.RowCount, 2)), "row", "rows"),
		len(p.Datasets), p.DatasetCount, plural(p.DatasetCount, "dataset", "datasets"))
	return err
}

// printIdentityHash prints catalog.IdentityHash of NAMESPACE VALUE under RETENTION_IDENTITY_HASH_KEY (the
// development key when unset), as the service's audit events name it.
func printIdentityHash(fs *flag.FlagSet, env getenv, out io.Writer) error {
	if fs.NArg() != 2 {
		return errors.New("workorders hash needs NAMESPACE VALUE")
	}
	key := env("RETENTION_IDENTITY_HASH_KEY")
	if key == "" {
		key = config.DefaultIdentityHashKey
	}
	fmt.Fprintln(out, catalog.IdentityHash([]byte(key), catalog.IdentityKey(fs.Arg(0), fs.Arg(1))))
	return nil
}

// readIdentityFile appends the identities of a file in Adobe's upload format.
func readIdentityFile(path string, ids identityFlags) (identityFlags, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the file
	if err != nil {
		return nil, err
	}
	var list []struct {
		NamespaceCode string `json:"namespaceCode"`
		Value         string `json:"value"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`%s: want a JSON array of {"namespaceCode": …, "value": …}: %w`, path, err)
	}
	for _, e := range list {
		ids = append(ids, catalog.Identity{Namespace: e.NamespaceCode, Value: e.Value})
	}
	return ids, nil
}

// groupIdentities writes identities as Adobe's namespacesIdentities, one entry per namespace in first-seen order.
func groupIdentities(ids identityFlags) []map[string]any {
	var out []map[string]any
	index := map[string]int{}
	for _, id := range ids {
		i, ok := index[id.Namespace]
		if !ok {
			i = len(out)
			index[id.Namespace] = i
			out = append(out, map[string]any{"namespace": map[string]any{"code": id.Namespace}, "IDs": []string{}})
		}
		out[i]["IDs"] = append(out[i]["IDs"].([]string), id.Value)
	}
	return out
}

// waitForWorkOrder polls the order once a second until it completes, fails, or is ingested: nothing more happens to
// it then until a hold is released.
func waitForWorkOrder(ctx context.Context, client *apiClient, id string) (workOrder, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		var w workOrder
		if err := client.do(ctx, http.MethodGet, workOrdersPath+"/"+url.PathEscape(id), nil, &w); err != nil {
			return w, err
		}
		switch catalog.WorkOrderStatus(w.Status) {
		case catalog.WorkOrderCompleted, catalog.WorkOrderFailed, catalog.WorkOrderIngested:
			return w, nil
		}
		select {
		case <-ctx.Done():
			return w, fmt.Errorf("work order %s is still %s: %w", id, w.Status, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func printWorkOrders(out io.Writer, list []workOrder, asJSON bool) error {
	if asJSON {
		return writeJSON(out, list)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tDATASET\tNAME\tIDENTITIES\tROWS DELETED\tCREATED BY\tREASON")
	for _, w := range list {
		ds := termSafe(w.DatasetID)
		if w.DatasetName != "" {
			ds = termSafe(w.DatasetName) + " (" + ds + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", termSafe(w.WorkOrderID), termSafe(w.Status), ds,
			termSafe(w.DisplayName), w.IdentityCount, w.RowsDeleted, termSafe(w.CreatedBy), termSafe(w.Reason))
	}
	return tw.Flush()
}

func printParts(out io.Writer, parts []workOrderPart) error {
	if len(parts) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASET\tSTATUS\tROWS DELETED\tREASON")
	for _, p := range parts {
		fmt.Fprintf(tw, "%s (%s)\t%s\t%d\t%s\n", termSafe(p.DatasetName), termSafe(p.DatasetID), termSafe(p.Status), p.RowsDeleted, termSafe(p.Reason))
	}
	return tw.Flush()
}
