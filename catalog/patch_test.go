package catalog_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	return m
}

// cloneJSON copies a decoded JSON value through an encode/decode round trip, so the copy shares nothing with it.
func cloneJSON(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	if m == nil {
		return nil
	}
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	return decode(t, string(raw))
}

// cloneDataset copies ds down to every pointer, slice and map, so that comparing it with ds later detects any
// write through a shared reference.
func cloneDataset(t *testing.T, ds *catalog.Dataset) *catalog.Dataset {
	t.Helper()
	c := *ds
	if ds.Description != nil {
		d := *ds.Description
		c.Description = &d
	}
	if ds.Tags != nil {
		c.Tags = make(map[string][]string, len(ds.Tags))
		for k, v := range ds.Tags {
			c.Tags[k] = slices.Clone(v)
		}
	}
	c.SchemaRef = cloneJSON(t, ds.SchemaRef)
	c.Extensions = cloneJSON(t, ds.Extensions)
	if ds.RowExpiration != nil {
		c.RowExpiration = make(map[catalog.Store]catalog.RowExpiration, len(ds.RowExpiration))
		for store, re := range ds.RowExpiration {
			if re.TTL != nil {
				p := *re.TTL
				re.TTL = &p
			}
			if re.LastCompleted != nil {
				lc := *re.LastCompleted
				re.LastCompleted = &lc
			}
			c.RowExpiration[store] = re
		}
	}
	return &c
}

// patchBundle is a profile-enabled CUSTOMER time-series dataset keeping lake rows P12M and profile rows P6M, and a
// caller patching it at a fixed time.
type patchBundle struct {
	ds        *catalog.Dataset
	caller    *catalog.Caller
	now       time.Time
	completed time.Time
	limits    map[catalog.PolicyKey]catalog.Limits
}

func setup(t *testing.T) *patchBundle {
	t.Helper()
	created := time.Date(2026, 1, 10, 8, 0, 0, 0, time.UTC)
	completed := created.Add(48 * time.Hour)
	lake, profile := mustParse(t, "P12M"), mustParse(t, "P6M")
	description := "web clicks"
	return &patchBundle{
		ds: &catalog.Dataset{
			ID: "0123456789abcdef01234567", Org: "ACME@AdobeOrg", Sandbox: "prod", Name: "clicks", Description: &description,
			Tags:           map[string][]string{"team": {"web"}, "unifiedProfile": {"enabled:true"}},
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer},
			SchemaRef:      map[string]any{"id": "https://ns.adobe.com/acme/schemas/1"},
			Extensions: map[string]any{
				"acme": map[string]any{"owner": map[string]any{"team": "web", "oncall": []any{"ann", "bob"}}, "cost": 12.5},
			},
			RowExpiration: map[catalog.Store]catalog.RowExpiration{
				catalog.LakeHouse: {TTL: &lake, ValueStatus: catalog.ValueDefault, SetBy: catalog.SetByService, Updated: created, LastCompleted: &completed},
				catalog.Profile:   {TTL: &profile, ValueStatus: catalog.ValueDefault, SetBy: catalog.SetByService, Updated: created},
			},
			Version: 3, Created: created, Updated: created,
			CreatedUser: "creator@example.com", UpdatedUser: "creator@example.com", CreatedClient: "seed-client",
		},
		caller:    &catalog.Caller{User: "editor@example.com", ClientID: "editor-client", Org: "ACME@AdobeOrg", Sandbox: "prod"},
		now:       time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC),
		completed: completed,
		limits:    catalog.BuiltinLimits,
	}
}

// ttlPatch builds a patch of ttlValues; "null" stands for JSON null.
func ttlPatch(t *testing.T, values map[catalog.Store]string) *catalog.Patch {
	t.Helper()
	p := &catalog.Patch{TTL: map[catalog.Store]*retention.Period{}}
	for store, v := range values {
		if v == "null" {
			p.TTL[store] = nil
			continue
		}
		period := mustParse(t, v)
		p.TTL[store] = &period
	}
	return p
}

