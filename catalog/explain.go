package catalog

import (
	"context"
	"time"

	"github.com/acme/retention/retention"
)

// RowExpiryExplainer explains one stored row's expiry (GET /dataSets/{id}/rows/{_id}/expiry).
type RowExpiryExplainer interface {
	// ExplainRow returns what the expiry rule says of the current version of the row _id in the store of the
	// dataset, evaluated at the database's now. Returns ENOTFOUND for a dataset the caller cannot see (another org
	// or sandbox, as a missing one) and for a row the store does not hold, expired rows included until a run
	// deletes them.
	ExplainRow(ctx context.Context, c *Caller, datasetID string, store Store, rowID string) (*RowExpiry, error)
}

// RowExpiry is the explanation of one row's expiry: the row's terms of the rule, its store's TTL history, the
// rule's Go answer (retention.Explain) and its SQL verdict, which reads and runs use, and the holds that keep the
// row. The two verdicts agree (postgres's TestExplainAgreesWithRuleOnScenarios); the API shows the SQL's.
type RowExpiry struct {
	Dataset *Dataset
	Store   Store
	RowID   string
	At      time.Time        // the evaluation time
	Grace   retention.Period // the store's ingestion grace, as runs apply it
	Row     retention.Row
	// OwnExpiryField is the field that set Row.OwnExpiry, as the store recorded it: NoOverrideField beside an own
	// expiry says the row was stored before the store recorded it (migration 0020), so the field is unknown.
	OwnExpiryField OverrideField
	// History is the store's TTL settings, oldest first, as the rule reads them; SettingIDs their ids, in order,
	// and RowSetting the id of the one the row was stored under.
	History    []retention.Setting
	SettingIDs []int64
	RowSetting int64
	Explained  retention.Explanation
	// Expired and Deletable are the SQL twin's verdicts at At (postgres/expiry.go: expiredInDataset,
	// deletableInDataset): exactly what reads hide and what a run at At would delete, holds aside.
	Expired, Deletable bool
	HeldBy             []*Hold // the dataset's active holds, oldest first: while any is, no run deletes the row
}
