package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// The sources of a row's expiry in GET /dataSets/{id}/rows/{rowId}/expiry (governedBy.source), each from the one
// rule (retention.Explain): the store's TTL in force, an earlier setting (shorter, or set before the row's expiry
// under the current one) that expired the row first, the row's own _ttl or _expiresAt (as the store recorded which
// set it), its own expiry stored before the store recorded the field (sourceOverride: which one is unknown), _ttl:
// -1, or no TTL that expires it (the TTL in force is null).
const (
	sourceSetting        = "setting"
	sourceEarlierSetting = "earlierSetting"
	sourceRowTTL         = "rowTtl"
	sourceRowExpiresAt   = "rowExpiresAt"
	sourceOverride       = "override"
	sourceNeverExpires   = "neverExpires"
	sourceNoTTL          = "noTtl"
)

// unknownField is ownExpiryField for a row stored before the store recorded which field set its own expiry.
const unknownField = "unknown"

// explainRow answers GET /dataSets/{id}/rows/{rowId}/expiry: why the row is still stored and when it goes.
func (s *Server) explainRow(c echo.Context) error {
	id, err := datasetID(c)
	if err != nil {
		return err
	}
	rowID := c.Param("rowId") // decoded once, by checkParams
	if len(rowID) > catalog.MaxRowIDLength {
		return catalog.Invalid("invalid-parameter", "rowId", "the row's _id has %d bytes; an _id has at most %d, so no row has it", len(rowID), catalog.MaxRowIDLength)
	}
	store := catalog.LakeHouse
	if v := c.QueryParam("store"); v != "" {
		if store = catalog.Store(v); !store.Valid() {
			return catalog.Invalid("invalid-parameter", "store", "store must be adobe_lakeHouse or adobe_unifiedProfile, got %q", catalog.Clip(v))
		}
	}
	x, err := s.explainer.ExplainRow(c.Request().Context(), caller(c), id, store, rowID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.rowExpiryDoc(x))
}

// rowExpiryDoc is the answer of GET …/rows/{rowId}/expiry. Its nextRunAt is the first scheduled run of the store
// at or after deletableAt (and after now): none while a hold keeps the row, or when no setting expires it.
func (s *Server) rowExpiryDoc(x *catalog.RowExpiry) map[string]any {
	e := x.Explained
	clock := "eventTime"
	if x.Dataset.Clock() == retention.LastWrite {
		clock = "lastWrite"
	}
	doc := map[string]any{
		"_id": x.RowID, "dataSetId": x.Dataset.ID, "store": string(x.Store), "evaluatedAt": formatTime(&x.At),
		"clock":      map[string]any{"kind": clock, "value": formatTime(&x.Row.Timestamp)},
		"ingestedAt": formatTime(&x.Row.IngestedAt), "governedBy": governedBy(x),
		"expiresAt": timeOrNil(e.ExpiresAt), "expired": x.Expired,
		"graceValue": x.Grace.String(), "deletableAt": timeOrNil(e.DeletableAt), "deletable": x.Deletable,
		"heldBy": holdRefs(x.HeldBy), "nextRunAt": nil,
	}
	if x.Row.OwnExpiry != nil {
		ownExpiry(doc, x)
	}
	if e.DeletableAt != nil && len(x.HeldBy) == 0 && s.runAt != nil {
		from := *e.DeletableAt
		if from.Before(x.At) {
			from = x.At
		}
		doc["nextRunAt"] = timeOrNil(s.runAt(x.Store, from))
	}
	return doc
}

