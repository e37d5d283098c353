package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"

	"github.com/google/uuid"

	"github.com/acme/retention/retention"
)

// MaxRowIDLength bounds a row's _id.
const MaxRowIDLength = 256

// Row is one event row of a dataset, as stored.
type Row struct {
	ID         string
	Timestamp  time.Time // the clock start (Dataset.Clock): the event time, or a record's last write
	IngestedAt time.Time
	OwnExpiry  *time.Time // the row's own expiry, overriding the dataset's TTL
	Never      bool       // _ttl: -1
	Payload    []byte     // the event's other fields, as a JSON object
	// Expiry is the row's expiry under the store's current TTL; nil when it has none (TTL null or _ttl -1).
	Expiry *time.Time
	// Expired says the row is expired and only awaits its run (or a hold's release): read only with
	// RowFilter.IncludeExpired.
	Expired bool
	// ReplacedAt, when set, says this is a version a legal hold kept: its _id was written again at that time while
	// the dataset was held. Read only with RowFilter.IncludeExpired, beside the current version.
	ReplacedAt *time.Time
}

// RowInput is a validated event line, ready to be stored.
type RowInput struct {
	// Line is where the event was in its body (Event.Line), 0 for rows not read from one: a chunk that finds the
	// dataset's rules changed under it refuses the line by it.
	Line        int
	ID          string
	ClientID    bool       // the _id came from the client, so an existing row with it must be replaced
	Timestamp   time.Time  // the clock start (Dataset.Clock): the event time, or a record's write (its IngestedAt)
	IngestedAt  *time.Time // an operator's import may keep the original ingestion time; nil means now
	OwnExpiry   *time.Time
	Never       bool
	Payload     []byte
	PayloadSize int
	// Identities are the row's identity keys (IdentityKey), from its identityMap: what a work order finds it by.
	Identities []string
	// OwnExpiryField is the field that set OwnExpiry (NoOverrideField when it is nil), which the store keeps beside
	// it: the instant alone cannot tell an _expiresAt from a clock plus a _ttl.
	OwnExpiryField OverrideField
}

// RowContext is what validating a dataset's rows needs to know about it.
type RowContext struct {
	Dataset *Dataset
	Lake    Limits // the lake store's limits, which bound a row's own expiry
	// AllowIngestedAt admits an _ingestedAt field: only an operator's import may backdate ingestion.
	AllowIngestedAt bool
	// DefaultIngestedAt is the ingestion time of an event that has no _ingestedAt of its own, held to the same
	// bounds: an operator's import that dates a whole file (retentionctl load -ingested-at). nil means the time the
	// row is stored.
	DefaultIngestedAt *time.Time
	// Now is the time of ingestion, which a timestamp may not lie more than MaxFutureSkew after; zero skips the
	// check.
	Now time.Time
}

// MaxFutureSkew is how far after the time of ingestion an event's timestamp may lie: an event has happened by the
// time it is sent, give or take a device's clock. It bounds where rows are placed: with the built-in limits no
// row's expiry lies beyond the months the row store partitions one by one (docs/storage.md), so one line with a
// timestamp years ahead cannot make coarse partitions that every tenant's rows would share when their time comes.
const MaxFutureSkew = 24 * time.Hour

