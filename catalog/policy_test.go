package catalog_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

func mustParse(t *testing.T, s string) retention.Period {
	t.Helper()
	p, err := retention.ParsePeriod(s)
	require.NoError(t, err)
	return p
}

// requireInvalid checks that err is an EINVALID *catalog.Error of the given type about field, and returns it.
// requireInvalid checks that err is an EINVALID catalog error of the type about the field, and returns its message.
func requireInvalid(t *testing.T, err error, typ, field string) invalid {
	t.Helper()
	require.Error(t, err)
	var ce *catalog.Error
	require.True(t, errors.As(err, &ce), "want *catalog.Error, got %T: %v", err, err)
	require.Equal(t, catalog.EINVALID, ce.Code, "%v", err)
	require.Equal(t, typ, ce.Type, "%v", err)
	require.Equal(t, field, ce.Field, "%v", err)
	return invalid{Message: ce.Message}
}

// invalid is what a test reads of a refusal; not an error, so that ignoring it is not a dropped error.
type invalid struct{ Message string }

func TestCheckTTL(t *testing.T) {
	t.Parallel()
	const field = "extensions.adobe_lakeHouse.rowExpiration.ttlValue"
	for _, tc := range []struct {
		key     catalog.PolicyKey
		ttl     string
		refusal string // the error type, "" when the TTL is within the limits
	}{
		// CUSTOMER lake: P30D to P10Y, both ends inclusive.
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P30D", ""},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P1M", ""}, // 1M compares as 30D
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P29D", "ttl-out-of-range"},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P4W", "ttl-out-of-range"}, // 28D
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P5W", ""},                 // 35D
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P10Y", ""},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P120M", ""},  // = P10Y
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P3600D", ""}, // 1Y = 360D
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P3601D", "ttl-out-of-range"},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}, "P10Y1D", "ttl-out-of-range"},
		// SYSTEM lake: capped at 13 months.
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.System}, "P13M", ""},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.System}, "P390D", ""},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.System}, "P13M1D", "ttl-out-of-range"},
		{catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.System}, "P29D", "ttl-out-of-range"},
		// Profile: from one day; SYSTEM capped at 90 days.
		{catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.Customer}, "P1D", ""},
		{catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.System}, "P1D", ""},
		{catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.System}, "P3M", ""}, // = 90D
		{catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.System}, "P91D", "ttl-out-of-range"},
		{catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.System}, "P13W", "ttl-out-of-range"}, // 91D
	} {
		limits := catalog.BuiltinLimits[tc.key]
		ttl := mustParse(t, tc.ttl)
		err := limits.CheckTTL(field, &ttl, tc.key.ManagedBy)
		if tc.refusal == "" {
			require.NoError(t, err, "%v %s", tc.key, tc.ttl)
			continue
		}
		ce := requireInvalid(t, err, tc.refusal, field)
		// The message quotes the refused value and the bound it broke, so a caller sees what to change.
		require.Contains(t, ce.Message, tc.ttl, "%v", tc.key)
		if ttl.Compare(limits.Min) < 0 {
			require.Contains(t, ce.Message, "below minValue "+limits.Min.String())
		} else {
			require.Contains(t, ce.Message, "above maxValue "+limits.Max.String())
		}
	}
}

