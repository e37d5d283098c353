package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/acme/retention/retention"
)

// DataBehavior tells how a dataset's rows behave: time-series rows are events, each with its event time, which their
// TTL counts from; record rows describe entities, each with its _id, and their TTL counts from their last write.
type DataBehavior string

// The data behaviors of Adobe's Catalog.
const (
	TimeSeries DataBehavior = "time-series"
	Record     DataBehavior = "record"
)

// ManagedBy tells who owns a dataset: CUSTOMER datasets are the users'; SYSTEM datasets belong to the platform, cannot
// be deleted and live under stricter TTL limits.
type ManagedBy string

// The owners of a dataset.
const (
	Customer ManagedBy = "CUSTOMER"
	System   ManagedBy = "SYSTEM"
)

// Store names one of the two places a time-series dataset's rows live, each with its own retention setting.
type Store string

// The stores, named as Adobe's extensions name them.
const (
	LakeHouse Store = "adobe_lakeHouse"      // the dataset's rows in the row store
	Profile   Store = "adobe_unifiedProfile" // the profile copy of a profile-enabled dataset's rows
)

// Stores lists every store in the order responses show them.
var Stores = []Store{LakeHouse, Profile}

// Valid reports whether s is a known store.
func (s Store) Valid() bool { return s == LakeHouse || s == Profile }

// Value statuses and setters of a row-expiration setting, as Adobe's rowExpiration object names them.
const (
	ValueDefault = "default" // the policy's defaultValue, applied when the dataset was created
	ValueCustom  = "custom"  // a value a user set
	SetByService = "service"
	SetByUser    = "user"
)

// RowOverrides is a dataset's switch for per-row expiry, as Fauna's document_ttls: whether its events may carry
// their own expiry (_expiresAt, _ttl). Refusing them changes no row already stored: those keep their own expiry,
// and the dataset's TTL applies to every row either way.
type RowOverrides string

// The values of the rowOverrides switch.
const (
	OverridesAllowed RowOverrides = "allowed" // the default: lines may carry _expiresAt or _ttl
	OverridesRefused RowOverrides = "refused" // a line carrying either is refused with its line number
)

// Valid reports whether o is one of the switch's values.
func (o RowOverrides) Valid() bool { return o == OverridesAllowed || o == OverridesRefused }

// Classification is a dataset's data behavior and owner; neither changes after creation.
type Classification struct {
	DataBehavior DataBehavior
	ManagedBy    ManagedBy
}

// RowExpiration is one store's retention setting. A nil TTL means expiry is disabled: every row of the store is
// kept, per-row overrides included.
type RowExpiration struct {
	TTL           *retention.Period
	ValueStatus   string
	SetBy         string
	Updated       time.Time
	LastCompleted *time.Time // when a retention run last finished this store of the dataset; nil before the first
	// DeletionManifest makes each removal of the store's rows of the dataset record their _ids, in the transaction
	// that removes them (deletionManifest); off by default, when a removal records nothing.
	DeletionManifest bool
}

// Dataset is a named container of event rows, owned by one org and sandbox.
type Dataset struct {
	ID             string
	Org            string
	Sandbox        string
	Name           string
	Description    *string
	Tags           map[string][]string
	Classification Classification
	SchemaRef      map[string]any
	// Extensions holds the extension keys the service does not own (anything but rowExpiration and metrics),
	// kept as sent and shown back merged with the service's own.
	Extensions    map[string]any
	RowExpiration map[Store]RowExpiration // empty for record datasets
	RowOverrides  RowOverrides            // whether its events may carry their own expiry
	Metrics       *Metrics                // the lake store's size; nil when not computed
	// Backlog is each store's rows expired but still stored, as GET /dataSets/{id} shows them; nil when not
	// computed (listings).
	Backlog     map[Store]Backlog
	ActiveHolds int // legal holds placed and not yet released; while any is, no row is removed
	// PendingExpiry is the expiry of the dataset's pending expiration (a scheduled deletion), nil when it has none;
	// the Catalog shows it as the tag adobe/hygiene/ttl, as Adobe's does.
	PendingExpiry *time.Time
	Version       int // bumped on every change; shown as the semver "1.0.<Version>"
	Created       time.Time
	Updated       time.Time
	CreatedUser   string
	UpdatedUser   string
	CreatedClient string
}