func (b *patchBundle) apply(t *testing.T, p *catalog.Patch) (*catalog.Dataset, *catalog.Change, error) {
	t.Helper()
	return catalog.ApplyPatch(b.ds, p, b.limits, b.caller, b.now)
}

func ttlOf(ds *catalog.Dataset, store catalog.Store) string {
	re, ok := ds.RowExpiration[store]
	if !ok {
		return "<unset>"
	}
	if re.TTL == nil {
		return "null"
	}
	return re.TTL.String()
}

const (
	lakeField    = "extensions.adobe_lakeHouse.rowExpiration.ttlValue"
	profileField = "extensions.adobe_unifiedProfile.rowExpiration.ttlValue"
)

func TestParsePatch(t *testing.T) {
	t.Parallel()

	t.Run("ReadsEveryWritableField", func(t *testing.T) {
		t.Parallel()
		p, err := catalog.ParsePatch(decode(t, `{
			"description": "new",
			"tags": {"team": ["data", "web"], "old": null},
			"extensions": {
				"adobe_lakeHouse": {"rowExpiration": {"ttlValue": "P3M"}, "note": "kept"},
				"adobe_unifiedProfile": {"rowExpiration": {"ttlValue": null}},
				"acme": {"owner": {"team": "data"}}
			}
		}`))
		require.NoError(t, err)
		require.True(t, p.SetDescription)
		require.NotNil(t, p.Description)
		require.Equal(t, "new", *p.Description)
		require.Equal(t, map[string][]string{"team": {"data", "web"}, "old": nil}, p.Tags)
		require.Len(t, p.TTL, 2)
		require.Equal(t, mustParse(t, "P3M"), *p.TTL[catalog.LakeHouse])
		require.Contains(t, p.TTL, catalog.Profile)
		require.Nil(t, p.TTL[catalog.Profile], "null disables expiry for the store")
		// Keys under a store other than rowExpiration are the caller's own and are kept for the merge.
		require.Equal(t, map[string]any{
			"adobe_lakeHouse": map[string]any{"note": "kept"},
			"acme":            map[string]any{"owner": map[string]any{"team": "data"}},
		}, p.Extensions)
	})

	t.Run("NullDescriptionClears", func(t *testing.T) {
		t.Parallel()
		p, err := catalog.ParsePatch(decode(t, `{"description": null}`))
		require.NoError(t, err)
		require.True(t, p.SetDescription)
		require.Nil(t, p.Description)
	})

	t.Run("EmptyBodyChangesNothing", func(t *testing.T) {
		t.Parallel()
		p, err := catalog.ParsePatch(decode(t, `{}`))
		require.NoError(t, err)
		require.Equal(t, &catalog.Patch{}, p)
	})

	t.Run("FirstRefusalInKeyOrder", func(t *testing.T) {
		t.Parallel()
		// Map order is random; the refusal must not be, or a client would see a different error on each retry.
		body := decode(t, `{"version": "2", "name": "x", "zzz": 1}`)
		for range 20 {
			_, err := catalog.ParsePatch(body)
			requireInvalid(t, err, "read-only-field", "name")
		}
	})
}

