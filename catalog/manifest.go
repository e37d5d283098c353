package catalog

import (
	"context"
	"time"
)

// The kinds of removal whose deletion manifest a caller may read (ManifestService).
const (
	RemovalRun       = "run"        // a retention run's part for one dataset; the removal id is the run's
	RemovalRowDelete = "row-delete" // DELETE /dataSets/{id}/rows/{_id}; the removal id is its Delete event's
	RemovalWorkOrder = "work-order" // a record-delete work order's part for one dataset; the removal id is the order's
)

// ManifestPageSize is how many entries a manifest's reader holds at once: a page is read with a database
// connection, which is released before the page is written to the client.
const ManifestPageSize = 1000

// Removal names one removal of a dataset's rows: a run's part for the dataset, or a delete by _id.
type Removal struct {
	Kind, ID, DatasetID string
}

// Manifest is what a removal's deletion manifest holds, read at one instant: the rows the removal removed
// (Removed, the count its audit event reports), how many of them are listed (Listed: those removed while the
// store's deletionManifest was on) and the last entry that instant saw (Through), up to which its pages are read.
type Manifest struct {
	Removal
	Removed, Listed int64
	Through         int64
}

// ManifestEntry is one row a removal took: its _id, its store, its clock (event time, or a record's last write),
// and why it went: "expired" with its ExpiresAt, "dataset-deleted", "row-delete" or "work-order".
type ManifestEntry struct {
	Seq       int64 // the entry's place in its manifest, for the next page
	ID        string
	Store     Store
	Timestamp time.Time
	ExpiresAt *time.Time
	Reason    string
}

// ManifestService reads deletion manifests.
type ManifestService interface {
	// OpenManifest returns the removal's counts for the caller: ENOTFOUND for a removal it cannot see (another
	// org's or sandbox's, a dry run, an event that removed no rows), EINVALID for an id of the wrong shape.
	OpenManifest(ctx context.Context, c *Caller, r Removal) (*Manifest, error)
	// ManifestPage returns at most limit entries of m after the entry after (0: from the start), up to m.Through.
	ManifestPage(ctx context.Context, m *Manifest, after int64, limit int) ([]ManifestEntry, error)
}
