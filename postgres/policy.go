package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// PolicyService implements catalog.PolicyService.
type PolicyService struct{ db *DB }

// NewPolicyService returns a PolicyService on db.
func NewPolicyService(db *DB) *PolicyService { return &PolicyService{db: db} }

var _ catalog.PolicyService = (*PolicyService)(nil)

const selectPolicies = `
SELECT store, managed_by, records, min_value, max_value, default_value FROM ttl_policies WHERE org_id = $1`

// FindLimits implements catalog.PolicyService.
func (s *PolicyService) FindLimits(ctx context.Context, org string) (map[catalog.PolicyKey]catalog.Limits, error) {
	return findLimits(ctx, s.db.Pool, org)
}

// policyRow is a row of ttl_policies: an org's override of the built-in limits of one key.
type policyRow struct {
	Store, ManagedBy string
	Records          bool
	Min              string
	Max, Default     *string
}

func findLimits(ctx context.Context, q querier, org string) (map[catalog.PolicyKey]catalog.Limits, error) {
	rows, err := q.Query(ctx, selectPolicies, org)
	if err != nil {
		return nil, fmt.Errorf("read TTL policies of %s: %w", org, err)
	}
	overrides, err := pgx.CollectRows(rows, pgx.RowToStructByPos[policyRow])
	if err != nil {
		return nil, fmt.Errorf("read TTL policies of %s: %w", org, err)
	}
	return limitsWith(org, overrides)
}

// limitsWith returns the built-in limits with the org's overrides in place of theirs.
func limitsWith(org string, overrides []policyRow) (map[catalog.PolicyKey]catalog.Limits, error) {
	limits := make(map[catalog.PolicyKey]catalog.Limits, len(catalog.BuiltinLimits))
	for k, l := range catalog.BuiltinLimits {
		if l.Max != nil {
			m := *l.Max
			l.Max = &m // callers get their own copy, never a pointer into the built-in table
		}
		limits[k] = l
	}
	for _, o := range overrides {
		l, err := parseLimits(o.Min, o.Max, o.Default)
		if err != nil {
			return nil, fmt.Errorf("TTL policy %s/%s/%s: %w", org, o.Store, o.ManagedBy, err)
		}
		limits[catalog.PolicyKey{Store: catalog.Store(o.Store), ManagedBy: catalog.ManagedBy(o.ManagedBy), Records: o.Records}] = l
	}
	return limits, nil
}

// policyColumns are the scan targets of an org's ttl_policies aggregated into parallel arrays (ttlLimitsQuery).
type policyColumns struct {
	stores, managedBys, mins []string
	records                  []bool
	maxes, defaults          []*string
}

func (c *policyColumns) targets() []any {
	return []any{&c.stores, &c.managedBys, &c.records, &c.mins, &c.maxes, &c.defaults}
}

// rows returns the policies read, as findLimits reads them.
func (c *policyColumns) rows() []policyRow {
	out := make([]policyRow, len(c.stores))
	for i := range c.stores {
		out[i] = policyRow{Store: c.stores[i], ManagedBy: c.managedBys[i], Records: c.records[i], Min: c.mins[i], Max: c.maxes[i], Default: c.defaults[i]}
	}
	return out
}

// parseLimits reads a policy row; a NULL default_value is a null default (record policies only).
func parseLimits(minValue string, maxValue, defaultValue *string) (catalog.Limits, error) {
	var l catalog.Limits
	var err error
	if l.Min, err = retention.ParsePeriod(minValue); err != nil {
		return l, err
	}
	if defaultValue != nil {
		if l.Default, err = retention.ParsePeriod(*defaultValue); err != nil {
			return l, err
		}
	}
	if maxValue != nil {
		m, err := retention.ParsePeriod(*maxValue)
		if err != nil {
			return l, err
		}
		l.Max = &m
	}
	return l, nil
}

const upsertPolicy = `
INSERT INTO ttl_policies (org_id, store, managed_by, records, min_value, max_value, default_value, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (org_id, store, managed_by, records) DO UPDATE
SET min_value = EXCLUDED.min_value, max_value = EXCLUDED.max_value,
    default_value = EXCLUDED.default_value, updated_at = EXCLUDED.updated_at`

// SetLimits implements catalog.PolicyService.
func (s *PolicyService) SetLimits(ctx context.Context, org string, key catalog.PolicyKey, l catalog.Limits) error {
	if err := l.Validate(key); err != nil {
		return err
	}
	var maxValue, defaultValue *string
	if l.Max != nil {
		m := l.Max.String()
		maxValue = &m
	}
	if d := l.DefaultTTL(); d != nil {
		v := d.String()
		defaultValue = &v
	}
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkWriteFence(ctx, tx, org); err != nil {
			return err // an org moving to another cell takes its limits along as they were
		}
		_, err := tx.Exec(ctx, upsertPolicy, org, string(key.Store), string(key.ManagedBy), key.Records,
			l.Min.String(), maxValue, defaultValue, s.db.now())
		return err
	})
	if err != nil {
		return fmt.Errorf("set TTL policy %s/%s/%s: %w", org, key.Store, key.ManagedBy, err)
	}
	return nil
}
