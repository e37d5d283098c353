package catalog

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/acme/retention/retention"
)

// Patch is a validated body of PATCH /v2/dataSets/{id} (ParsePatch), or of the Catalog v1 PATCH and PUT
// /dataSets/{id} (ParsePatchV1, ParsePut): only the fields a caller may write, each already checked for type and
// grammar. Limits and cross-store rules need the dataset, so ApplyPatch checks those, whichever route sent it.
type Patch struct {
	// Name renames the dataset; nil leaves it. Only v1 sets it: v2 refuses name as Adobe's v2 body has none.
	Name           *string
	SetDescription bool
	Description    *string // nil with SetDescription clears the description
	// Tags replaces the values of each named tag whole; a nil slice (JSON null) removes the tag.
	Tags map[string][]string
	// TTL sets each named store's ttlValue; a nil period (JSON null) disables expiry for that store.
	TTL map[Store]*retention.Period
	// Extensions is deep-merged into the dataset's extension keys that the service does not own.
	Extensions map[string]any
	// ReplaceTags and ReplaceExtensions make Tags and Extensions replace the dataset's tags and extension keys
	// whole, as v1 writes a top-level attribute, instead of merging into them as v2 does. Row expiration settings
	// are never replaced: only the fields sent in a rowExpiration object change.
	ReplaceTags, ReplaceExtensions bool
	// RowOverrides sets the dataset's switch for per-row expiry; nil leaves it.
	RowOverrides *RowOverrides
	// Manifest sets each named store's deletionManifest; a store not named keeps its own.
	Manifest map[Store]bool
}

// serviceOwned are fields a caller may read but never write; naming them says why the PATCH was refused.
var serviceOwned = map[string]string{
	"id":            "it is the dataset's address, given by the service",
	"name":          "the dataset name cannot be changed",
	"imsOrg":        "the org of a dataset cannot be changed",
	"sandboxName":   "the sandbox of a dataset cannot be changed",
	"sandboxId":     "the sandbox of a dataset cannot be changed",
	"created":       "is set by the service",
	"updated":       "is set by the service",
	"version":       "is set by the service",
	"createdUser":   "is set by the service",
	"updatedUser":   "is set by the service",
	"createdClient": "is set by the service",
	"schemaRef":     "the schema of a dataset cannot be changed",
}

// rowExpirationOwned are the rowExpiration fields the service sets; only ttlValue, rowOverrides and
// deletionManifest are writable.
var rowExpirationOwned = []string{
	"valueStatus", "setBy", "updated", "lastCompleted", "nextRun", "defaultValue", "minValue", "maxValue",
}

