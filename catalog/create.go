package catalog

import (
	"maps"
	"slices"
	"time"
	"unicode/utf8"
)

// Size limits of a dataset's text fields, so that one dataset cannot bloat every listing.
const (
	MaxNameLength        = 256
	MaxDescriptionLength = 4096
)

// createFields are the fields POST /dataSets takes; anything else is refused rather than silently dropped.
var createFields = []string{"classification", "description", "name", "schemaRef", "tags"}

// ParseCreate validates a decoded JSON body of POST /dataSets. Each refusal is an EINVALID error naming the field,
// its value and the rule.
func ParseCreate(body map[string]any) (DatasetCreate, error) {
	var create DatasetCreate
	if err := normalizeObject(body); err != nil {
		return create, err
	}
	for _, key := range slices.Sorted(maps.Keys(body)) {
		if !slices.Contains(createFields, key) {
			if _, ok := serviceOwned[key]; ok {
				return create, Invalid("read-only-field", key, "%s is set by the service and cannot be sent when creating a dataset", key)
			}
			return create, Invalid("unknown-field", Clip(key), "%s is not a field of a new dataset; accepted fields are %v", Clip(key), createFields)
		}
	}
	name, err := parseName(body["name"])
	if err != nil {
		return create, err
	}
	create.Name = name
	if create.Description, err = parseCreateDescription(body); err != nil {
		return create, err
	}
	if raw, ok := body["tags"]; ok && raw != nil {
		if create.Tags, err = ParseTags(raw); err != nil {
			return create, err
		}
		if err := RefuseServiceTags(create.Tags); err != nil {
			return create, err
		}
		for k, v := range create.Tags {
			if v == nil {
				delete(create.Tags, k)
			}
		}
	}
	if create.Classification, err = parseClassification(body["classification"]); err != nil {
		return create, err
	}
	if raw, ok := body["schemaRef"]; ok && raw != nil {
		ref, ok := raw.(map[string]any)
		if !ok {
			return create, Invalid("invalid-type", "schemaRef", "schemaRef must be an object with id and contentType, got %s", jsonType(raw))
		}
		create.SchemaRef = ref
	}
	written := []string{"description", "tags", "schemaRef"}
	return create, checkDocumentSize(documentParts(create.Description, create.Tags, nil, create.SchemaRef), written, 0)
}

func parseName(raw any) (string, error) {
	if raw == nil {
		return "", Invalid("missing-field", "name", "name is required")
	}
	name, ok := raw.(string)
	if !ok {
		return "", Invalid("invalid-type", "name", "name must be a string, got %s", jsonType(raw))
	}
	if name == "" || len(name) > MaxNameLength || !utf8.ValidString(name) {
		return "", Invalid("invalid-field", "name", "name must be 1 to %d bytes of UTF-8 text", MaxNameLength)
	}
	if err := CheckPlainText("name", name, OneLine); err != nil {
		return "", err
	}
	return name, nil
}

func parseCreateDescription(body map[string]any) (*string, error) {
	var p Patch
	raw, ok := body["description"]
	if !ok {
		return nil, nil
	}
	if err := p.parseDescription(raw); err != nil {
		return nil, err
	}
	return p.Description, nil
}

func parseClassification(raw any) (Classification, error) {
	c := Classification{DataBehavior: TimeSeries, ManagedBy: Customer}
	if raw == nil {
		return c, nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return c, Invalid("invalid-type", "classification", "classification must be an object, got %s", jsonType(raw))
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		value := obj[key]
		switch key {
		case "dataBehavior":
			s, _ := value.(string)
			if s != string(TimeSeries) && s != string(Record) {
				return c, Invalid("invalid-field", "classification.dataBehavior",
					"classification.dataBehavior must be \"time-series\" or \"record\", got %s", compact(value))
			}
			c.DataBehavior = DataBehavior(s)
		case "managedBy":
			s, _ := value.(string)
			if s != string(Customer) && s != string(System) {
				return c, Invalid("invalid-field", "classification.managedBy",
					"classification.managedBy must be \"CUSTOMER\" or \"SYSTEM\", got %s", compact(value))
			}
			c.ManagedBy = ManagedBy(s)
		default:
			return c, Invalid("unknown-field", "classification."+Clip(key), "classification.%s is not a classification field; use dataBehavior and managedBy", Clip(key))
		}
	}
	return c, nil
}

// NewDataset builds the dataset a create request describes, with each store starting at its policy's defaultValue
// (valueStatus default, setBy service): null for records under the built-in limits.
func NewDataset(create DatasetCreate, limits map[PolicyKey]Limits, c *Caller, id string, now time.Time) *Dataset {
	ds := &Dataset{
		ID: id, Org: c.Org, Sandbox: c.Sandbox, Name: create.Name, Description: create.Description,
		Tags: create.Tags, Classification: create.Classification, SchemaRef: create.SchemaRef,
		Created: now, Updated: now, CreatedUser: c.User, UpdatedUser: c.User, CreatedClient: c.ClientID,
		RowExpiration: map[Store]RowExpiration{}, RowOverrides: OverridesAllowed,
	}
	if ds.Tags == nil {
		ds.Tags = map[string][]string{}
	}
	for _, store := range Stores {
		def := limits[ds.PolicyKey(store)].DefaultTTL()
		ds.RowExpiration[store] = RowExpiration{TTL: def, ValueStatus: ValueDefault, SetBy: SetByService, Updated: now}
	}
	return ds
}