// VersionString returns the dataset's version as Adobe's semver string, also used as its ETag.
func (d *Dataset) VersionString() string { return versionString(d.Version) }

func versionString(v int) string { return "1.0." + strconv.Itoa(v) }

// Precondition is what a client asks of a dataset's version before a change is made (an If-Match header, which
// package httpapi parses): the change goes ahead only when the dataset's current version is one of Versions, or
// whatever it is when Any. A nil *Precondition asks nothing.
type Precondition struct {
	Any      bool
	Versions []string
	// Asked is the client's own words, quoted back when the check fails.
	Asked string
}

// Check returns nil when ds's current version meets p (always, for a nil p), else an EPRECONDITION error of type
// "version-mismatch" that names both versions; nothing may then change.
func (p *Precondition) Check(ds *Dataset) error {
	if p == nil || p.Any {
		return nil
	}
	current := ds.VersionString()
	if slices.Contains(p.Versions, current) {
		return nil
	}
	return &Error{Code: EPRECONDITION, Type: "version-mismatch", Field: "If-Match",
		Message: fmt.Sprintf("If-Match %s does not match the current version %q of dataset %s", p.Asked, current, ds.ID)}
}

// NextRun is when the next retention job may remove the dataset's rows from store, given when the store's next
// scheduled run is due (nil: the store has no schedule). It is that run for a dataset with a rowExpiration in the
// store, keep forever included: a run still deletes the rows that expired under an earlier setting. It is nil for
// a dataset without one (nothing to expire), and while the dataset is held, since no run removes a held dataset's
// rows before every hold is released, whenever that is. postgres orders GET /dataSets by it in SQL
// (orderColumns' "extensions.adobe_lakeHouse.rowExpiration.nextRun": the scheduled ones, then the held ones).
func (d *Dataset) NextRun(store Store, scheduled *time.Time) *time.Time {
	if _, ok := d.RowExpiration[store]; !ok || d.ActiveHolds > 0 {
		return nil
	}
	return scheduled
}

// IsTimeSeries reports whether the dataset's rows are events with an event time, as opposed to records.
func (d *Dataset) IsTimeSeries() bool { return d.Classification.DataBehavior == TimeSeries }

// Clock returns what the dataset's TTLs count from: the event time of a time-series row, the last write of a
// record.
func (d *Dataset) Clock() retention.Clock {
	if d.IsTimeSeries() {
		return retention.EventTime
	}
	return retention.LastWrite
}

// PolicyKey returns the key of the limits that apply to one store of the dataset.
func (d *Dataset) PolicyKey(store Store) PolicyKey {
	return PolicyKey{Store: store, ManagedBy: d.Classification.ManagedBy, Records: !d.IsTimeSeries()}
}

// ProfileEnabled reports whether the dataset's rows are also kept in the profile store: its tags hold
// unifiedProfile: ["enabled:true"], as in Adobe's Catalog.
func (d *Dataset) ProfileEnabled() bool {
	for _, v := range d.Tags["unifiedProfile"] {
		if v == "enabled:true" {
			return true
		}
	}
	return false
}

var datasetIDPattern = regexp.MustCompile(`^[0-9a-f]{24}$`)

// ValidateDatasetID returns an EINVALID error unless id is 24 lowercase hexadecimal characters.
func ValidateDatasetID(id string) error {
	if !datasetIDPattern.MatchString(id) {
		return Invalid("invalid-dataset-id", "id", "dataset id %q must be 24 lowercase hexadecimal characters", Clip(id))
	}
	return nil
}

// NewDatasetID returns a fresh random dataset id of 24 lowercase hexadecimal characters.
func NewDatasetID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// Metrics are a store's size, in the shape of a real Adobe dataset's extensions.adobe_lakeHouse.metrics. They are
// kept from counters maintained as rows arrive and leave, so reading them costs no scan; rows that expired but
// await their run are still counted, as they still take space.
type Metrics struct {
	RowCount    int64
	StorageSize int64 // bytes, estimated from the size of the partitions the rows share with other datasets
	AsOf        time.Time
}

