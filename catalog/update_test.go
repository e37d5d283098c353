package catalog_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

func TestParseRowOverrides(t *testing.T) {
	t.Parallel()

	t.Run("AloneNeedsNoTTL", func(t *testing.T) {
		t.Parallel()
		p, err := catalog.ParsePatch(decode(t, `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"rowOverrides": "refused"}}}}`))
		require.NoError(t, err)
		require.Equal(t, catalog.OverridesRefused, *p.RowOverrides)
		require.Empty(t, p.TTL, "the TTL is left as it is")
	})

	t.Run("BesideTTL", func(t *testing.T) {
		t.Parallel()
		p, err := catalog.ParsePatch(decode(t, `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"rowOverrides": "allowed", "ttlValue": "P3M"}}}}`))
		require.NoError(t, err)
		require.Equal(t, catalog.OverridesAllowed, *p.RowOverrides)
		require.Equal(t, mustParse(t, "P3M"), *p.TTL[catalog.LakeHouse])
	})
}

func TestApplyRowOverrides(t *testing.T) {
	t.Parallel()

	t.Run("SwitchIsAuditedBeforeAndAfter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.RowOverrides = catalog.OverridesAllowed
		refused := catalog.OverridesRefused
		next, change, err := b.apply(t, &catalog.Patch{RowOverrides: &refused})
		require.NoError(t, err)
		require.Equal(t, catalog.OverridesRefused, next.RowOverrides)
		require.Equal(t, catalog.OverridesAllowed, b.ds.RowOverrides, "the dataset given is not modified")
		require.Equal(t, map[string]any{"rowOverrides": map[string]any{"before": "allowed", "after": "refused"}}, change.AuditDetails())
		require.Equal(t, ttlOf(b.ds, catalog.LakeHouse), ttlOf(next, catalog.LakeHouse), "the TTL still applies")
	})

	t.Run("SameValueIsNoChange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.RowOverrides = catalog.OverridesRefused
		refused := catalog.OverridesRefused
		_, change, err := b.apply(t, &catalog.Patch{RowOverrides: &refused})
		require.NoError(t, err)
		require.Empty(t, change.AuditDetails())
	})

	t.Run("RecordDatasetSwitches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.Classification.DataBehavior = catalog.Record
		refused := catalog.OverridesRefused
		next, change, err := b.apply(t, &catalog.Patch{RowOverrides: &refused})
		require.NoError(t, err)
		require.Equal(t, catalog.OverridesRefused, next.RowOverrides)
		require.NotEmpty(t, change.AuditDetails())
	})
}

func TestParseRowRefusesOverridesWhileSwitchedOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ds.RowOverrides = catalog.OverridesRefused
	rc := catalog.RowContext{Dataset: b.ds, Lake: catalog.BuiltinLimits[catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: catalog.Customer}]}
	for field, line := range map[string]string{
		"_ttl":       `{"timestamp": "2026-01-01T00:00:00Z", "_ttl": "P90D"}`,
		"_expiresAt": `{"timestamp": "2026-01-01T00:00:00Z", "_expiresAt": "2026-06-01T00:00:00Z"}`,
	} {
		_, err := rc.ParseRow([]byte(line))
		ce := requireInvalid(t, err, "invalid-row", field)
		require.Contains(t, ce.Message, `rowOverrides is "refused"`)
	}
	_, err := rc.ParseRow([]byte(`{"timestamp": "2026-01-01T00:00:00Z", "_ttl": -1}`))
	requireInvalid(t, err, "invalid-row", "_ttl")
	in, err := rc.ParseRow([]byte(`{"timestamp": "2026-01-01T00:00:00Z", "page": "/"}`))
	require.NoError(t, err, "a line without an override is stored")
	require.Nil(t, in.OwnExpiry)
}

func TestParsePatchV1(t *testing.T) {
	t.Parallel()

	t.Run("SentAttributesReplace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := catalog.ParsePatchV1(decode(t, `{"name": "renamed", "tags": {"team": ["data"]}}`))
		require.NoError(t, err)
		next, change, err := b.apply(t, p)
		require.NoError(t, err)
		require.Equal(t, "renamed", next.Name)
		require.Equal(t, map[string][]string{"team": {"data"}}, next.Tags, "tags are replaced whole, not merged")
		require.Equal(t, b.ds.Description, next.Description, "an attribute not sent is left")
		require.Equal(t, b.ds.Extensions, next.Extensions)
		require.Equal(t, map[string]any{
			"name": map[string]any{"before": "clicks", "after": "renamed"},
			"tags": map[string]any{
				"before": map[string][]string{"team": {"web"}, "unifiedProfile": {"enabled:true"}},
				"after":  map[string][]string{"team": {"data"}},
			},
		}, change.AuditDetails())
	})

	t.Run("DescriptionAndTagsAreAudited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := catalog.ParsePatchV1(decode(t, `{"description": "clicks on the web", "tags": {"team": ["web"], "unifiedProfile": ["enabled:true"], "tier": ["gold"]}}`))
		require.NoError(t, err)
		_, change, err := b.apply(t, p)
		require.NoError(t, err)
		require.Equal(t, map[string]any{
			"description": map[string]any{"before": "web clicks", "after": "clicks on the web"},
			"tags": map[string]any{
				"before": map[string][]string{"team": {"web"}, "unifiedProfile": {"enabled:true"}},
				"after":  map[string][]string{"team": {"web"}, "unifiedProfile": {"enabled:true"}, "tier": {"gold"}},
			},
		}, change.AuditDetails())
	})

	t.Run("SameValuesAreNoChange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := catalog.ParsePatchV1(decode(t, `{"description": "web clicks", "tags": {"unifiedProfile": ["enabled:true"], "team": ["web"]}}`))
		require.NoError(t, err)
		_, change, err := b.apply(t, p)
		require.NoError(t, err)
		require.Empty(t, change.AuditDetails())
	})

	t.Run("ExtensionsReplaceCallerKeysAndKeepTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := catalog.ParsePatchV1(decode(t, `{"extensions": {"other": {"x": 1}, "adobe_lakeHouse": {"rowExpiration": {"ttlValue": "P3M"}}}}`))
		require.NoError(t, err)
		next, change, err := b.apply(t, p)
		require.NoError(t, err)
		require.Equal(t, map[string]any{"other": map[string]any{"x": float64(1)}}, next.Extensions, "acme is gone")
		require.Equal(t, "P3M", ttlOf(next, catalog.LakeHouse))
		require.Equal(t, "P3M", ttlOf(next, catalog.Profile), "the cross-store rule of v2 applies")
		require.Len(t, change.RowExpiration, 2)
	})

	t.Run("TTLLimitsOfV2", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := catalog.ParsePatchV1(decode(t, `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"ttlValue": "P1D"}}}}`))
		require.NoError(t, err)
		_, _, err = b.apply(t, p)
		requireInvalid(t, err, "ttl-out-of-range", "extensions.adobe_lakeHouse.rowExpiration.ttlValue")
	})
}

