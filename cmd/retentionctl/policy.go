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
		fmt.Fprintln(out, "usage: retentionctl policy show -org ORG | set -org ORG -store S -managed-by M -min P -max P|null -default P")
		return errUsage
	}
	fs := flag.NewFlagSet("policy "+args[0], flag.ContinueOnError)
	org := fs.String("org", "", "the org (required)")
	store := fs.String("store", string(catalog.LakeHouse), "adobe_lakeHouse or adobe_unifiedProfile")
	managedBy := fs.String("managed-by", string(catalog.Customer), "CUSTOMER or SYSTEM")
	minValue := fs.String("min", "", "minValue, an ISO-8601 period")
	maxValue := fs.String("max", "", "maxValue, an ISO-8601 period, or null for no maximum")
	defaultValue := fs.String("default", "", "defaultValue, an ISO-8601 period")
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
		key, limits, err := parsePolicy(*store, *managedBy, *minValue, *maxValue, *defaultValue)
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

func parsePolicy(store, managedBy, minValue, maxValue, defaultValue string) (catalog.PolicyKey, catalog.Limits, error) {
	key := catalog.PolicyKey{Store: catalog.Store(store), ManagedBy: catalog.ManagedBy(managedBy)}
	var l catalog.Limits
	if !key.Store.Valid() {
		return key, l, fmt.Errorf("-store must be adobe_lakeHouse or adobe_unifiedProfile, got %q", store)
	}
	if key.ManagedBy != catalog.Customer && key.ManagedBy != catalog.System {
		return key, l, fmt.Errorf("-managed-by must be CUSTOMER or SYSTEM, got %q", managedBy)
	}
	var err error
	if l.Min, err = retention.ParsePeriod(minValue); err != nil {
		return key, l, fmt.Errorf("-min: %w", err)
	}
	if l.Default, err = retention.ParsePeriod(defaultValue); err != nil {
		return key, l, fmt.Errorf("-default: %w", err)
	}
	if maxValue != "null" {
		m, err := retention.ParsePeriod(maxValue)
		if err != nil {
			return key, l, fmt.Errorf("-max: %w (or null for no maximum)", err)
		}
		l.Max = &m
	}
	return key, l, nil
}

func printPolicies(out io.Writer, all map[catalog.PolicyKey]catalog.Limits) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tMANAGED BY\tMIN\tMAX\tDEFAULT")
	keys := make([]catalog.PolicyKey, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b catalog.PolicyKey) int {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Store, k.ManagedBy, l.Min, maxValue, l.Default)
	}
	return tw.Flush()
}