func TestCheckTTLNull(t *testing.T) {
	t.Parallel()
	const field = "extensions.adobe_unifiedProfile.rowExpiration.ttlValue"

	t.Run("CustomerMayKeepForever", func(t *testing.T) {
		t.Parallel()
		for _, store := range catalog.Stores {
			limits := catalog.BuiltinLimits[catalog.PolicyKey{Store: store, ManagedBy: catalog.Customer}]
			require.NoError(t, limits.CheckTTL(field, nil, catalog.Customer), store)
		}
	})

	t.Run("SystemMayNot", func(t *testing.T) {
		t.Parallel()
		for _, store := range catalog.Stores {
			limits := catalog.BuiltinLimits[catalog.PolicyKey{Store: store, ManagedBy: catalog.System}]
			ce := requireInvalid(t, limits.CheckTTL(field, nil, catalog.System), "ttl-null-not-allowed", field)
			require.Contains(t, ce.Message, "SYSTEM")
			require.Contains(t, ce.Message, limits.Min.String()+" and "+limits.Max.String())
		}
	})

	t.Run("SystemWithoutMaximumSaysSo", func(t *testing.T) {
		t.Parallel()
		limits := catalog.Limits{Min: mustParse(t, "P1D"), Default: mustParse(t, "P1D")}
		ce := requireInvalid(t, limits.CheckTTL(field, nil, catalog.System), "ttl-null-not-allowed", field)
		require.Contains(t, ce.Message, "no maximum")
	})

	t.Run("NoMaximumAcceptsTheLongestPeriod", func(t *testing.T) {
		t.Parallel()
		limits := catalog.Limits{Min: mustParse(t, "P1D"), Default: mustParse(t, "P1D")}
		require.NoError(t, limits.CheckTTL(field, &retention.MaxPeriod, catalog.System))
	})
}

func TestLimitsValidate(t *testing.T) {
	t.Parallel()

	t.Run("BuiltinLimitsAreConsistent", func(t *testing.T) {
		t.Parallel()
		require.Len(t, catalog.BuiltinLimits, len(catalog.Stores)*2*2, "one entry per store, owner and data behavior")
		for key, limits := range catalog.BuiltinLimits {
			require.NoError(t, limits.Validate(key), "%v", key)
		}
	})

	t.Run("RecordLimitsDefaultToNull", func(t *testing.T) {
		t.Parallel()
		for _, store := range catalog.Stores {
			l := catalog.BuiltinLimits[catalog.PolicyKey{Store: store, ManagedBy: catalog.Customer, Records: true}]
			require.Nil(t, l.DefaultTTL(), "records do not expire until a TTL is set")
			require.Equal(t, "P1D", l.Min.String())
			require.Equal(t, "P10Y", l.Max.String())
		}
	})

	t.Run("NullDefaultOnlyForRecords", func(t *testing.T) {
		t.Parallel()
		l := catalog.Limits{Min: mustParse(t, "P1D")}
		require.NoError(t, l.Validate(catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer, Records: true}))
		ce := requireInvalid(t, l.Validate(catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}), "invalid-policy", "defaultValue")
		require.Contains(t, ce.Message, "only record datasets")
	})

	period := func(t *testing.T, s string) *retention.Period {
		t.Helper()
		if s == "" {
			return nil
		}
		p := mustParse(t, s)
		return &p
	}
	for _, tc := range []struct {
		name              string
		minValue, maxV, d string // "" is the zero period for min and default, no maximum for max
		field             string // "" when valid
		message           string
	}{
		{"DefaultEqualsMin", "P30D", "P10Y", "P1M", "", ""},
		{"DefaultEqualsMax", "P30D", "P1Y", "P12M", "", ""},
		{"NoMaximum", "P30D", "", "P100Y", "", ""},
		{"MissingMin", "", "P1Y", "P6M", "minValue", "required"},
		{"MissingDefault", "P30D", "P1Y", "", "defaultValue", "required"},
		{"DefaultBelowMin", "P60D", "", "P59D", "defaultValue", "defaultValue P59D must not be below minValue P60D"},
		{"DefaultWeeksBelowMin", "P30D", "", "P4W", "defaultValue", "defaultValue P4W must not be below minValue P30D"},
		{"DefaultAboveMax", "P30D", "P1Y", "P361D", "defaultValue", "defaultValue P361D must not be above maxValue P1Y"},
		{"MaxBelowMin", "P60D", "P30D", "P45D", "defaultValue", "below minValue P60D"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var l catalog.Limits
			if tc.minValue != "" {
				l.Min = *period(t, tc.minValue)
			}
			if tc.d != "" {
				l.Default = *period(t, tc.d)
			}
			l.Max = period(t, tc.maxV)
			err := l.Validate(catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer})
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			ce := requireInvalid(t, err, "invalid-policy", tc.field)
			require.Contains(t, ce.Message, tc.message)
		})
	}
}