func TestParseV1Refuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, typ, field, message string
	}{
		{"Version", `{"version": "1.0.4"}`, "read-only-field", "version", "may not be set by PATCH"},
		{"ImsOrg", `{"imsOrg": "X@AdobeOrg"}`, "read-only-field", "imsOrg", "org of a dataset"},
		{"Created", `{"created": 1}`, "read-only-field", "created", "set by the service"},
		{"ID", `{"id": "x"}`, "read-only-field", "id", "address"},
		{"SchemaRef", `{"schemaRef": {"id": "x"}}`, "read-only-field", "schemaRef", "cannot be changed"},
		{"Classification", `{"classification": {"dataBehavior": "record"}}`, "read-only-field", "classification.dataBehavior", "fixed when the dataset is created"},
		{"Unkept", `{"observableSchema": {}}`, "unknown-field", "observableSchema", "does not keep"},
		{"Unknown", `{"colour": "red"}`, "unknown-field", "colour", "writable fields are name, description, tags and extensions"},
		{"NameType", `{"name": 7}`, "invalid-type", "name", "must be a string"},
		{"NameEmpty", `{"name": ""}`, "invalid-field", "name", "1 to 256 bytes"},
		{"NameTooLong", `{"name": "` + strings.Repeat("n", catalog.MaxNameLength+1) + `"}`, "invalid-field", "name", "1 to 256 bytes"},
		{"NameNUL", `{"name": "a\u0000b"}`, "nul-character", "name", "NUL"},
		{"Metrics", `{"extensions": {"adobe_lakeHouse": {"metrics": {}}}}`, "read-only-field", "extensions.adobe_lakeHouse.metrics", "the service keeps it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := catalog.ParsePatchV1(decode(t, tc.body))
			require.Nil(t, p)
			ce := requireInvalid(t, err, tc.typ, tc.field)
			require.Contains(t, ce.Message, tc.message)
		})
	}
}

func TestParsePut(t *testing.T) {
	t.Parallel()

	t.Run("NameRequired", func(t *testing.T) {
		t.Parallel()
		_, err := catalog.ParsePut(decode(t, `{"description": "d"}`))
		ce := requireInvalid(t, err, "missing-field", "name")
		require.Contains(t, ce.Message, "PUT replaces")
	})

	t.Run("LeftOutIsClearedButNotTheSettings", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.RowOverrides = catalog.OverridesRefused
		p, err := catalog.ParsePut(decode(t, `{"name": "clicks"}`))
		require.NoError(t, err)
		next, change, err := b.apply(t, p)
		require.NoError(t, err)
		require.Nil(t, next.Description)
		require.Empty(t, next.Tags)
		require.Empty(t, next.Extensions)
		require.Equal(t, ttlOf(b.ds, catalog.LakeHouse), ttlOf(next, catalog.LakeHouse), "a PUT without rowExpiration keeps the TTL")
		require.Equal(t, catalog.OverridesRefused, next.RowOverrides, "and the switch")
		// What the PUT cleared is in its Update event, before and after.
		require.Equal(t, map[string]any{
			"description": map[string]any{"before": "web clicks", "after": nil},
			"tags": map[string]any{
				"before": map[string][]string{"team": {"web"}, "unifiedProfile": {"enabled:true"}},
				"after":  map[string][]string{},
			},
			"extensions": map[string]any{"before": b.ds.Extensions, "after": map[string]any{}},
		}, change.AuditDetails())
		require.Equal(t, b.ds.Version+1, next.Version)
	})

	t.Run("MessagesNamePUT", func(t *testing.T) {
		t.Parallel()
		_, err := catalog.ParsePut(decode(t, `{"name": "n", "updatedUser": "x"}`))
		ce := requireInvalid(t, err, "read-only-field", "updatedUser")
		require.Contains(t, ce.Message, "may not be set by PUT")
	})
}
