package catalog

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ExpirationStatus is where a dataset expiration stands. Its transitions: pending → executing → completed when the
// expiry comes due; pending → cancelled by the user (or when the dataset was deleted by other means first);
// cancelled → pending when the user reopens it with a new expiry. Executing and completed are final for the user.
type ExpirationStatus string

// The statuses of a dataset expiration, as Adobe's Data Hygiene API names them.
const (
	ExpirationPending   ExpirationStatus = "pending"
	ExpirationExecuting ExpirationStatus = "executing"
	ExpirationCancelled ExpirationStatus = "cancelled"
	ExpirationCompleted ExpirationStatus = "completed"
)

// ExpirationStatuses lists every status, in the order of its lifecycle.
var ExpirationStatuses = []ExpirationStatus{ExpirationPending, ExpirationExecuting, ExpirationCancelled, ExpirationCompleted}

// Bounds of a dataset expiration.
const (
	// MinExpiryLead is how far in the future an expiry must be when it is set, as Adobe's API requires: a day in
	// which to notice and cancel a mistake.
	MinExpiryLead = 24 * time.Hour
	// DefaultExpirationQuota is how many pending expirations an org may have at once, as Adobe grants RTCDP, AJO and
	// CJA organizations; RETENTION_EXPIRATION_QUOTA sets another.
	DefaultExpirationQuota = 20
	// MaxExpirationQuota bounds the configured quota.
	MaxExpirationQuota = 100_000
	// MaxExpirationSearch bounds the text filters of a listing (author, datasetName, search, ...).
	MaxExpirationSearch = 256
	// DefaultExpirationLimit and MaxExpirationLimit are a listing's page size, as Adobe's: 25 by default, 1 to 100.
	DefaultExpirationLimit = 25
	MaxExpirationLimit     = 100
	// MaxExpirationPage bounds a listing's zero-based page, so that page × limit stays far inside any integer.
	MaxExpirationPage = 1_000_000
	// MaxExpirationHistory bounds the history an expiration keeps: its newest entries; the audit log keeps every
	// change.
	MaxExpirationHistory = 100
	// MaxExpirationsPerDataset bounds a dataset's expirations, open or cancelled (a completed one deleted it), so
	// that create-and-cancel cannot grow them without end: past it, a cancelled one is reopened instead.
	MaxExpirationsPerDataset = 10
)

// QuotaDatasetExpiration is the name of the dataset-expiration quota in GET /quota, as Adobe's.
const QuotaDatasetExpiration = "datasetExpirationQuota"

// Expiration is a dataset's scheduled deletion (Adobe's "dataset expiration", ttlId SD-…), owned by the dataset's
// org and sandbox.
type Expiration struct {
	ID          string
	Org         string
	Sandbox     string
	DatasetID   string
	DatasetName string
	DisplayName string
	Description *string
	Status      ExpirationStatus
	Expiry      time.Time
	// Reason says why a due expiration still waits (its dataset is under a legal hold: derived when it is read, so it
	// names the hold active then), or why it ended cancelled without a user (its dataset was deleted by other means
	// first: stored); empty otherwise.
	Reason      string
	Created     time.Time
	CreatedBy   string
	Updated     time.Time
	UpdatedBy   string
	ExecutingAt *time.Time
	CompletedAt *time.Time
	CancelledAt *time.Time
	// History is the expiration's newest MaxExpirationHistory changes, oldest first; filled only when a read asks
	// for it.
	History []ExpirationEvent
	// Change is the history entry of the change that made this value, which saving it appends; nil for an
	// expiration as read.
	Change *ExpirationEvent
}