func TestParsePatchRefuses(t *testing.T) {
	t.Parallel()
	const re = "extensions.adobe_lakeHouse.rowExpiration"
	for _, tc := range []struct {
		name, body, typ, field string
		message                string // a substring of the message, naming the field or the rule
	}{
		{"Name", `{"name": "x"}`, "read-only-field", "name", "cannot be changed"},
		{"Version", `{"version": "1.0.4"}`, "read-only-field", "version", "is set by the service"},
		{"SchemaRef", `{"schemaRef": {}}`, "read-only-field", "schemaRef", "schemaRef may not be set"},
		{"Unknown", `{"colour": "red"}`, "unknown-field", "colour", "colour is not a dataset field"},
		{"ClassificationKey", `{"classification": {"managedBy": "SYSTEM", "dataBehavior": "record"}}`, "read-only-field", "classification.dataBehavior", "classification.dataBehavior may not be set"},
		{"ClassificationScalar", `{"classification": "record"}`, "read-only-field", "classification", "classification may not be set"},
		{"DescriptionType", `{"description": 5}`, "invalid-type", "description", "got a number"},
		{"DescriptionTooLong", `{"description": "` + strings.Repeat("a", catalog.MaxDescriptionLength+1) + `"}`, "invalid-field", "description", "at most 4096 bytes"},
		{"TagsType", `{"tags": ["web"]}`, "invalid-type", "tags", "got an array"},
		{"TagValueType", `{"tags": {"team": "web"}}`, "invalid-type", "tags.team", "tags.team must be an array of strings"},
		{"TagItemType", `{"tags": {"team": ["web", 7]}}`, "invalid-type", "tags.team[1]", "got a number"},
		{"TagNameEmpty", `{"tags": {"": ["x"]}}`, "invalid-field", "tags", "1 to 256 bytes"},
		{"ExtensionsType", `{"extensions": []}`, "invalid-type", "extensions", "got an array"},
		{"StoreType", `{"extensions": {"adobe_lakeHouse": "P3M"}}`, "invalid-type", "extensions.adobe_lakeHouse", "must be an object, got a string"},
		{"Metrics", `{"extensions": {"adobe_unifiedProfile": {"metrics": {}}}}`, "read-only-field", "extensions.adobe_unifiedProfile.metrics", "the service keeps it"},
		{"RowExpirationType", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": "P3M"}}}`, "invalid-type", re, "must be an object, got a string"},
		{"RowExpirationOwned", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"ttlValue": "P3M", "valueStatus": "custom"}}}}`, "read-only-field", re + ".valueStatus", "set by the service"},
		{"RowExpirationUnknown", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"ttl": "P3M"}}}}`, "unknown-field", re + ".ttl", "only ttlValue, rowOverrides and deletionManifest can be set"},
		{"TTLMissing", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {}}}}`, "missing-field", re + ".ttlValue", "ttlValue is required"},
		{"RowOverridesValue", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"rowOverrides": "off"}}}}`, "invalid-field", re + ".rowOverrides", `must be "allowed" or "refused", got a string off`},
		{"RowOverridesType", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"rowOverrides": false}}}}`, "invalid-field", re + ".rowOverrides", "got a boolean"},
		{"RowOverridesNull", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"rowOverrides": null}}}}`, "invalid-field", re + ".rowOverrides", "got null"},
		{"DeletionManifestString", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"deletionManifest": "true"}}}}`, "invalid-field", re + ".deletionManifest", "must be true or false, got a string true"},
		{"DeletionManifestNull", `{"extensions": {"adobe_unifiedProfile": {"rowExpiration": {"deletionManifest": null}}}}`, "invalid-field", "extensions.adobe_unifiedProfile.rowExpiration.deletionManifest", "got null"},
		{"RowOverridesOnProfile", `{"extensions": {"adobe_unifiedProfile": {"rowExpiration": {"rowOverrides": "refused"}}}}`, "invalid-field", "extensions.adobe_unifiedProfile.rowExpiration.rowOverrides", "set extensions.adobe_lakeHouse.rowExpiration.rowOverrides"},
		{"ID", `{"id": "0123456789abcdef01234567"}`, "read-only-field", "id", "given by the service"},
		{"TTLFraction", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"ttlValue": "P1.5M"}}}}`, "invalid-ttl", re + ".ttlValue", `"P1.5M": fractions are not allowed`},
		{"TTLNumber", `{"extensions": {"adobe_lakeHouse": {"rowExpiration": {"ttlValue": 30}}}}`, "invalid-ttl", re + ".ttlValue", "got a number 30"},
		{"TTLProfileTime", `{"extensions": {"adobe_unifiedProfile": {"rowExpiration": {"ttlValue": "PT1H"}}}}`, "invalid-ttl", "extensions.adobe_unifiedProfile.rowExpiration.ttlValue", "time parts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := catalog.ParsePatch(decode(t, tc.body))
			require.Nil(t, p)
			ce := requireInvalid(t, err, tc.typ, tc.field)
			require.Contains(t, ce.Message, tc.message)
		})
	}
}

