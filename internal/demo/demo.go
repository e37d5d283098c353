// Package demo loads the small demo data set of `make run`: a few time-series datasets in two orgs, so that a new
// user has something to list, inspect and change right away.
package demo

import (
	"context"
	"fmt"

	"github.com/acme/retention/catalog"
)

// Orgs are the demo orgs; the first one is the org of the printed dev token.
var Orgs = []string{"ACME00000000000000000001@AdobeOrg", "GLOBEX000000000000000002@AdobeOrg"}

// datasetSpec describes one demo dataset.
type datasetSpec struct {
	org         string
	name        string
	description string
	tags        map[string][]string
	managedBy   catalog.ManagedBy
	behavior    catalog.DataBehavior
}

var datasets = []datasetSpec{
	{Orgs[0], "web-clickstream", "Page views and clicks of the Acme web shop.", map[string][]string{"team": {"web"}}, catalog.Customer, catalog.TimeSeries},
	{Orgs[0], "app-sessions", "Mobile app sessions, profile-enabled.", map[string][]string{"team": {"mobile"}, "unifiedProfile": {"enabled:true"}}, catalog.Customer, catalog.TimeSeries},
	{Orgs[0], "journey-feedback", "Message feedback events kept by the platform.", map[string][]string{"team": {"platform"}}, catalog.System, catalog.TimeSeries},
	{Orgs[0], "loyalty-members", "Loyalty member records (not time-series: no row expiration).", map[string][]string{"team": {"crm"}}, catalog.Customer, catalog.Record},
	{Orgs[1], "pos-transactions", "Point-of-sale transactions of Globex stores.", map[string][]string{"team": {"retail"}}, catalog.Customer, catalog.TimeSeries},
	{Orgs[1], "support-tickets", "Support ticket events.", map[string][]string{"team": {"support"}}, catalog.Customer, catalog.TimeSeries},
}

// Load creates the demo datasets that do not exist yet, so that a second `make run` leaves the data as it is.
// It returns the datasets of the first org.
func Load(ctx context.Context, svc catalog.DatasetService) ([]*catalog.Dataset, error) {
	for _, spec := range datasets {
		c := &catalog.Caller{User: "demo@acme.example", ClientID: "retentiond-demo", Org: spec.org, Sandbox: catalog.DefaultSandbox, RequestID: "demo-load"}
		desc := spec.description
		_, err := svc.CreateDataset(ctx, c, catalog.DatasetCreate{
			Name: spec.name, Description: &desc, Tags: spec.tags,
			Classification: catalog.Classification{DataBehavior: spec.behavior, ManagedBy: spec.managedBy},
		})
		if err != nil && catalog.ErrorCode(err) != catalog.ECONFLICT {
			return nil, fmt.Errorf("create demo dataset %s: %w", spec.name, err)
		}
	}
	c := &catalog.Caller{Org: Orgs[0], Sandbox: catalog.DefaultSandbox}
	all, err := svc.FindDatasets(ctx, c, catalog.DatasetFilter{IncludeAll: true, OrderBy: []catalog.Order{{Field: "name"}}})
	if err != nil {
		return nil, fmt.Errorf("list demo datasets: %w", err)
	}
	return all, nil
}