// ParseRow validates one event. Rejections are EINVALID errors whose message names the field and the rule.
func (rc RowContext) ParseRow(raw []byte) (RowInput, error) {
	var in RowInput
	obj, more, err := decodeEvent(raw)
	if err != nil || obj == nil {
		return in, rowErr("", "the event must be a JSON object")
	}
	if more {
		return in, rowErr("", "the event must be a single JSON object")
	}
	// Before anything is read from it: decoding has already turned bytes that are not UTF-8 into U+FFFD, and the
	// _id must be the one sent, never a lookalike that merges two rows.
	if err := CheckJSONText(raw, "the event"); err != nil {
		return in, err
	}
	if err := normalizeObject(obj); err != nil {
		return in, err
	}
	if in.IngestedAt, err = rc.parseIngestedAt(obj); err != nil {
		return in, err
	}
	if in.Timestamp, err = rc.parseClock(obj, &in); err != nil {
		return in, err
	}
	if in.ID, in.ClientID, err = rc.parseRowID(obj); err != nil {
		return in, err
	}
	if err := rc.parseOverride(obj, &in); err != nil {
		return in, err
	}
	if err := refuseServiceFields(obj); err != nil {
		return in, err
	}
	if err := rc.parseIdentities(obj, &in); err != nil {
		return in, err
	}
	for _, k := range []string{"timestamp", "_id", "_expiresAt", "_ttl", "_ingestedAt"} {
		delete(obj, k)
	}
	if in.Payload, err = marshalPayload(obj); err != nil {
		return in, rowErr("", "the event's fields could not be encoded")
	}
	in.PayloadSize = len(in.Payload)
	if in.PayloadSize > MaxRowPayloadBytes {
		return in, rowErr("", "the event's fields take %d bytes as stored (numbers written out in full); an event keeps at most %d", in.PayloadSize, MaxRowPayloadBytes)
	}
	return in, nil
}

// ServiceRowFields are the fields the service alone writes into a row as it reads back (besides _id, timestamp,
// _ingestedAt and _expiresAt, which an event may send with their own rules): an event carrying one is refused, so
// that no row reads as expired, or as a version a hold kept, by what it was sent with.
var ServiceRowFields = []string{"_expired", "_replacedAt"}

func refuseServiceFields(obj map[string]any) error {
	for _, k := range ServiceRowFields {
		if _, ok := obj[k]; ok {
			return rowErr(k, "%s is set by the service when a row is read; an event may not send it (send your own data under another name)", k)
		}
	}
	return nil
}

func rowErr(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Type: "invalid-row", Field: field, Message: fmt.Sprintf(format, args...)}
}

// timestampRange keeps event times where monthly placement and calendar arithmetic stay well defined.
var timestampRange = [2]time.Time{time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)}

// parseClock returns the time the row's TTL counts from (retention.Clock): the event's timestamp in a time-series
// dataset; in a record dataset, the row's write, which the service sets: the ingestion time the row is stored with,
// which parseClock fixes in the row so that its _ttl counts from the same instant. A write is dated when its
// ingestion begins (Now), as Postgres dates a transaction's writes by its start.
func (rc RowContext) parseClock(obj map[string]any, in *RowInput) (time.Time, error) {
	if rc.Dataset.IsTimeSeries() {
		return rc.parseTimestamp(obj)
	}
	if _, ok := obj["timestamp"]; ok {
		return time.Time{}, rowErr("timestamp", "timestamp is set by the service in a record dataset: it is the row's last write, which its TTL counts from; send the record's own times under other field names")
	}
	if in.IngestedAt == nil && !rc.Now.IsZero() {
		now := rc.Now.UTC()
		in.IngestedAt = &now
	}
	if in.IngestedAt == nil {
		return time.Time{}, nil // no time of ingestion given: the writer dates the row when it stores it
	}
	return rc.Dataset.Clock().Start(time.Time{}, *in.IngestedAt), nil
}

func (rc RowContext) parseTimestamp(obj map[string]any) (time.Time, error) {
	raw, ok := obj["timestamp"]
	if !ok || raw == nil {
		return time.Time{}, rowErr("timestamp", "timestamp is required in a time-series dataset (an RFC 3339 time such as 2026-01-31T12:00:00Z)")
	}
	t, err := parseTime("timestamp", raw)
	if err != nil {
		return t, err
	}
	if latest := rc.Now.Add(MaxFutureSkew); !rc.Now.IsZero() && t.After(latest) {
		return time.Time{}, rowErr("timestamp", "timestamp %s is in the future: it may lie at most %d hours after the time of ingestion (%s)",
			t.Format(time.RFC3339Nano), int(MaxFutureSkew.Hours()), latest.Format(time.RFC3339))
	}
	return t, nil
}

