package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"
)

// Bounds of a legal hold, so that one dataset's holds cannot bloat its answers or the audit log.
const (
	MaxHoldReasonLength    = 1000 // characters
	MaxHoldReferenceLength = 200  // characters
	MaxActiveHolds         = 100  // active holds on one dataset
)

// Hold is a legal hold on a dataset: while it is active (not released), no row of the dataset is removed, by a
// retention run, a row delete or a dataset delete, whatever the TTL says. Holds are modelled on S3 Object Lock's
// legal holds: they have no expiry of their own and last until someone with ScopeRetentionHold releases them.
type Hold struct {
	ID           string
	DatasetID    string
	Reason       string
	Reference    *string // the case or matter it serves, such as "case 2026-114"
	PlacedBy     string
	PlacedClient string
	PlacedAt     time.Time
	ReleasedBy   *string
	ReleasedAt   *time.Time // nil while the hold is active
}

// HoldCreate is a validated request to place a hold.
type HoldCreate struct {
	Reason    string
	Reference *string
}

// holdFields are the fields POST /dataSets/{id}/holds takes.
var holdFields = []string{"reason", "reference"}

// ParseHoldCreate validates a decoded JSON body of POST /dataSets/{id}/holds: reason is required text of 1 to
// MaxHoldReasonLength characters, reference optional text of at most MaxHoldReferenceLength; nothing else is taken.
func ParseHoldCreate(body map[string]any) (HoldCreate, error) {
	var h HoldCreate
	for _, key := range slices.Sorted(maps.Keys(body)) {
		if !slices.Contains(holdFields, key) {
			return h, Invalid("unknown-field", Clip(key), "%s is not a field of a hold; accepted fields are %v", Clip(key), holdFields)
		}
	}
	if body["reason"] == nil {
		return h, Invalid("missing-field", "reason", "reason is required: say why deletion must stop")
	}
	reason, err := holdText("reason", body["reason"], MaxHoldReasonLength, MultiLine)
	if err != nil {
		return h, err
	}
	h.Reason = reason
	if raw, ok := body["reference"]; ok && raw != nil {
		ref, err := holdText("reference", raw, MaxHoldReferenceLength, OneLine)
		if err != nil {
			return h, err
		}
		h.Reference = &ref
	}
	return h, nil
}

// holdText checks one text field of a hold: a string of 1 to max characters, with no NUL or control character
// that would garble a log, an export or a terminal (CheckPlainText; lines says whether tab and line feed pass).
func holdText(field string, raw any, maxLen int, lines TextLines) (string, error) {
	s, ok := raw.(string)
	if !ok {
		return "", Invalid("invalid-type", field, "%s must be a string, got %s", field, jsonType(raw))
	}
	if err := CheckText(field, s); err != nil {
		return "", err
	}
	if n := utf8.RuneCountInString(s); n == 0 || n > maxLen {
		return "", Invalid("invalid-field", field, "%s must be 1 to %d characters, got %d", field, maxLen, n)
	}
	if err := CheckPlainText(field, s, lines); err != nil {
		return "", err
	}
	return s, nil
}

// ValidateHoldID returns an EINVALID error unless id has the shape of a hold id: 24 lowercase hexadecimal
// characters, as dataset ids.
func ValidateHoldID(id string) error {
	if !datasetIDPattern.MatchString(id) {
		return Invalid("invalid-hold-id", "holdId", "hold id %q must be 24 lowercase hexadecimal characters", Clip(id))
	}
	return nil
}

// ErrDatasetHeld is the refusal of a removal the dataset's active hold forbids; it names the hold.
func ErrDatasetHeld(datasetID string, h *Hold, what string) *Error {
	ref := ""
	if h.Reference != nil {
		ref = fmt.Sprintf(" (reference %q)", *h.Reference)
	}
	return &Error{Code: ECONFLICT, Type: "dataset-held", Field: "id", Message: fmt.Sprintf(
		"dataset %s is under legal hold %s%s placed by %s: %s is refused until every hold is released (DELETE /dataSets/%s/holds/{holdId})",
		datasetID, h.ID, ref, h.PlacedBy, what, datasetID)}
}

// HoldService places, lists and releases legal holds. Every method acts within the caller's org and sandbox: a
// dataset of another org or sandbox is ENOTFOUND, as a missing one. Placing and releasing each write their audit
// event (Hold, Release) in the same transaction, and wait for the removals in flight to commit, so that once either
// answers every later removal knows of it.
type HoldService interface {
	// PlaceHold places a hold on the dataset. Returns ENOTFOUND, or ECONFLICT when the dataset already has
	// MaxActiveHolds active holds.
	PlaceHold(ctx context.Context, c *Caller, datasetID string, h HoldCreate) (*Hold, error)
	// FindHolds returns the dataset's active holds, oldest first.
	FindHolds(ctx context.Context, c *Caller, datasetID string) ([]*Hold, error)
	// FindHold returns one hold of the dataset, active or released. Returns ENOTFOUND.
	FindHold(ctx context.Context, c *Caller, datasetID, holdID string) (*Hold, error)
	// ReleaseHold releases an active hold and returns it. Returns ENOTFOUND for a hold that does not exist, or
	// was released already. The next run deletes what has expired, as if there had been no hold, once the
	// dataset has no active hold left.
	ReleaseHold(ctx context.Context, c *Caller, datasetID, holdID string) (*Hold, error)
}
