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
	ActionCreate = "Create" // a dataset was created
	ActionUpdate = "Update" // a dataset's settings changed (PATCH)
	ActionDelete = "Delete" // a dataset was deleted, or a single row of it
	ActionExpire = "Expire" // a retention run removed expired rows
)

// Asset types.
const (
	AssetDataset = "Dataset"
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
	// retention run its counts.
	Details map[string]any
}

// NewID returns a fresh event id.
func NewID() string { return uuid.NewString() }