func TestApplyPatch(t *testing.T) {
	t.Parallel()

	t.Run("LakeShortenedBelowProfileLowersProfile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next, change, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P3M"}))
		require.NoError(t, err)
		require.Equal(t, "P3M", ttlOf(next, catalog.LakeHouse))
		require.Equal(t, "P3M", ttlOf(next, catalog.Profile), "a profile copy may not outlive its source")
		// Both stores changed in the same patch, so both belong in the audit event.
		require.Len(t, change.RowExpiration, 2)
		profile := change.RowExpiration[catalog.Profile]
		require.Equal(t, "P6M", profile.Before.TTL.String())
		require.Equal(t, "P3M", profile.After.TTL.String())
		for _, store := range catalog.Stores {
			after := next.RowExpiration[store]
			require.Equal(t, catalog.ValueCustom, after.ValueStatus, store)
			require.Equal(t, catalog.SetByUser, after.SetBy, store)
			require.Equal(t, b.now, after.Updated, store)
			require.Equal(t, after, change.RowExpiration[store].After, store)
		}
		// The time of the last retention run is history, not a setting: the patch keeps it.
		require.Equal(t, &b.completed, next.RowExpiration[catalog.LakeHouse].LastCompleted)
	})

	t.Run("LakeShortenedAboveProfileLeavesProfile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next, change, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P9M"}))
		require.NoError(t, err)
		require.Equal(t, "P9M", ttlOf(next, catalog.LakeHouse))
		require.Equal(t, b.ds.RowExpiration[catalog.Profile], next.RowExpiration[catalog.Profile])
		require.Len(t, change.RowExpiration, 1)
		require.Contains(t, change.RowExpiration, catalog.LakeHouse)
	})

	t.Run("LakeShortenedToProfileLeavesProfile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Equal is not longer: the profile keeps its own setting, default status included.
		next, change, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P180D"}))
		require.NoError(t, err)
		require.Equal(t, b.ds.RowExpiration[catalog.Profile], next.RowExpiration[catalog.Profile])
		require.NotContains(t, change.RowExpiration, catalog.Profile)
	})

	t.Run("LakeShortenedBelowNullProfileLowersProfile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		re := b.ds.RowExpiration[catalog.Profile]
		re.TTL = nil
		b.ds.RowExpiration[catalog.Profile] = re
		// A profile that keeps rows forever outlives any lake TTL.
		next, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P2Y"}))
		require.NoError(t, err)
		require.Equal(t, "P2Y", ttlOf(next, catalog.Profile))
	})

	t.Run("LoweredProfileMustFitItsLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.limits = maps.Clone(catalog.BuiltinLimits)
		profileKey := catalog.PolicyKey{Store: catalog.Profile, ManagedBy: catalog.Customer}
		l := b.limits[profileKey]
		l.Min = mustParse(t, "P60D")
		b.limits[profileKey] = l
		// The lake may go to 45 days, but dragging the profile along would break its 60-day minimum.
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P45D"}))
		ce := requireInvalid(t, err, "ttl-out-of-range", profileField)
		require.Contains(t, ce.Message, "P45D is below minValue P60D")
	})

	t.Run("ProfileLongerThanLakeRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.Profile: "P2Y"}))
		ce := requireInvalid(t, err, "profile-ttl-longer-than-lake", profileField)
		require.Contains(t, ce.Message, "profile ttlValue P2Y")
		require.Contains(t, ce.Message, "data lake ttlValue P12M")
	})

	t.Run("ProfileLongerThanNewLakeRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Both in one patch: the profile is checked against the lake value being set, not the stored one.
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P2M", catalog.Profile: "P3M"}))
		ce := requireInvalid(t, err, "profile-ttl-longer-than-lake", profileField)
		require.Contains(t, ce.Message, "P3M")
		require.Contains(t, ce.Message, "P2M")
	})

	t.Run("ProfileNullCountsAsLongest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.Profile: "null"}))
		ce := requireInvalid(t, err, "profile-ttl-longer-than-lake", profileField)
		require.Contains(t, ce.Message, "profile ttlValue null")
		require.Contains(t, ce.Message, "data lake ttlValue P12M")
	})

	t.Run("LakeNullAllowsAnyProfile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "null", catalog.Profile: "null"}))
		require.NoError(t, err)
		require.Equal(t, "null", ttlOf(next, catalog.LakeHouse))
		require.Equal(t, "null", ttlOf(next, catalog.Profile))
		require.Equal(t, catalog.ValueCustom, next.RowExpiration[catalog.Profile].ValueStatus)
	})

	t.Run("LimitsAreInclusive", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			store catalog.Store
			ttl   string
			ok    bool
		}{
			{catalog.LakeHouse, "P30D", true},
			{catalog.LakeHouse, "P29D", false},
			{catalog.LakeHouse, "P4W", false},
			{catalog.LakeHouse, "P10Y", true},
			{catalog.LakeHouse, "P3601D", false},
			{catalog.Profile, "P1D", true},
		} {
			b := setup(t)
			next, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{tc.store: tc.ttl}))
			if tc.ok {
				require.NoError(t, err, "%s %s", tc.store, tc.ttl)
				require.Equal(t, tc.ttl, ttlOf(next, tc.store))
				continue
			}
			require.Nil(t, next)
			field := lakeField
			if tc.store == catalog.Profile {
				field = profileField
			}
			requireInvalid(t, err, "ttl-out-of-range", field)
		}
	})

	t.Run("SystemNullRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.Classification.ManagedBy = catalog.System
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "null"}))
		requireInvalid(t, err, "ttl-null-not-allowed", lakeField)
	})

	t.Run("SystemUsesSystemLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.Classification.ManagedBy = catalog.System
		// P12M is fine for a CUSTOMER profile but twice the SYSTEM profile cap of 90 days.
		_, _, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.Profile: "P4M"}))
		ce := requireInvalid(t, err, "ttl-out-of-range", profileField)
		require.Contains(t, ce.Message, "above maxValue P90D")
	})

	t.Run("RecordDatasetTakesTheRecordLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ds.Classification.DataBehavior = catalog.Record
		b.ds.RowExpiration = map[catalog.Store]catalog.RowExpiration{catalog.LakeHouse: {}, catalog.Profile: {}}
		// P1D is below the time-series lake minimum (P30D) but the record minimum itself.
		next, change, err := b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P1D"}))
		require.NoError(t, err)
		require.Equal(t, "P1D", next.RowExpiration[catalog.LakeHouse].TTL.String())
		require.Contains(t, change.RowExpiration, catalog.LakeHouse)

		_, _, err = b.apply(t, ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P11Y"}))
		ce := requireInvalid(t, err, "ttl-out-of-range", lakeField)
		require.Contains(t, ce.Message, "above maxValue P10Y")
	})

	t.Run("BumpsVersionAndRecordsEditor", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next, change, err := b.apply(t, &catalog.Patch{SetDescription: true})
		require.NoError(t, err)
		require.Nil(t, next.Description, "a description set to null is cleared")
		require.Equal(t, b.ds.Version+1, next.Version)
		require.Equal(t, b.now, next.Updated)
		require.Equal(t, b.caller.User, next.UpdatedUser)
		require.Equal(t, b.ds.CreatedUser, next.CreatedUser)
		require.Equal(t, b.ds.Created, next.Created)
		require.Empty(t, change.RowExpiration)
	})

	t.Run("MergesTagsAndExtensions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next, _, err := b.apply(t, &catalog.Patch{
			Tags:       map[string][]string{"team": {"data"}, "unifiedProfile": nil, "region": {"eu"}},
			Extensions: map[string]any{"acme": map[string]any{"owner": map[string]any{"oncall": []any{"cat"}}}, "other": 1.0},
		})
		require.NoError(t, err)
		require.Equal(t, map[string][]string{"team": {"data"}, "region": {"eu"}}, next.Tags)
		require.Equal(t, map[string]any{
			"acme":  map[string]any{"owner": map[string]any{"team": "web", "oncall": []any{"cat"}}, "cost": 12.5},
			"other": 1.0,
		}, next.Extensions)
	})

	t.Run("InputNotModified", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		before := cloneDataset(t, b.ds)
		description := "changed"
		p := ttlPatch(t, map[catalog.Store]string{catalog.LakeHouse: "P3M"})
		p.SetDescription, p.Description = true, &description
		p.Tags = map[string][]string{"team": {"data"}, "unifiedProfile": nil, "region": {"eu"}}
		p.Extensions = map[string]any{"acme": map[string]any{"owner": map[string]any{"team": "data"}, "new": true}}
		next, _, err := b.apply(t, p)
		require.NoError(t, err)
		// The patch did change the result, so an unchanged input is not merely an unchanged patch.
		require.Equal(t, "P3M", ttlOf(next, catalog.Profile))
		require.Equal(t, "data", next.Extensions["acme"].(map[string]any)["owner"].(map[string]any)["team"])
		require.Equal(t, before, b.ds)
	})

	t.Run("ResultDoesNotShareMapsWithInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		before := cloneDataset(t, b.ds)
		next, _, err := b.apply(t, &catalog.Patch{SetDescription: true})
		require.NoError(t, err)
		// The caller goes on to change the result (the store layer fills it in); the input must not follow.
		next.Extensions["acme"].(map[string]any)["owner"].(map[string]any)["team"] = "hijacked"
		next.Extensions["acme"].(map[string]any)["added"] = true
		next.Tags["added"] = []string{"x"}
		delete(next.Tags, "team")
		next.RowExpiration[catalog.LakeHouse] = catalog.RowExpiration{}
		require.Equal(t, before, b.ds)
	})
}