// Backlog is a store's rows that have expired and are still stored, counted from the counters kept as rows arrive
// and leave, never by reading rows. The counters know rows by the calendar month of their placed expiry, so a
// month's rows are counted from the end of that month, all together: every row counted has expired, and rows
// expired in the current month (or by a TTL shortened since they were stored, before their month ended) are counted
// only once their month has ended, unless a run has removed them by then. Rows within the ingestion grace and rows
// of a held dataset are counted: they have expired, and are stored.
type Backlog struct {
	ExpiredRows int64
	// OldestExpiredAt is a time by which the oldest counted rows had all expired: the end of their month, at most a
	// month after the oldest of them expired; nil when none is counted.
	OldestExpiredAt *time.Time
}

// DatasetCreate is a validated request to create a dataset.
type DatasetCreate struct {
	Name           string
	Description    *string
	Tags           map[string][]string
	Classification Classification
	SchemaRef      map[string]any
}

// DatasetFilter selects and orders the datasets of one org and sandbox.
type DatasetFilter struct {
	Names    []string // any of these names; empty = all
	NotNames []string // none of these names
	// NameContains keeps the datasets whose name contains it, ignoring case; empty = all. It is a literal
	// substring, never a pattern, so no input can make the match expensive.
	NameContains string
	Tags         []TagFilter
	Held         *bool // only datasets with (true) or without (false) an active legal hold; nil = either
	OrderBy      []Order
	Offset       int
	Limit        int
	IncludeAll   bool // list without limit, for internal callers
}

// TagFilter matches datasets having tag Name with a value matching Value; Value may contain the wildcard "*".
type TagFilter struct {
	Name  string
	Value string
}

// Order sorts by one of the orderable fields.
type Order struct {
	// Field is "name", "created", "updated", "classification.dataBehavior", "classification.managedBy", a store's
	// "extensions.<store>.rowExpiration.ttlValue", "extensions.adobe_lakeHouse.rowExpiration.lastCompleted",
	// "extensions.adobe_lakeHouse.rowExpiration.nextRun" (Dataset.NextRun: the datasets the next scheduled run
	// may remove rows of, then the held ones), "extensions.adobe_lakeHouse.metrics.rowCount" or
	// "extensions.adobe_lakeHouse.metrics.storageSize" (the estimate the listing shows, measured by the listing
	// itself).
	Field string
	Desc  bool
}

// DatasetService manages datasets. Every method acts within the caller's org and sandbox: a dataset of another
// org or sandbox is reported as ENOTFOUND, exactly as a missing one.
type DatasetService interface {
	// CreateDataset creates a dataset, applying each store's default TTL to a time-series dataset, and writes a
	// Create audit event in the same transaction. Returns ECONFLICT if the name is taken in the sandbox.
	CreateDataset(ctx context.Context, c *Caller, create DatasetCreate) (*Dataset, error)
	// FindDatasetByID returns the dataset. Returns ENOTFOUND if it does not exist or was deleted.
	FindDatasetByID(ctx context.Context, c *Caller, id string) (*Dataset, error)
	// FindDatasets returns the datasets matching the filter, in its order.
	FindDatasets(ctx context.Context, c *Caller, filter DatasetFilter) ([]*Dataset, error)
	// DeleteDataset hides the dataset at once and leaves its rows to background removal, writing a Delete audit
	// event. Returns ENOTFOUND, EFORBIDDEN for a SYSTEM dataset, or ECONFLICT (type "dataset-held") naming the
	// active legal hold of a held dataset.
	DeleteDataset(ctx context.Context, c *Caller, id string) error
	// PatchDataset deep-merges the patch into the dataset under the rules of ApplyPatch, writing an Update audit
	// event in the same transaction. The dataset's version must meet ifMatch (Precondition.Check; nil asks
	// nothing), checked under the lock the change holds, else EPRECONDITION and nothing changes.
	PatchDataset(ctx context.Context, c *Caller, id string, patch *Patch, ifMatch *Precondition) (*Dataset, error)
	// TTLLimits returns the dataset and the policy limits of each of its stores, those of its data behavior.
	TTLLimits(ctx context.Context, c *Caller, id string) (*Dataset, map[Store]Limits, error)
}