// governedBy names what sets the row's expiry, and the setting it holds under.
func governedBy(x *catalog.RowExpiry) map[string]any {
	e, n := x.Explained, len(x.History)
	switch {
	case x.Row.Never:
		return map[string]any{"source": sourceNeverExpires, "message": "the row was sent with _ttl: -1: it never expires, whatever the TTL"}
	case e.Governing < 0:
		doc := map[string]any{"source": sourceNoTTL,
			"message": "no TTL setting expires the row: the TTL in force is null, which keeps every row while it is in force, and no earlier setting expired it"}
		if n > 0 {
			doc["setting"] = settingDoc(x, n-1)
		}
		return doc
	}
	doc := map[string]any{"setting": settingDoc(x, e.Governing)}
	switch {
	case x.Row.OwnExpiry != nil:
		doc["source"], doc["message"] = overrideSource(x, fmt.Sprintf("which applies while a TTL is in force: setting %d of %d", e.Governing+1, n))
	case e.Governing < n-1:
		doc["source"] = sourceEarlierSetting
		doc["message"] = fmt.Sprintf("an earlier setting, %s (%d of %d), expired the row before it was replaced: a longer or null TTL since never brings a row back",
			x.History[e.Governing].TTL, e.Governing+1, n)
	default:
		doc["source"] = sourceSetting
		doc["message"] = fmt.Sprintf("the store's TTL in force, %s (setting %d of %d), counted from the row's clock", x.History[e.Governing].TTL, n, n)
	}
	return doc
}

// overrideSource names the row's own expiry as governedBy's source, with its message ending in under: the field that
// set it as the store recorded it, or override when the row was stored before the store recorded which.
func overrideSource(x *catalog.RowExpiry, under string) (source, message string) {
	switch x.OwnExpiryField {
	case catalog.OverrideTTL:
		return sourceRowTTL, fmt.Sprintf("the row's own _ttl, %d seconds after its clock, %s", ownTTLSeconds(x), under)
	case catalog.OverrideExpiresAt:
		return sourceRowExpiresAt, "the row's own _expiresAt, " + under
	}
	return sourceOverride, "the row's own expiry, from _expiresAt or _ttl: the row was stored before the service recorded which (migration 0020), " + under
}

// ownExpiry adds the row's own expiry to its explanation: the instant, the field that set it (unknown for a row
// stored before the store recorded it), and for a _ttl the seconds it added to the row's clock (a period such as P1M
// is kept as what it came to for this row, not as sent).
func ownExpiry(doc map[string]any, x *catalog.RowExpiry) {
	doc["ownExpiresAt"] = formatTime(x.Row.OwnExpiry)
	doc["ownExpiryField"] = unknownField
	if f := x.OwnExpiryField; f != catalog.NoOverrideField {
		doc["ownExpiryField"] = f.String()
	}
	if x.OwnExpiryField == catalog.OverrideTTL {
		doc["ownTtlSeconds"] = ownTTLSeconds(x)
	}
}

// ownTTLSeconds is what the row's _ttl added to its clock, in seconds: whole, as periods are whole days in UTC, and
// counted on Unix seconds, since a _ttl of centuries is longer than a time.Duration holds.
func ownTTLSeconds(x *catalog.RowExpiry) int64 {
	return x.Row.OwnExpiry.Unix() - x.Row.Timestamp.Unix()
}

// settingDoc is the i-th setting of the store's TTL history: its version (1 for the first), TTL and time in force.
func settingDoc(x *catalog.RowExpiry, i int) map[string]any {
	s := x.History[i]
	doc := map[string]any{"version": i + 1, "ttlValue": nil, "effectiveFrom": formatTime(&s.From), "current": s.Until == nil}
	if s.TTL != nil {
		doc["ttlValue"] = s.TTL.String()
	}
	if s.Until != nil {
		doc["effectiveUntil"] = formatTime(s.Until)
	}
	return doc
}

// holdRefs are the active holds that keep a row: no run deletes it while any is.
func holdRefs(holds []*catalog.Hold) []map[string]any {
	out := make([]map[string]any, 0, len(holds))
	for _, h := range holds {
		doc := map[string]any{"id": h.ID, "reason": h.Reason, "placedBy": h.PlacedBy, "placedAt": formatTime(&h.PlacedAt)}
		if h.Reference != nil {
			doc["reference"] = *h.Reference
		}
		out = append(out, doc)
	}
	return out
}

// timeOrNil is a time as the API writes it, or JSON null.
func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return formatTime(t)
}