func TestDeepMerge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		dst, src, want string // JSON objects; "null" for a nil map
	}{
		{"ObjectsMerge", `{"a": {"x": 1, "y": 2}, "b": 1}`, `{"a": {"y": 3, "z": 4}}`, `{"a": {"x": 1, "y": 3, "z": 4}, "b": 1}`},
		{"DeepObjectsMerge", `{"a": {"b": {"c": 1, "d": 2}}}`, `{"a": {"b": {"d": 3}}}`, `{"a": {"b": {"c": 1, "d": 3}}}`},
		{"ArraysReplace", `{"a": [1, 2, 3]}`, `{"a": [4]}`, `{"a": [4]}`},
		{"ArrayReplacesObject", `{"a": {"x": 1}}`, `{"a": [1]}`, `{"a": [1]}`},
		{"NullReplacesAndStays", `{"a": {"x": 1}}`, `{"a": null}`, `{"a": null}`},
		{"ScalarReplacesObject", `{"a": {"x": 1}}`, `{"a": "s"}`, `{"a": "s"}`},
		{"ObjectReplacesScalar", `{"a": 1}`, `{"a": {"b": 2}}`, `{"a": {"b": 2}}`},
		{"MissingIntermediatesCreated", `{"z": 0}`, `{"a": {"b": {"c": 1}}}`, `{"z": 0, "a": {"b": {"c": 1}}}`},
		{"NilDestination", `null`, `{"a": {"b": 1}}`, `{"a": {"b": 1}}`},
		{"EmptySource", `{"a": 1}`, `{}`, `{"a": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var dst, src, want map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.dst), &dst))
			require.NoError(t, json.Unmarshal([]byte(tc.src), &src))
			require.NoError(t, json.Unmarshal([]byte(tc.want), &want))
			require.Equal(t, want, catalog.DeepMerge(dst, src))
		})
	}
}

func TestDeepMergeDoesNotAliasSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dst  string // "null" for a nil map
	}{
		{"MergedIntoExistingObject", `{"acme": {"cost": 1}}`},
		{"CreatedUnderMissingKey", `{"other": 1}`},
		{"CreatedInNilDestination", `null`},
		{"ReplacingScalar", `{"acme": 5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var dst map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.dst), &dst))
			src := decode(t, `{"acme": {"owner": {"team": "web"}}}`)
			srcBefore := cloneJSON(t, src)
			got := catalog.DeepMerge(dst, src)
			// Later changes to the merged document, directly or by merging more into it, must leave the source alone.
			owner := got["acme"].(map[string]any)["owner"].(map[string]any)
			owner["team"] = "hijacked"
			owner["added"] = true
			catalog.DeepMerge(got, decode(t, `{"acme": {"owner": {"more": 1}, "extra": 2}}`))
			require.Equal(t, srcBefore, src)
		})
	}
}