func parseTime(field string, raw any) (time.Time, error) {
	s, ok := raw.(string)
	if !ok {
		return time.Time{}, rowErr(field, "%s must be an RFC 3339 time string, got %s", field, jsonType(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, rowErr(field, "%s %q is not an RFC 3339 time such as 2026-01-31T12:00:00Z", field, compact(s))
	}
	if !inTimestampRange(t) {
		return time.Time{}, timeRangeErr(field, s)
	}
	return t.UTC(), nil
}

func inTimestampRange(t time.Time) bool {
	return !t.Before(timestampRange[0]) && t.Before(timestampRange[1])
}

// timeRangeErr refuses a time outside timestampRange; s is the time as sent.
func timeRangeErr(field, s string) error {
	return rowErr(field, "%s %s must lie between 1900 and 9000", field, s)
}

// parseRowID returns the row's _id, and whether the client sent it. A record is the latest write of its _id, so a
// record dataset requires one; an event without one gets a generated id.
func (rc RowContext) parseRowID(obj map[string]any) (string, bool, error) {
	raw, ok := obj["_id"]
	if (!ok || raw == nil) && !rc.Dataset.IsTimeSeries() {
		return "", false, rowErr("_id", "_id is required in a record dataset: a record is the latest write of its _id, and its TTL counts from that write")
	}
	if !ok || raw == nil {
		return uuid.Must(uuid.NewV7()).String(), false, nil
	}
	id, ok := raw.(string)
	if !ok || id == "" || len(id) > MaxRowIDLength {
		return "", false, rowErr("_id", "_id must be a string of 1 to %d bytes", MaxRowIDLength)
	}
	return id, true, nil
}

func (rc RowContext) parseOverride(obj map[string]any, in *RowInput) error {
	expiresAt, hasExpiresAt := obj["_expiresAt"]
	ttl, hasTTL := obj["_ttl"]
	if hasExpiresAt && hasTTL {
		return rowErr("_ttl", "send _expiresAt or _ttl, not both")
	}
	if !hasExpiresAt && !hasTTL {
		return nil
	}
	if rc.Dataset.RowOverrides == OverridesRefused {
		field := "_ttl"
		if hasExpiresAt {
			field = "_expiresAt"
		}
		return ErrOverridesRefused(rc.Dataset.ID, field)
	}
	if hasExpiresAt {
		t, err := parseTime("_expiresAt", expiresAt)
		if err != nil {
			return err
		}
		in.OwnExpiry, in.OwnExpiryField = &t, OverrideExpiresAt
		return rc.checkOverride("_expiresAt", in.Timestamp, t)
	}
	if n, ok := ttl.(json.Number); ok && n.String() == "-1" {
		if rc.Lake.Max != nil {
			return rowErr("_ttl", "_ttl -1 (never expire) is allowed only where the lake store has no maxValue; its maxValue is %s", *rc.Lake.Max)
		}
		in.Never = true
		return nil
	}
	s, ok := ttl.(string)
	if !ok {
		return rowErr("_ttl", "_ttl must be an ISO-8601 period string such as \"P90D\", or the number -1 for never")
	}
	p, err := retention.ParsePeriod(s)
	if err != nil {
		return rowErr("_ttl", "_ttl: %v", err)
	}
	t := p.AddTo(in.Timestamp)
	in.OwnExpiry, in.OwnExpiryField = &t, OverrideTTL
	return rc.checkOverride("_ttl", in.Timestamp, t)
}

// OverrideField is the field of its event that set a row's own expiry (RowInput.OwnExpiry), as the store records it
// beside the instant (migration 0020), so that an explanation can say which.
type OverrideField uint8

const (
	// NoOverrideField is recorded for a row without an own expiry (_ttl: -1 is Never, not an own expiry). Beside an
	// own expiry it means unknown: the row was stored before the store recorded the field.
	NoOverrideField OverrideField = iota
	// OverrideTTL is _ttl: the row's clock start plus a period.
	OverrideTTL
	// OverrideExpiresAt is _expiresAt: an instant.
	OverrideExpiresAt
)

// String returns the field's name in an event, "_ttl" or "_expiresAt", and "" for NoOverrideField.
func (f OverrideField) String() string {
	switch f {
	case OverrideTTL:
		return "_ttl"
	case OverrideExpiresAt:
		return "_expiresAt"
	}
	return ""
}

// ErrOverridesRefused is the EINVALID error refusing a line of dataset id that carries its own expiry (field,
// _expiresAt or _ttl) while the dataset's rowOverrides switch is refused.
func ErrOverridesRefused(id, field string) error {
	return rowErr(field, "%s: dataset %s refuses per-row expiry (extensions.adobe_lakeHouse.rowExpiration.rowOverrides is \"refused\"); "+
		"send the event without _expiresAt and _ttl, and the dataset's ttlValue applies to it", field, id)
}

// checkOverride keeps a row's own expiry, counted from its clock start, within the lake store's limits.
func (rc RowContext) checkOverride(field string, ts, expiry time.Time) error {
	clock := "timestamp"
	if rc.Dataset.Clock() == retention.LastWrite {
		clock = "the row's write"
	}
	if lowest := rc.Lake.Min.AddTo(ts); expiry.Before(lowest) {
		return rowErr(field, "%s: the row's expiry %s is earlier than %s + minValue %s (%s)",
			field, expiry.Format(time.RFC3339), clock, rc.Lake.Min, lowest.Format(time.RFC3339))
	}
	if rc.Lake.Max != nil {
		if highest := rc.Lake.Max.AddTo(ts); expiry.After(highest) {
			return rowErr(field, "%s: the row's expiry %s is later than %s + maxValue %s (%s)",
				field, expiry.Format(time.RFC3339), clock, *rc.Lake.Max, highest.Format(time.RFC3339))
		}
	}
	return nil
}

func (rc RowContext) parseIngestedAt(obj map[string]any) (*time.Time, error) {
	raw, ok := obj["_ingestedAt"]
	if !ok {
		if d := rc.DefaultIngestedAt; d != nil && !inTimestampRange(*d) {
			return nil, timeRangeErr("_ingestedAt", d.Format(time.RFC3339Nano))
		}
		return rc.DefaultIngestedAt, nil
	}
	if !rc.AllowIngestedAt {
		return nil, rowErr("_ingestedAt", "_ingestedAt is set by the service; only an operator's import (retentionctl load) may keep an original ingestion time")
	}
	t, err := parseTime("_ingestedAt", raw)
	return &t, err
}

// IngestResult reports what an ingestion stored and refused.
type IngestResult struct {
	Accepted         int
	Rejected         int
	ExpiredOnArrival int
	Errors           []LineError
	// Read is the last line (or array position) of the body read so far. CommittedThrough is the last one whose
	// fate is committed: every line up to it was stored or rejected, and no row of a line after it is stored. Rows
	// are committed in chunks, so an ingestion cut short (a fenced org, an outage) has stored the lines up to
	// CommittedThrough, and a client sends again only the lines after it: nothing is lost or stored twice.
	Read, CommittedThrough int

	committedRejected, committedErrors int
}

// Commit records that every line read so far is committed, stored or rejected.
func (r *IngestResult) Commit() {
	r.CommittedThrough, r.committedRejected, r.committedErrors = r.Read, r.Rejected, len(r.Errors)
}

// Uncommit forgets the rejections of the lines after CommittedThrough, when the ingestion stops before committing
// them: those lines are judged again when they are sent again, and an answer that counted them would count them
// twice.
func (r *IngestResult) Uncommit() {
	r.Read, r.Rejected, r.Errors = r.CommittedThrough, r.committedRejected, r.Errors[:r.committedErrors]
}

// MaxLineErrors bounds the line errors a response lists.
const MaxLineErrors = 100

// LineError is a refused event: its 1-based line (or array position) and why.
type LineError struct {
	Line   int
	Reason string
}

// Reject records a refused line, listing at most MaxLineErrors of them.
func (r *IngestResult) Reject(line int, err error) {
	r.Rejected++
	if len(r.Errors) < MaxLineErrors {
		r.Errors = append(r.Errors, LineError{Line: line, Reason: ErrorMessage(err)})
	}
}

// RowFilter selects the rows a read returns, in (timestamp, _id) order.
type RowFilter struct {
	Store      Store
	Start, End *time.Time // event time, inclusive start and exclusive end
	After      *RowCursor // keyset: rows strictly after this one
	Limit      int
	// MaxBytes, when positive, bounds the page by its rows' payloads (their JSON text): the page ends before the
	// row that would take it past MaxBytes, or a little earlier (rows are first measured as stored), though it
	// always holds at least one row. It keeps the memory of one read bounded however large the rows are; zero
	// leaves pages to Limit alone.
	MaxBytes int
	// IncludeExpired reads the expired rows a run has not removed yet too, each marked Expired, and the versions a
	// legal hold kept, each marked with its ReplacedAt: what a legal hold keeps, for a caller with
	// ScopeRetentionHold (the API checks the scope).
	IncludeExpired bool
}

// RowPage is a page of rows. Cut says that MaxBytes ended it before Limit rows: more rows follow.
type RowPage struct {
	Rows []Row
	Cut  bool
}

// RowCursor is the position of the last row of a page. Versions of one (Timestamp, ID) follow each other in the
// order they were replaced, the current one last: ReplacedAt is the last row's, nil for a current version.
type RowCursor struct {
	Timestamp  time.Time
	ID         string
	ReplacedAt *time.Time
}

// RowService stores and reads the rows of datasets. Like DatasetService it acts within the caller's org and sandbox.
type RowService interface {
	// BeginIngest begins an ingestion into the dataset: it reads, once for the whole ingestion, the dataset and
	// what its events are validated against (RowWriter.Rules). Returns ENOTFOUND if the dataset does not exist.
	BeginIngest(ctx context.Context, c *Caller, datasetID string, opts IngestOptions) (RowWriter, error)
	// FindRows returns a page of the dataset's rows that are not expired, whether or not a run has deleted them yet.
	FindRows(ctx context.Context, c *Caller, datasetID string, f RowFilter) (*RowPage, error)
	// DeleteRow removes one row from every store, writing a Delete audit event. Returns ENOTFOUND if no such row.
	DeleteRow(ctx context.Context, c *Caller, datasetID, rowID string) error
}

// RowWriter writes the rows of one ingestion into a dataset (RowService.BeginIngest). It writes what it is given;
// validating events is the EventReader's, against Rules.
type RowWriter interface {
	// Rules returns what every row written must have been validated against (RowContext.ParseRow): the dataset as
	// it was when the ingestion began, its lake store's limits, and the time of ingestion.
	Rules() RowContext
	// Write stores rows, committing them in chunks as they arrive, so that a long stream is readable before it
	// ends, and adds what it committed to res (Accepted, ExpiredOnArrival). A failure stops it; the chunks committed
	// before it stay, and res counts them. Returns ECONFLICT if the dataset is deleted meanwhile.
	Write(ctx context.Context, rows iter.Seq[RowInput], res *IngestResult) error
}

// IngestOptions tune an ingestion.
type IngestOptions struct {
	AllowIngestedAt bool // operator imports only
	// ChunkCommitted, when set, is called after each chunk commits with the rows it held; tests use it to observe
	// streaming without sleeping.
	ChunkCommitted func(rows int)
}

// parseIdentities reads the row's identities: its identityMap, else its value at the dataset's declared primary
// identity (PrimaryIdentityExtension), else none.
func (rc RowContext) parseIdentities(obj map[string]any, in *RowInput) error {
	var err error
	if raw, ok := obj["identityMap"]; ok {
		in.Identities, err = ParseIdentityMap(raw)
		return err
	}
	// A declaration is checked when it is set (ApplyPatch); one that does not parse names no identity.
	if pi, perr := DatasetPrimaryIdentity(rc.Dataset.Extensions); perr == nil && pi != nil {
		in.Identities, err = pi.rowKeys(obj)
	}
	return err
}