// ParsePatch validates a decoded JSON body of PATCH /v2/dataSets/{id}. Each refusal is an EINVALID error naming the
// field by its dotted path, its value and the rule.
func ParsePatch(body map[string]any) (*Patch, error) {
	p := &Patch{}
	if err := normalizeObject(body); err != nil {
		return nil, err
	}
	for _, key := range slices.Sorted(maps.Keys(body)) {
		if err := p.parseTop(key, body[key]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// v2Writable names what PATCH /v2/dataSets/{id} writes, for the message refusing anything else.
const v2Writable = "description, tags, extensions.<store>.rowExpiration.ttlValue, extensions.<store>.rowExpiration.deletionManifest, extensions.adobe_lakeHouse.rowExpiration.rowOverrides and extension keys"

func (p *Patch) parseTop(key string, value any) error {
	switch key {
	case "description":
		return p.parseDescription(value)
	case "tags":
		return p.parseTags(value)
	case "extensions":
		return p.parseExtensions(value)
	}
	return refuseField("PATCH", key, value, v2Writable)
}

// refuseField is the EINVALID error for a top-level field that method does not write: read-only (classification
// and the service's fields, each with why) or unknown, the message listing what it writes.
func refuseField(method, key string, value any, writable string) error {
	if key == "classification" {
		return readOnlyClassification(method, value)
	}
	if why, ok := serviceOwned[key]; ok {
		return Invalid("read-only-field", key, "%s may not be set by %s: %s", key, method, why)
	}
	return Invalid("unknown-field", Clip(key), "%s is not a dataset field that %s can set; writable fields are %s", Clip(key), method, writable)
}

func readOnlyClassification(method string, value any) error {
	obj, ok := value.(map[string]any)
	if !ok || len(obj) == 0 {
		return Invalid("read-only-field", "classification", "classification may not be set by %s: it is fixed when the dataset is created", method)
	}
	field := "classification." + slices.Sorted(maps.Keys(obj))[0]
	return Invalid("read-only-field", field, "%s may not be set by %s: it is fixed when the dataset is created", field, method)
}

func (p *Patch) parseDescription(value any) error {
	p.SetDescription = true
	switch v := value.(type) {
	case nil:
		return nil
	case string:
		if len(v) > MaxDescriptionLength {
			return Invalid("invalid-field", "description", "description must be at most %d bytes", MaxDescriptionLength)
		}
		if err := CheckPlainText("description", v, MultiLine); err != nil {
			return err
		}
		p.Description = &v
		return nil
	}
	return Invalid("invalid-type", "description", "description must be a string or null, got %s", jsonType(value))
}

func (p *Patch) parseTags(value any) error {
	tags, err := ParseTags(value)
	if err != nil {
		return err
	}
	if err := RefuseServiceTags(tags); err != nil {
		return err
	}
	p.Tags = tags
	return nil
}

// ExpirationTag is the tag under which a dataset shows its pending expiration (Adobe's Catalog does the same): its
// expiry in epoch milliseconds. The service derives it whenever a dataset is read; it is never stored.
const ExpirationTag = "adobe/hygiene/ttl"

// RefuseServiceTags refuses tags naming a tag the service owns (ExpirationTag): a request that sets it on its own,
// a PATCH merging it or a create, would forge a scheduled deletion.
func RefuseServiceTags(tags map[string][]string) error {
	if _, ok := tags[ExpirationTag]; ok {
		return Invalid("read-only-field", "tags."+ExpirationTag,
			"tags.%s may not be set: the service shows there the expiry of the dataset's pending expiration; schedule, change or cancel one at /data/core/hygiene/ttl", ExpirationTag)
	}
	return nil
}

// StripServiceTags removes the tags the service owns from tags that replace a dataset's whole set (a v1 PUT or
// PATCH): such a body is most often a dataset read and sent back, and the tag it echoes is shown again, derived,
// by the next read.
func StripServiceTags(tags map[string][]string) {
	delete(tags, ExpirationTag)
}

// ParseTags validates a tags object: each tag name maps to an array of strings, or to null (remove the tag).
func ParseTags(value any) (map[string][]string, error) {
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, Invalid("invalid-type", "tags", "tags must be an object of string arrays, got %s", jsonType(value))
	}
	tags := make(map[string][]string, len(obj))
	for name, raw := range obj {
		field := "tags." + name
		if name == "" || len(name) > 256 {
			return nil, Invalid("invalid-field", "tags", "a tag name must be 1 to 256 bytes long")
		}
		if err := CheckPlainText(childPath("tags", name), name, OneLine); err != nil {
			return nil, err
		}
		if raw == nil {
			tags[name] = nil
			continue
		}
		arr, ok := raw.([]any)
		if !ok {
			return nil, Invalid("invalid-type", field, "%s must be an array of strings, got %s", field, jsonType(raw))
		}
		values := make([]string, 0, len(arr))
		for i, item := range arr {
			s, ok := item.(string)
			if !ok {
				return nil, Invalid("invalid-type", fmt.Sprintf("%s[%d]", field, i), "tag values must be strings, got %s", jsonType(item))
			}
			if err := CheckPlainText(fmt.Sprintf("%s[%d]", field, i), s, OneLine); err != nil {
				return nil, err
			}
			values = append(values, s)
		}
		tags[name] = values
	}
	return tags, nil
}

func (p *Patch) parseExtensions(value any) error {
	obj, ok := value.(map[string]any)
	if !ok {
		return Invalid("invalid-type", "extensions", "extensions must be an object, got %s", jsonType(value))
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		store := Store(key)
		if !store.Valid() {
			p.mergeExtension(key, obj[key])
			continue
		}
		if err := p.parseStore(store, obj[key]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Patch) mergeExtension(key string, value any) {
	if p.Extensions == nil {
		p.Extensions = map[string]any{}
	}
	p.Extensions[key] = value
}

func (p *Patch) parseStore(store Store, value any) error {
	field := "extensions." + string(store)
	obj, ok := value.(map[string]any)
	if !ok {
		return Invalid("invalid-type", field, "%s must be an object, got %s", field, jsonType(value))
	}
	extra := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		switch key {
		case "rowExpiration":
			if err := p.parseRowExpiration(store, obj[key]); err != nil {
				return err
			}
		case "metrics":
			return Invalid("read-only-field", field+".metrics", "%s.metrics may not be set by PATCH: the service keeps it", field)
		default:
			extra[key] = obj[key]
		}
	}
	if len(extra) > 0 {
		p.mergeExtension(string(store), extra)
	}
	return nil
}

func (p *Patch) parseRowExpiration(store Store, value any) error {
	field := "extensions." + string(store) + ".rowExpiration"
	obj, ok := value.(map[string]any)
	if !ok {
		return Invalid("invalid-type", field, "%s must be an object, got %s", field, jsonType(value))
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		switch {
		case key == "ttlValue":
		case key == "rowOverrides":
			if err := p.parseRowOverrides(store, field+".rowOverrides", obj[key]); err != nil {
				return err
			}
		case key == "deletionManifest":
			if err := p.parseManifest(store, field+".deletionManifest", obj[key]); err != nil {
				return err
			}
		case slices.Contains(rowExpirationOwned, key):
			return Invalid("read-only-field", field+"."+key, "%s.%s may not be set by PATCH: it is set by the service", field, key)
		default:
			return Invalid("unknown-field", field+"."+Clip(key), "%s.%s is not a rowExpiration field; only ttlValue, rowOverrides and deletionManifest can be set", field, Clip(key))
		}
	}
	raw, ok := obj["ttlValue"]
	_, switched := obj["rowOverrides"]
	_, manifest := obj["deletionManifest"]
	if !ok && (switched || manifest) {
		return nil
	}
	if !ok {
		return Invalid("missing-field", field+".ttlValue", "%s.ttlValue is required unless rowOverrides or deletionManifest is sent", field)
	}
	ttl, err := ParseTTLValue(field+".ttlValue", raw)
	if err != nil {
		return err
	}
	if p.TTL == nil {
		p.TTL = map[Store]*retention.Period{}
	}
	p.TTL[store] = ttl
	return nil
}

// parseRowOverrides reads the dataset's switch for per-row expiry. It is the dataset's, not a store's: it governs
// the lines an ingestion accepts, whichever stores keep them, so it is written on the lake store alone.
func (p *Patch) parseRowOverrides(store Store, field string, raw any) error {
	if store != LakeHouse {
		return Invalid("invalid-field", field,
			"%s cannot be set: rowOverrides governs every line ingested into the dataset; set extensions.adobe_lakeHouse.rowExpiration.rowOverrides", field)
	}
	s, _ := raw.(string)
	if v := RowOverrides(s); v.Valid() {
		p.RowOverrides = &v
		return nil
	}
	return Invalid("invalid-field", field, "%s must be \"allowed\" or \"refused\", got %s %s", field, jsonType(raw), compact(raw))
}

// parseManifest reads a store's deletionManifest: true or false, nothing else (a string "true" is refused, so
// that no caller believes a manifest is kept when it is not).
func (p *Patch) parseManifest(store Store, field string, raw any) error {
	on, ok := raw.(bool)
	if !ok {
		return Invalid("invalid-field", field, "%s must be true or false, got %s %s", field, jsonType(raw), compact(raw))
	}
	if p.Manifest == nil {
		p.Manifest = map[Store]bool{}
	}
	p.Manifest[store] = on
	return nil
}

// ParseTTLValue validates a decoded JSON ttlValue: an ISO-8601 period string under the grammar of
// retention.ParsePeriod, or null to disable expiry. The error names field.
func ParseTTLValue(field string, raw any) (*retention.Period, error) {
	switch v := raw.(type) {
	case nil:
		return nil, nil
	case string:
		period, err := retention.ParsePeriod(v)
		if err != nil {
			return nil, Invalid("invalid-ttl", field, "%s: %v", field, err)
		}
		return &period, nil
	}
	return nil, Invalid("invalid-ttl", field,
		"%s must be an ISO-8601 period string such as \"P3M\" or null, got %s %s", field, jsonType(raw), compact(raw))
}

// Change records what a patch did to each store's row expiration, the rowOverrides switch and the name, for the
// audit event.
type Change struct {
	RowExpiration map[Store]RowExpirationChange
	RowOverrides  *RowOverridesChange // nil when the switch did not move
	Name          *NameChange         // nil when the name did not change
	Description   *DescriptionChange  // nil when the description did not change
	Tags          *TagsChange         // nil when the tags did not change
	Extensions    *ExtensionsChange   // nil when the caller's extension keys did not change
}

// DescriptionChange is a dataset's description before and after; nil is no description.
type DescriptionChange struct {
	Before, After *string
}

// TagsChange is a dataset's tags before and after, whole.
type TagsChange struct {
	Before, After map[string][]string
}

// ExtensionsChange is a dataset's own extension keys (those the service does not own) before and after, whole.
type ExtensionsChange struct {
	Before, After map[string]any
}

// RowOverridesChange is the rowOverrides switch before and after a patch.
type RowOverridesChange struct {
	Before, After RowOverrides
}

// NameChange is a dataset's name before and after a v1 PATCH or PUT.
type NameChange struct {
	Before, After string
}

// RowExpirationChange is a store's setting before and after a patch.
type RowExpirationChange struct {
	Before RowExpiration
	After  RowExpiration
}

// ApplyPatch returns the dataset with the patch applied, and what changed, without modifying ds. It enforces the
// rules that need the dataset: each TTL within its store's limits (those of its data behavior), and
// the cross-store rule that a profile copy never outlives its source (a null TTL counts as the longest). A lake TTL
// shortened below the current profile TTL lowers the profile TTL to the same value in the same change.
func ApplyPatch(ds *Dataset, p *Patch, limits map[PolicyKey]Limits, c *Caller, now time.Time) (*Dataset, *Change, error) {
	next := ds.clone()
	p.applyAttributes(next)
	if _, err := DatasetPrimaryIdentity(next.Extensions); err != nil {
		return nil, nil, err
	}
	change, err := applyTTL(next, p.TTL, limits, now)
	if err != nil {
		return nil, nil, err
	}
	change.applyManifest(next, p.Manifest, now)
	change.noteAttributes(ds, next)
	if err := checkPatchedSize(ds, next, p); err != nil {
		return nil, nil, err
	}
	next.Version++
	next.Updated = now
	next.UpdatedUser = c.User
	return next, change, nil
}

// checkPatchedSize keeps the patched document within MaxDocumentBytes, naming the largest part the patch wrote.
func checkPatchedSize(before, after *Dataset, p *Patch) error {
	_, was, err := documentSize(documentParts(before.Description, before.Tags, before.Extensions, before.SchemaRef))
	if err != nil {
		return err
	}
	var written []string
	if p.SetDescription {
		written = append(written, "description")
	}
	if len(p.Tags) > 0 {
		written = append(written, "tags")
	}
	if len(p.Extensions) > 0 {
		written = append(written, "extensions")
	}
	return checkDocumentSize(documentParts(after.Description, after.Tags, after.Extensions, after.SchemaRef), written, was)
}

// applyAttributes writes the patch's top-level attributes into next: merged into the dataset's, or replacing them.
func (p *Patch) applyAttributes(next *Dataset) {
	if p.Name != nil {
		next.Name = *p.Name
	}
	if p.SetDescription {
		next.Description = p.Description
	}
	if p.ReplaceTags {
		next.Tags = map[string][]string{}
	}
	applyTags(next, p.Tags)
	if p.ReplaceExtensions {
		next.Extensions = nil
	}
	next.Extensions = DeepMerge(next.Extensions, p.Extensions)
	if p.RowOverrides != nil {
		next.RowOverrides = *p.RowOverrides
	}
}

// noteAttributes records the changes of the name, description, tags, caller's extension keys and the rowOverrides
// switch from before to after, so that every Update event says what it changed. An empty map and none are the same.
func (c *Change) noteAttributes(before, after *Dataset) {
	if before.Name != after.Name {
		c.Name = &NameChange{Before: before.Name, After: after.Name}
	}
	if !reflect.DeepEqual(before.Description, after.Description) {
		c.Description = &DescriptionChange{Before: before.Description, After: after.Description}
	}
	if (len(before.Tags) > 0 || len(after.Tags) > 0) && !reflect.DeepEqual(before.Tags, after.Tags) {
		c.Tags = &TagsChange{Before: nonNilTags(before.Tags), After: nonNilTags(after.Tags)}
	}
	if (len(before.Extensions) > 0 || len(after.Extensions) > 0) && !reflect.DeepEqual(before.Extensions, after.Extensions) {
		c.Extensions = &ExtensionsChange{Before: nonNilMap(before.Extensions), After: nonNilMap(after.Extensions)}
	}
	if before.RowOverrides != after.RowOverrides {
		c.RowOverrides = &RowOverridesChange{Before: before.RowOverrides, After: after.RowOverrides}
	}
}

func nonNilTags(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func applyTags(ds *Dataset, tags map[string][]string) {
	if len(tags) == 0 {
		return
	}
	if ds.Tags == nil {
		ds.Tags = map[string][]string{}
	}
	for name, values := range tags {
		if values == nil {
			delete(ds.Tags, name)
			continue
		}
		ds.Tags[name] = values
	}
}

func applyTTL(ds *Dataset, ttl map[Store]*retention.Period, limits map[PolicyKey]Limits, now time.Time) (*Change, error) {
	change := &Change{RowExpiration: map[Store]RowExpirationChange{}}
	if len(ttl) == 0 {
		return change, nil
	}
	want := map[Store]*retention.Period{}
	for _, store := range Stores {
		want[store] = ds.RowExpiration[store].TTL
	}
	for store, period := range ttl {
		field := ttlField(store)
		if err := limits[ds.PolicyKey(store)].CheckTTL(field, period, ds.Classification.ManagedBy); err != nil {
			return nil, err
		}
		want[store] = period
	}
	if err := crossStore(ds, ttl, want, limits); err != nil {
		return nil, err
	}
	for _, store := range Stores {
		_, asked := ttl[store]
		before := ds.RowExpiration[store]
		if !asked && retention.SamePeriod(before.TTL, want[store]) {
			continue
		}
		after := RowExpiration{TTL: want[store], ValueStatus: ValueCustom, SetBy: SetByUser, Updated: now, LastCompleted: before.LastCompleted,
			DeletionManifest: before.DeletionManifest}
		ds.RowExpiration[store] = after
		change.RowExpiration[store] = RowExpirationChange{Before: before, After: after}
	}
	return change, nil
}

// applyManifest sets each named store's deletionManifest on next, and records the stores whose switch moved as
// row-expiration changes, so that the Update event shows it before and after as it shows a TTL. A store with no
// row-expiration setting (none is made by a patch of the switch alone) is left as it is.
func (c *Change) applyManifest(next *Dataset, manifest map[Store]bool, now time.Time) {
	for _, store := range Stores {
		on, asked := manifest[store]
		re, ok := next.RowExpiration[store]
		if !asked || !ok || re.DeletionManifest == on {
			continue
		}
		before := re
		if ch, changed := c.RowExpiration[store]; changed {
			before = ch.Before
		}
		re.DeletionManifest, re.Updated = on, now
		next.RowExpiration[store] = re
		c.RowExpiration[store] = RowExpirationChange{Before: before, After: re}
	}
}

// crossStore enforces that the profile TTL is never longer than the lake TTL.
func crossStore(ds *Dataset, asked, want map[Store]*retention.Period, limits map[PolicyKey]Limits) error {
	lake, profile := want[LakeHouse], want[Profile]
	if !longer(profile, lake) {
		return nil
	}
	if _, ok := asked[Profile]; ok {
		return Invalid("profile-ttl-longer-than-lake", ttlField(Profile),
			"the profile ttlValue %s is longer than the data lake ttlValue %s: a profile copy may not outlive its source (null counts as the longest)",
			periodString(profile), periodString(lake))
	}
	// Only the lake was shortened: lower the profile with it, as the seed's own example does.
	if err := limits[ds.PolicyKey(Profile)].CheckTTL(ttlField(Profile), lake, ds.Classification.ManagedBy); err != nil {
		return err
	}
	want[Profile] = lake
	return nil
}

// longer reports whether a keeps rows longer than b; nil keeps them forever.
func longer(a, b *retention.Period) bool {
	switch {
	case b == nil:
		return false
	case a == nil:
		return true
	}
	return a.Compare(*b) > 0
}

func periodString(p *retention.Period) string {
	if p == nil {
		return "null"
	}
	return p.String()
}

func ttlField(store Store) string {
	return "extensions." + string(store) + ".rowExpiration.ttlValue"
}

// DeepMerge merges src into dst as Adobe's v2 PATCH does and returns dst: objects merge key by key (missing
// intermediate objects are created), while null, arrays and scalars replace the old value whole. Unlike RFC 7386,
// null is stored as a value, not a deletion.
func DeepMerge(dst, src map[string]any) map[string]any {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		srcObj, srcIsObj := v.(map[string]any)
		dstObj, dstIsObj := dst[k].(map[string]any)
		if srcIsObj && dstIsObj {
			dst[k] = DeepMerge(dstObj, srcObj)
			continue
		}
		if srcIsObj {
			dst[k] = DeepMerge(map[string]any{}, srcObj)
			continue
		}
		dst[k] = copyValue(v)
	}
	return dst
}

func (d *Dataset) clone() *Dataset {
	c := *d
	c.Tags = make(map[string][]string, len(d.Tags))
	for k, v := range d.Tags {
		c.Tags[k] = slices.Clone(v)
	}
	c.Extensions = deepCopy(d.Extensions)
	c.RowExpiration = maps.Clone(d.RowExpiration)
	if c.RowExpiration == nil {
		c.RowExpiration = map[Store]RowExpiration{}
	}
	return &c
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

// copyValue copies decoded JSON, so that a merged or cloned document never shares an object or array with the one
// it came from.
func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return deepCopy(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a number"
}

func compact(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.TrimSpace(s)
}
