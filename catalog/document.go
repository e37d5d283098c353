package catalog

import "time"

// EpochMillis is how Adobe's Catalog writes times: milliseconds since the Unix epoch, as a JSON number.
func EpochMillis(t time.Time) int64 { return t.UnixMilli() }

// Document returns the setting in the shape of Adobe's rowExpiration object: ttlValue (null when disabled),
// valueStatus, setBy, updated and, once a run has finished the store, lastCompleted.
func (r RowExpiration) Document() map[string]any {
	doc := map[string]any{
		"ttlValue":    nil,
		"valueStatus": r.ValueStatus,
		"setBy":       r.SetBy,
		"updated":     EpochMillis(r.Updated),
		// deletionManifest is shown whether on or off, so that a caller sees the setting it may change.
		"deletionManifest": r.DeletionManifest,
	}
	if r.TTL != nil {
		doc["ttlValue"] = r.TTL.String()
	}
	if r.LastCompleted != nil {
		doc["lastCompleted"] = EpochMillis(*r.LastCompleted)
	}
	return doc
}

// Document returns the limits in the shape of GET /ttl/{id}: defaultValue (null for records that start without a
// TTL), maxValue (null = no maximum), minValue.
func (l Limits) Document() map[string]any {
	doc := map[string]any{"defaultValue": nil, "minValue": l.Min.String(), "maxValue": nil}
	if d := l.DefaultTTL(); d != nil {
		doc["defaultValue"] = d.String()
	}
	if l.Max != nil {
		doc["maxValue"] = l.Max.String()
	}
	return doc
}

// stringOrNil is a JSON string or null.
func stringOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// AuditDetails returns the change as the details of an Update audit event: for each store touched, its
// rowExpiration before and after; the rowOverrides switch, the name, the description (null for none), the tags and
// the caller's extension keys before and after, each when it changed.
func (c *Change) AuditDetails() map[string]any {
	details := map[string]any{}
	if c == nil {
		return details
	}
	if len(c.RowExpiration) > 0 {
		stores := map[string]any{}
		for store, ch := range c.RowExpiration {
			stores[string(store)] = map[string]any{"before": ch.Before.Document(), "after": ch.After.Document()}
		}
		details["rowExpiration"] = stores
	}
	if c.RowOverrides != nil {
		details["rowOverrides"] = map[string]any{"before": string(c.RowOverrides.Before), "after": string(c.RowOverrides.After)}
	}
	if c.Name != nil {
		details["name"] = map[string]any{"before": c.Name.Before, "after": c.Name.After}
	}
	if c.Description != nil {
		details["description"] = map[string]any{"before": stringOrNil(c.Description.Before), "after": stringOrNil(c.Description.After)}
	}
	if c.Tags != nil {
		details["tags"] = map[string]any{"before": c.Tags.Before, "after": c.Tags.After}
	}
	if c.Extensions != nil {
		details["extensions"] = map[string]any{"before": c.Extensions.Before, "after": c.Extensions.After}
	}
	return details
}
