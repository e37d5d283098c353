// Package audit holds the audit event: the record, in Adobe's Audit Query shape, of every change to a dataset and
// of every deletion of rows. Events are written by the storage adapter in the same transaction as the change they
// record, so a change without its event cannot exist.
package audit

import (
	"time"

	"github.com/google/uuid"
)

// Actions an event records.
const (
	ActionCreate  = "Create"  // a dataset was created
	ActionUpdate  = "Update"  // a dataset's settings changed (PATCH)
	ActionDelete  = "Delete"  // a dataset was deleted, or a single row of it
	ActionExpire  = "Expire"  // a retention run removed expired rows
	ActionHold    = "Hold"    // a legal hold was placed on a dataset
	ActionRelease = "Release" // a legal hold on a dataset was released
	ActionCancel  = "Cancel"  // a dataset expiration was cancelled, by a user or because its dataset was deleted first
	// ActionExecute records a dataset expiration that came due and deleted its dataset.
	ActionExecute = "Execute"
	// ActionReplace records rows of a held dataset written again: the versions they replaced were kept, not deleted.
	ActionReplace = "Replace"
	// ActionMove records a step of the org's move to another cell: started and precopied (in the source's chain,
	// copied with it), verified and completed (in the target's).
	ActionMove = "Move"
)

// Asset types.
const (
	AssetDataset = "Dataset"
	// AssetDatasetExpiration is a dataset's scheduled deletion (Data Hygiene /ttl): created, updated, cancelled,
	// executed.
	AssetDatasetExpiration = "DatasetExpiration"
	// AssetWorkOrder is a record-delete work order (Data Hygiene /workorder): created, updated, executed.
	AssetWorkOrder = "WorkOrder"
	AssetAuditLog  = "AuditLog" // the audit log itself: its retention removed old events (action Delete)
	AssetOrg       = "Org"      // the org as a whole: its move between cells (action Move)
)

// Statuses, as Adobe's enhanced (execution) events name them.
const (
	StatusSuccess = "Success"
	StatusFailure = "Failure"
)

// Event is one audit record.
type Event struct {
	ID        string
	Org       string
	Sandbox   string
	Timestamp time.Time
	RequestID string
	AssetType string
	AssetID   string
	AssetName string
	Action    string
	Status    string
	User      string
	ClientID  string
	// Details holds what changed: for a TTL change the before and after rowExpiration of each store touched; for a
	// retention run its counts. Read back from the database, its numbers are json.Number, so that they keep every
	// digit the hash covered.
	Details map[string]any

	// Seq numbers the events of one org 1, 2, 3… in the order they were appended; the storage adapter assigns it.
	Seq int64
	// PrevHash is the Hash of the org's previous event (GenesisHash for the first), linking the org's events into a
	// chain; Hash is the SHA-256 of the event's canonical content (Canonical). Both are set when the event is
	// written and are empty on events written before chaining existed.
	PrevHash string
	Hash     string
}

// NewID returns a fresh event id.
func NewID() string { return uuid.NewString() }