// ExpirationEvent is one entry of an expiration's history: what happened, the expiry after it, when and by whom.
type ExpirationEvent struct {
	Status    string    `json:"status"` // created, updated, cancelled, reopened, executing, completed, pending (held)
	Expiry    time.Time `json:"expiry"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
	Reason    string    `json:"reason,omitempty"`
}

// ExpirationCreate is a validated request to schedule a dataset's deletion.
type ExpirationCreate struct {
	DatasetID   string
	Expiry      time.Time
	DisplayName string
	Description *string
}

// ExpirationUpdate is a validated PUT: the fields present change, the others stay.
type ExpirationUpdate struct {
	Expiry      *time.Time
	DisplayName *string
	Description *string
}

// ExpirationFilter selects and orders the expirations of one org and sandbox (GET /ttl). Text fields are
// case-insensitive "contains" matches, except Author, which is exact unless it starts with LIKE or NOT LIKE.
type ExpirationFilter struct {
	DatasetID   string
	DatasetName string
	DisplayName string
	Description string
	Author      string
	Search      string
	Statuses    []ExpirationStatus
	ExpiryFrom  *time.Time
	ExpiryTo    *time.Time
	UpdatedFrom *time.Time
	UpdatedTo   *time.Time
	OrderBy     []ExpirationOrder
	Limit       int
	Page        int
	// WithHistory fills each result's History (include=history).
	WithHistory bool
}

// ExpirationOrder sorts a listing by one of ExpirationOrderFields.
type ExpirationOrder struct {
	Field string
	Desc  bool
}

// ExpirationOrderFields are the fields a listing may be ordered by, as Adobe's orderBy names them.
var ExpirationOrderFields = []string{"datasetName", "description", "displayName", "expiry", "id", "status", "updatedAt", "updatedBy"}

// ExpirationPage is one page of a listing, with the total across pages.
type ExpirationPage struct {
	Results []*Expiration
	Total   int
}

// Quota is an org's use of a bounded resource and its allowance.
type Quota struct {
	Name     string
	Consumed int
	Quota    int
}

// ExpirationService schedules dataset deletions. Every method acts within the caller's org and sandbox: an
// expiration of another org or sandbox is ENOTFOUND, exactly as a missing one. Every change writes an audit event
// in its own transaction.
type ExpirationService interface {
	// CreateExpiration schedules the dataset's deletion. Returns ENOTFOUND for a missing dataset, EFORBIDDEN for a
	// SYSTEM one, EINVALID when the dataset already has an open expiration (naming it), has
	// MaxExpirationsPerDataset already (ErrTooManyExpirations) or the org's quota is used up.
	CreateExpiration(ctx context.Context, c *Caller, create ExpirationCreate) (*Expiration, error)
	// FindExpiration returns the expiration named by its id (SD-…) or, for a dataset id, the dataset's open
	// (pending or executing) one, else its newest; with its History when withHistory is set.
	FindExpiration(ctx context.Context, c *Caller, id string, withHistory bool) (*Expiration, error)
	// FindExpirations returns a page of the expirations matching the filter.
	FindExpirations(ctx context.Context, c *Caller, f ExpirationFilter) (*ExpirationPage, error)
	// UpdateExpiration applies the update under the rules of Expiration.Apply.
	UpdateExpiration(ctx context.Context, c *Caller, id string, u ExpirationUpdate) (*Expiration, error)
	// CancelExpiration cancels a pending expiration (Expiration.Cancel).
	CancelExpiration(ctx context.Context, c *Caller, id string) (*Expiration, error)
	// ExpirationQuota returns the org's pending expirations and its quota.
	ExpirationQuota(ctx context.Context, c *Caller) (Quota, error)
}

// NewExpirationID returns a fresh expiration id, SD- and a UUID, as Adobe's.
func NewExpirationID() string { return "SD-" + uuid.NewString() }

var expirationIDPattern = regexp.MustCompile(`^SD-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsExpirationID reports whether id has the form of an expiration id (SD- and a lowercase UUID).
func IsExpirationID(id string) bool { return expirationIDPattern.MatchString(id) }

// ValidateExpirationRef returns an EINVALID error unless ref names an expiration (SD-…) or a dataset (24
// lowercase hexadecimal characters), the two things GET /ttl/{ID} takes.
func ValidateExpirationRef(ref string) error {
	if IsExpirationID(ref) || datasetIDPattern.MatchString(ref) {
		return nil
	}
	return Invalid("invalid-expiration-id", "ID", "ID %q must be an expiration id (SD- and a UUID) or a dataset id (24 lowercase hexadecimal characters)", Clip(ref))
}

// expiryLayouts are the forms expiry takes: a date (midnight UTC), or a date and time in UTC, with or without Z and
// fractions of a second.
var expiryLayouts = []string{"2006-01-02", "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05.999999999Z"}

// ParseExpiry reads an ISO 8601 date (midnight UTC) or UTC date-time, kept to the millisecond as the API shows it.
// CheckExpiry then holds it to the 24-hour rule, against the service's clock.
func ParseExpiry(raw any) (time.Time, error) {
	s, ok := raw.(string)
	if !ok {
		return time.Time{}, Invalid("invalid-type", "expiry", "expiry must be a string, an ISO 8601 date (2030-12-31) or UTC date-time (2030-12-31T18:00:00), got %s", jsonType(raw))
	}
	var t time.Time
	var err error
	for _, layout := range expiryLayouts {
		if t, err = time.Parse(layout, s); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, Invalid("invalid-expiry", "expiry",
			"expiry %q must be an ISO 8601 date (2030-12-31, midnight UTC) or a date-time in UTC without an offset (2030-12-31T18:00:00 or 2030-12-31T18:00:00Z)", Clip(s))
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

// CheckExpiry returns an EINVALID error unless expiry is at least MinExpiryLead after now.
func CheckExpiry(expiry, now time.Time) error {
	if earliest := now.Add(MinExpiryLead); expiry.Before(earliest) {
		return Invalid("expiry-too-soon", "expiry", "expiry %s must be at least 24 hours in the future, at or after %s",
			expiry.Format(time.RFC3339Nano), earliest.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// createExpirationFields are the fields POST /ttl takes.
var createExpirationFields = []string{"datasetId", "description", "displayName", "expiry"}

// updateExpirationFields are the fields PUT /ttl/{ID} takes; the others cannot change.
var updateExpirationFields = []string{"description", "displayName", "expiry"}

// ParseExpirationCreate validates a decoded JSON body of POST /ttl. Each refusal is an EINVALID error naming the
// field and the rule.
func ParseExpirationCreate(body map[string]any) (ExpirationCreate, error) {
	var create ExpirationCreate
	if err := onlyFields(body, createExpirationFields, "a new dataset expiration"); err != nil {
		return create, err
	}
	id, ok := body["datasetId"].(string)
	switch {
	case body["datasetId"] == nil:
		return create, Invalid("missing-field", "datasetId", "datasetId is required")
	case !ok || !datasetIDPattern.MatchString(id):
		return create, Invalid("invalid-dataset-id", "datasetId", "datasetId must be a dataset id of 24 lowercase hexadecimal characters, got %s", compact(body["datasetId"]))
	}
	create.DatasetID = id
	if body["expiry"] == nil {
		return create, Invalid("missing-field", "expiry", "expiry is required")
	}
	var err error
	if create.Expiry, err = ParseExpiry(body["expiry"]); err != nil {
		return create, err
	}
	if body["displayName"] == nil {
		return create, Invalid("missing-field", "displayName", "displayName is required")
	}
	if create.DisplayName, err = parseExpirationText(body["displayName"], "displayName", MaxNameLength, false); err != nil {
		return create, err
	}
	if raw, ok := body["description"]; ok && raw != nil {
		d, err := parseExpirationText(raw, "description", MaxDescriptionLength, true)
		if err != nil {
			return create, err
		}
		create.Description = &d
	}
	return create, nil
}

// ParseExpirationUpdate validates a decoded JSON body of PUT /ttl/{ID}: at least one of expiry, displayName and
// description; a null description removes it.
func ParseExpirationUpdate(body map[string]any) (ExpirationUpdate, error) {
	var u ExpirationUpdate
	if err := onlyFields(body, updateExpirationFields, "an expiration update"); err != nil {
		return u, err
	}
	if len(body) == 0 {
		return u, Invalid("empty-update", "", "send at least one of %v", updateExpirationFields)
	}
	if raw, ok := body["expiry"]; ok {
		t, err := ParseExpiry(raw)
		if err != nil {
			return u, err
		}
		u.Expiry = &t
	}
	if raw, ok := body["displayName"]; ok {
		name, err := parseExpirationText(raw, "displayName", MaxNameLength, false)
		if err != nil {
			return u, err
		}
		u.DisplayName = &name
	}
	if raw, ok := body["description"]; ok {
		d := ""
		if raw != nil {
			var err error
			if d, err = parseExpirationText(raw, "description", MaxDescriptionLength, true); err != nil {
				return u, err
			}
		}
		u.Description = &d
	}
	return u, nil
}

func onlyFields(body map[string]any, fields []string, what string) error {
	for _, key := range slices.Sorted(maps.Keys(body)) {
		if !slices.Contains(fields, key) {
			return Invalid("unknown-field", Clip(key), "%s is not a field of %s; accepted fields are %v", Clip(key), what, fields)
		}
	}
	return nil
}

func parseExpirationText(raw any, field string, maxLen int, emptyOK bool) (string, error) {
	s, ok := raw.(string)
	if !ok {
		return "", Invalid("invalid-type", field, "%s must be a string, got %s", field, jsonType(raw))
	}
	if err := CheckText(field, s); err != nil {
		return "", err
	}
	if (!emptyOK && strings.TrimSpace(s) == "") || len(s) > maxLen || !utf8.ValidString(s) {
		return "", Invalid("invalid-field", field, "%s must be 1 to %d bytes of UTF-8 text", field, maxLen)
	}
	if err := CheckPlainText(field, s, TextLines(field == "description")); err != nil {
		return "", err
	}
	return s, nil
}

// Clip shortens a value quoted back in an error message to at most 64 bytes and an ellipsis, cut at a rune
// boundary, so that a huge one is not echoed whole.
func Clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// NewExpiration builds the pending expiration a create request describes for ds, or refuses an expiry less than a
// day after now.
func NewExpiration(create ExpirationCreate, ds *Dataset, c *Caller, id string, now time.Time) (*Expiration, error) {
	if err := CheckExpiry(create.Expiry, now); err != nil {
		return nil, err
	}
	e := &Expiration{
		ID: id, Org: ds.Org, Sandbox: ds.Sandbox, DatasetID: ds.ID, DatasetName: ds.Name,
		DisplayName: create.DisplayName, Description: create.Description, Status: ExpirationPending,
		Expiry: create.Expiry, Created: now, CreatedBy: c.User, Updated: now, UpdatedBy: c.User,
	}
	e.record("created", now, c.User, "")
	return e, nil
}

// CanSchedule returns nil when ds may be given an expiration: a SYSTEM dataset cannot, as it cannot be deleted.
func CanSchedule(ds *Dataset) error {
	if ds.Classification.ManagedBy == System {
		return &Error{Code: EFORBIDDEN, Type: "system-dataset", Field: "datasetId",
			Message: fmt.Sprintf("dataset %s is managed by the SYSTEM and cannot be deleted, so no expiration can be scheduled for it", ds.ID)}
	}
	return nil
}

// ErrOpenExpiration is the refusal of a second open expiration for a dataset, naming the first.
func ErrOpenExpiration(datasetID string, open *Expiration) error {
	return Invalid("expiration-exists", "datasetId",
		"dataset %s already has the %s expiration %s (expiry %s); change or cancel it instead", datasetID, open.Status, open.ID,
		open.Expiry.Format(time.RFC3339))
}

// ErrTooManyExpirations is the refusal of one more expiration for a dataset that has MaxExpirationsPerDataset,
// naming its newest cancelled one, which may be reopened instead.
func ErrTooManyExpirations(datasetID string, newest *Expiration) error {
	return Invalid("too-many-expirations", "datasetId",
		"dataset %s has %d expirations, the most a dataset may have; reopen the cancelled %s instead (PUT /data/core/hygiene/ttl/%s with a new expiry)",
		datasetID, MaxExpirationsPerDataset, newest.ID, newest.ID)
}

// ErrQuotaExceeded is the refusal of an expiration past the org's quota of pending ones.
func ErrQuotaExceeded(q Quota) error {
	return Invalid("expiration-quota-exceeded", "datasetId",
		"the organization has %d pending dataset expirations, its quota (%s) is %d; cancel one or wait for one to run", q.Consumed, QuotaDatasetExpiration, q.Quota)
}

// Apply returns the expiration after u, or an EINVALID error naming the status when it cannot change: only a
// pending expiration may change, and a cancelled one reopens (pending again) only with a new expiry; a new expiry
// must be a day after now. reopened tells whether the update reopened it, which makes it count against the quota
// again.
func (e *Expiration) Apply(u ExpirationUpdate, c *Caller, now time.Time) (next *Expiration, reopened bool, err error) {
	switch e.Status {
	case ExpirationPending:
	case ExpirationCancelled:
		if u.Expiry == nil {
			return nil, false, Invalid("expiration-not-pending", "expiry",
				"expiration %s is cancelled; send a new expiry to reopen it", e.ID)
		}
		reopened = true
	default:
		return nil, false, Invalid("expiration-not-pending", "status",
			"expiration %s is %s and can no longer be changed; only a pending expiration can", e.ID, e.Status)
	}
	if u.Expiry != nil {
		if err := CheckExpiry(*u.Expiry, now); err != nil {
			return nil, false, err
		}
	}
	n := *e
	if u.Expiry != nil {
		n.Expiry = *u.Expiry
	}
	if u.DisplayName != nil {
		n.DisplayName = *u.DisplayName
	}
	if u.Description != nil {
		n.Description = u.Description
		if *u.Description == "" {
			n.Description = nil
		}
	}
	n.Updated, n.UpdatedBy = now, c.User
	what := "updated"
	if reopened {
		n.Status, n.CancelledAt, what = ExpirationPending, nil, "reopened"
	}
	if u.Expiry != nil || reopened {
		n.Reason = "" // a day ahead at least: nothing waits any more
	}
	n.record(what, now, c.User, "")
	return &n, reopened, nil
}

// Cancel returns the expiration cancelled by the caller, or an EINVALID error naming the status unless it is
// pending.
func (e *Expiration) Cancel(c *Caller, now time.Time) (*Expiration, error) {
	if e.Status != ExpirationPending {
		return nil, Invalid("expiration-not-pending", "status",
			"expiration %s is %s and cannot be cancelled; only a pending expiration can", e.ID, e.Status)
	}
	return e.cancelled(now, c.User, ""), nil
}

// CancelledBecause returns the expiration cancelled by the service, for reason (its dataset was deleted first).
func (e *Expiration) CancelledBecause(reason, by string, now time.Time) *Expiration {
	return e.cancelled(now, by, reason)
}

func (e *Expiration) cancelled(now time.Time, by, reason string) *Expiration {
	n := *e
	n.Status, n.Reason, n.CancelledAt, n.Updated, n.UpdatedBy = ExpirationCancelled, reason, &now, now, by
	n.record("cancelled", now, by, reason)
	return &n
}

// Due reports whether the scheduler should act on the expiration at now: a pending one whose expiry has come, or
// one left executing (its replica stopped between the two steps).
func (e *Expiration) Due(now time.Time) bool {
	return e.Status == ExpirationExecuting || (e.Status == ExpirationPending && !e.Expiry.After(now))
}

// Executing returns the due expiration as it starts deleting its dataset.
func (e *Expiration) Executing(by string, now time.Time) *Expiration {
	n := *e
	n.Status, n.Reason, n.ExecutingAt, n.Updated, n.UpdatedBy = ExpirationExecuting, "", &now, now, by
	n.record("executing", now, by, "")
	return &n
}

// Completed returns the executing expiration once its dataset is deleted.
func (e *Expiration) Completed(by string, now time.Time) *Expiration {
	n := *e
	n.Status, n.CompletedAt, n.Updated, n.UpdatedBy = ExpirationCompleted, &now, now, by
	n.record("completed", now, by, "")
	return &n
}

// Held returns the executing expiration back to pending, waiting for the hold reason names: its dataset was held
// after its first step. The scheduler's next tick after the release executes it.
func (e *Expiration) Held(reason, by string, now time.Time) *Expiration {
	n := *e
	n.Status, n.Reason, n.ExecutingAt, n.Updated, n.UpdatedBy = ExpirationPending, reason, nil, now, by
	n.record("pending", now, by, reason)
	return &n
}

// WaitsFor sets Reason as a read shows it: hold names the dataset's oldest active hold (nil for none); it is the
// reason of a due pending expiration, which waits for the hold's release. A cancelled expiration keeps its own.
func (e *Expiration) WaitsFor(hold *Hold, now time.Time) {
	switch {
	case e.Status == ExpirationCancelled:
	case hold != nil && e.Status == ExpirationPending && !e.Expiry.After(now):
		e.Reason = ErrDatasetHeld(e.DatasetID, hold, "its expiration").Message
	default:
		e.Reason = ""
	}
}

func (e *Expiration) record(status string, now time.Time, by, reason string) {
	e.Change = &ExpirationEvent{Status: status, Expiry: e.Expiry, UpdatedAt: now, UpdatedBy: by, Reason: reason}
}

// AuditDetails are the details of the audit event of a change from before (nil for a creation) to e: the dataset,
// the expiry before and after, the status before and after, and the reason when the service made the change.
func (e *Expiration) AuditDetails(before *Expiration) map[string]any {
	d := map[string]any{"datasetId": e.DatasetID, "expiry": map[string]any{"after": e.Expiry.Format(time.RFC3339Nano)},
		"status": map[string]any{"after": string(e.Status)}, "displayName": e.DisplayName}
	if before != nil {
		d["expiry"].(map[string]any)["before"] = before.Expiry.Format(time.RFC3339Nano)
		d["status"].(map[string]any)["before"] = string(before.Status)
	}
	if e.Reason != "" {
		d["reason"] = e.Reason
	}
	return d
}

// ParseExpirationStatuses reads the status filter, a comma list of statuses.
func ParseExpirationStatuses(v string) ([]ExpirationStatus, error) {
	var out []ExpirationStatus
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !slices.Contains(ExpirationStatuses, ExpirationStatus(item)) {
			return nil, Invalid("invalid-parameter", "status", "status %q is not one of %v", Clip(item), ExpirationStatuses)
		}
		out = append(out, ExpirationStatus(item))
	}
	return out, nil
}

// ParseExpirationOrder reads orderBy: a comma list of fields, each optionally prefixed + (ascending, the default)
// or - (descending).
func ParseExpirationOrder(v string) ([]ExpirationOrder, error) {
	var out []ExpirationOrder
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		o := ExpirationOrder{Field: strings.TrimLeft(item, "+-"), Desc: strings.HasPrefix(item, "-")}
		if !slices.Contains(ExpirationOrderFields, o.Field) {
			return nil, Invalid("invalid-parameter", "orderBy", "orderBy field %q is not orderable; use one of %v, prefixed + or -", Clip(o.Field), ExpirationOrderFields)
		}
		out = append(out, o)
	}
	return out, nil
}
