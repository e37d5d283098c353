package catalog

import (
	"context"

	"github.com/acme/retention/retention"
)

// Limits bound the TTL of one store of a dataset: Min and Max (nil = no maximum) are inclusive, and Default is the
// TTL a new dataset starts with. A zero Default is null, which only the limits of record datasets may have: records
// do not expire until a TTL is set, as Cosmos DB's containers.
type Limits struct {
	Min     retention.Period
	Max     *retention.Period
	Default retention.Period
}

// DefaultTTL returns the TTL a new dataset starts with: nil when Default is null.
func (l Limits) DefaultTTL() *retention.Period {
	if l.Default.IsZero() {
		return nil
	}
	d := l.Default
	return &d
}

// PolicyKey names the limits that apply to one store of the datasets of one owner kind and one data behavior.
type PolicyKey struct {
	Store     Store
	ManagedBy ManagedBy
	// Records selects the limits of record datasets, whose TTLs count from each row's last write; false, those of
	// time-series datasets.
	Records bool
}

func mustPeriod(s string) retention.Period {
	p, err := retention.ParsePeriod(s)
	if err != nil {
		panic(err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// BuiltinLimits are the limits every org has until an admin overrides them (retentionctl policy set): the data lake
// keeps time-series rows 30 days at least, since it is the processing backup during ingestion; SYSTEM datasets are
// capped as Adobe caps app-managed ones (13 months in the lake, 90 days in the profile store). Record datasets start
// with no TTL (null, Cosmos DB's default) and take one from a day to 10 years.
var BuiltinLimits = map[PolicyKey]Limits{
	{LakeHouse, Customer, false}: {Min: mustPeriod("P30D"), Max: ptr(mustPeriod("P10Y")), Default: mustPeriod("P12M")},
	{LakeHouse, System, false}:   {Min: mustPeriod("P30D"), Max: ptr(mustPeriod("P13M")), Default: mustPeriod("P13M")},
	{Profile, Customer, false}:   {Min: mustPeriod("P1D"), Max: ptr(mustPeriod("P10Y")), Default: mustPeriod("P12M")},
	{Profile, System, false}:     {Min: mustPeriod("P1D"), Max: ptr(mustPeriod("P90D")), Default: mustPeriod("P90D")},
	{LakeHouse, Customer, true}:  recordLimits,
	{LakeHouse, System, true}:    recordLimits,
	{Profile, Customer, true}:    recordLimits,
	{Profile, System, true}:      recordLimits,
}

// recordLimits are the built-in limits of record datasets in every store and for every owner.
var recordLimits = Limits{Min: mustPeriod("P1D"), Max: ptr(mustPeriod("P10Y"))}

// Validate checks that the limits are consistent for their key: Min <= Default <= Max, and a null Default only for
// record datasets.
func (l Limits) Validate(key PolicyKey) error {
	if l.Min.IsZero() {
		return Invalid("invalid-policy", "minValue", "minValue is required")
	}
	if l.Default.IsZero() {
		if key.Records {
			return nil
		}
		return Invalid("invalid-policy", "defaultValue", "defaultValue is required for time-series datasets; only record datasets may default to null")
	}
	if l.Default.Compare(l.Min) < 0 {
		return Invalid("invalid-policy", "defaultValue", "defaultValue %s must not be below minValue %s", l.Default, l.Min)
	}
	if l.Max != nil && l.Default.Compare(*l.Max) > 0 {
		return Invalid("invalid-policy", "defaultValue", "defaultValue %s must not be above maxValue %s", l.Default, *l.Max)
	}
	return nil
}

// CheckTTL returns an EINVALID error naming field unless ttl lies within the limits. A nil ttl (expiry disabled)
// exceeds every maximum, so it is allowed only for CUSTOMER datasets: SYSTEM datasets keep the system-imposed limits
// that Adobe enforces on app-managed datasets.
func (l Limits) CheckTTL(field string, ttl *retention.Period, owner ManagedBy) error {
	if ttl == nil {
		if owner == System {
			return Invalid("ttl-null-not-allowed", field,
				"null (keep forever) is not allowed for a SYSTEM-managed dataset; ttlValue must lie between %s and %s", l.Min, l.maxString())
		}
		return nil
	}
	if ttl.Compare(l.Min) < 0 {
		return Invalid("ttl-out-of-range", field,
			"ttlValue %s is below minValue %s (periods compare as Postgres intervals: 1Y = 12M, 1M = 30D, 1W = 7D)", ttl, l.Min)
	}
	if l.Max != nil && ttl.Compare(*l.Max) > 0 {
		return Invalid("ttl-out-of-range", field,
			"ttlValue %s is above maxValue %s (periods compare as Postgres intervals: 1Y = 12M, 1M = 30D, 1W = 7D)", ttl, *l.Max)
	}
	return nil
}

func (l Limits) maxString() string {
	if l.Max == nil {
		return "no maximum"
	}
	return l.Max.String()
}

// PolicyService reads and overrides the TTL limits of an org.
type PolicyService interface {
	// FindLimits returns the limits in force for the org: its overrides where it has them, BuiltinLimits elsewhere.
	FindLimits(ctx context.Context, org string) (map[PolicyKey]Limits, error)
	// SetLimits overrides one key's limits for the org, after Validate.
	SetLimits(ctx context.Context, org string, key PolicyKey, limits Limits) error
}
