package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

func runPolicy(ctx context.Context, args []string, env getenv, out, errOut io.Writer) error {
	if len(args) == 0 || (args[0] != "show" && args[0] != "set") {
		fmt.Fprintln(out, "usage: retentionctl policy show -org ORG | set -org ORG -store S -managed-by M [-behavior B] -min P -max P|null -default P|null")
		return errUsage
	}
	fs := flag.NewFlagSet("policy "+args[0], flag.ContinueOnError)
	org := fs.String("org", "", "the org (required)")
	store := fs.String("store", string(catalog.LakeHouse), "adobe_lakeHouse or adobe_unifiedProfile")
	managedBy := fs.String("managed-by", string(catalog.Customer), "CUSTOMER or SYSTEM")
	behavior := fs.String("behavior", string(catalog.TimeSeries), "the datasets' data behavior: time-series or record")
	minValue := fs.String("min", "", "minValue, an ISO-8601 period")
	maxValue := fs.String("max", "", "maxValue, an ISO-8601 period, or null for no maximum")
	defaultValue := fs.String("default", "", "defaultValue, an ISO-8601 period, or null (record datasets only) for none")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if *org == "" {
		return errors.New("-org is required")
	}
	db, err := openDB(ctx, env, errOut)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := postgres.NewPolicyService(db)
	if args[0] == "set" {
		key, limits, err := parsePolicy(policyArgs{*store, *managedBy, *behavior, *minValue, *maxValue, *defaultValue})
		if err != nil {
			return err
		}
		if err := svc.SetLimits(ctx, *org, key, limits); err != nil {
			return err
		}
	}
	all, err := svc.FindLimits(ctx, *org)
	if err != nil {
		return err
	}
	return printPolicies(out, all)
}

// policyArgs are the flags of `policy set`, as given.
type policyArgs struct {
	store, managedBy, behavior, minValue, maxValue, defaultValue string
}

func parsePolicy(a policyArgs) (catalog.PolicyKey, catalog.Limits, error) {
	key := catalog.PolicyKey{Store: catalog.Store(a.store), ManagedBy: catalog.ManagedBy(a.managedBy), Records: a.behavior == string(catalog.Record)}
	var l catalog.Limits
	if !key.Store.Valid() {
		return key, l, fmt.Errorf("-store must be adobe_lakeHouse or adobe_unifiedProfile, got %q", a.store)
	}
	if key.ManagedBy != catalog.Customer && key.ManagedBy != catalog.System {
		return key, l, fmt.Errorf("-managed-by must be CUSTOMER or SYSTEM, got %q", a.managedBy)
	}
	if a.behavior != string(catalog.TimeSeries) && a.behavior != string(catalog.Record) {
		return key, l, fmt.Errorf("-behavior must be time-series or record, got %q", a.behavior)
	}
	var err error
	if l.Min, err = retention.ParsePeriod(a.minValue); err != nil {
		return key, l, fmt.Errorf("-min: %w", err)
	}
	if a.defaultValue != "null" {
		if l.Default, err = retention.ParsePeriod(a.defaultValue); err != nil {
			return key, l, fmt.Errorf("-default: %w (or null, for record datasets)", err)
		}
	}
	if a.maxValue != "null" {
		m, err := retention.ParsePeriod(a.maxValue)
		if err != nil {
			return key, l, fmt.Errorf("-max: %w (or null for no maximum)", err)
		}
		l.Max = &m
	}
	return key, l, nil
}

func printPolicies(out io.Writer, all map[catalog.PolicyKey]catalog.Limits) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tMANAGED BY\tBEHAVIOR\tMIN\tMAX\tDEFAULT")
	keys := make([]catalog.PolicyKey, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b catalog.PolicyKey) int {
		if a.Records != b.Records {
			return strings.Compare(behaviorName(a), behaviorName(b))
		}
		if a.Store != b.Store {
			return strings.Compare(string(a.Store), string(b.Store))
		}
		return strings.Compare(string(a.ManagedBy), string(b.ManagedBy))
	})
	for _, k := range keys {
		l := all[k]
		maxValue := "null"
		if l.Max != nil {
			maxValue = l.Max.String()
		}
		defaultValue := "null"
		if d := l.DefaultTTL(); d != nil {
			defaultValue = d.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.Store, k.ManagedBy, behaviorName(k), l.Min, maxValue, defaultValue)
	}
	return tw.Flush()
}

// behaviorName is the data behavior a policy key's limits apply to, as `policy set -behavior` takes it.
func behaviorName(k catalog.PolicyKey) string {
	if k.Records {
		return string(catalog.Record)
	}
	return string(catalog.TimeSeries)
}
