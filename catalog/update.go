package catalog

import (
	"maps"
	"slices"
)

// v1Writable names what the Catalog v1 PATCH and PUT /dataSets/{id} write, for the message refusing anything else.
const v1Writable = "name, description, tags and extensions"

// v1Unkept are the writable attributes of Adobe's v1 dataSetRequest that this service does not keep (it stores no
// files, views or diagnostics): refused by name rather than stored and never used.
var v1Unkept = []string{"basePath", "dataSourceId", "enableErrorDiagnostics", "fileDescription", "observableSchema", "schema"}

// ParsePatchV1 validates a decoded JSON body of the Catalog v1 PATCH /dataSets/{id} ("using fields"): each
// top-level attribute sent replaces the dataset's whole (tags and the caller's extension keys too, where v2 merges
// into them), and those not sent stay as they are. Within extensions, each store's rowExpiration is written as v2
// writes it (only ttlValue and rowOverrides, only when sent, under the same limits); the service's fields are
// refused. Each refusal is an EINVALID error naming the field and the rule.
func ParsePatchV1(body map[string]any) (*Patch, error) {
	return parseV1(body, "PATCH")
}

// ParsePut validates a decoded JSON body of the Catalog v1 PUT /dataSets/{id}: the dataset's writable attributes
// whole. name is required; a description, tags or extension keys left out are cleared. Row expiration settings
// change only by what a rowExpiration object sends, as in v2: leaving one out never disables a store's expiry or
// reopens per-row overrides, which would delete or keep rows by omission.
func ParsePut(body map[string]any) (*Patch, error) {
	p, err := parseV1(body, "PUT")
	if err != nil {
		return nil, err
	}
	if p.Name == nil {
		return nil, Invalid("missing-field", "name", "name is required: PUT replaces the dataset's writable attributes (%s)", v1Writable)
	}
	p.SetDescription, p.ReplaceTags, p.ReplaceExtensions = true, true, true
	return p, nil
}

func parseV1(body map[string]any, method string) (*Patch, error) {
	if err := normalizeObject(body); err != nil {
		return nil, err
	}
	p := &Patch{}
	for _, key := range slices.Sorted(maps.Keys(body)) {
		if err := p.parseV1Top(method, key, body[key]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *Patch) parseV1Top(method, key string, value any) error {
	switch key {
	case "name":
		name, err := parseName(value)
		p.Name = &name
		return err
	case "description":
		return p.parseDescription(value)
	case "tags":
		p.ReplaceTags = true
		tags, err := ParseTags(value)
		if err != nil {
			return err
		}
		StripServiceTags(tags)
		p.Tags = tags
		return nil
	case "extensions":
		p.ReplaceExtensions = true
		return p.parseExtensions(value)
	}
	if slices.Contains(v1Unkept, key) {
		return Invalid("unknown-field", key, "%s is a Catalog dataset attribute this service does not keep; %s writes %s", key, method, v1Writable)
	}
	return refuseField(method, key, value, v1Writable)
}
