package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

var _ catalog.RowExpiryExplainer = (*PreviewService)(nil)

// ExplainRow implements catalog.RowExpiryExplainer. It reads in one snapshot the dataset, the row's terms of the
// rule with the SQL twin's verdicts on it (expiredInDataset, deletableInDataset at the database's now, with the
// store's grace), the store's settings history and the dataset's active holds, and derives the rest from the Go
// rule (retention.Explain) on the same terms.
func (s *PreviewService) ExplainRow(ctx context.Context, c *catalog.Caller, datasetID string, store catalog.Store, rowID string) (_ *catalog.RowExpiry, err error) {
	defer outage(&err)
	x := &catalog.RowExpiry{Store: store, RowID: rowID, At: s.db.now()}
	if store == catalog.LakeHouse {
		x.Grace = s.LakeGrace
	}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if x.Dataset, err = findDataset(ctx, tx, c, datasetID, false); err != nil {
			return err
		}
		if err := readExplainedRow(ctx, tx, x); err != nil {
			return err
		}
		if x.History, err = settingsHistory(ctx, tx, datasetID, store); err != nil {
			return err
		}
		if x.SettingIDs, err = settingIDs(ctx, tx, datasetID, store); err != nil {
			return err
		}
		x.HeldBy, err = activeHolds(ctx, tx, datasetID)
		return err
	})
	if err != nil {
		return nil, err
	}
	x.Explained = retention.Explain(x.Row, x.History, x.At, x.Grace)
	return x, nil
}

// readExplainedRow reads the current version of the row with the SQL twin's verdicts on it at x.At. Several
// stored rows of one _id are versions a hold kept beside the current one (replaced_at set), which the row routes
// do not show either.
func readExplainedRow(ctx context.Context, tx pgx.Tx, x *catalog.RowExpiry) error {
	parts, err := datasetPartitions(ctx, tx, x.Dataset.ID, x.Store)
	if err != nil {
		return err
	}
	if parts.none() {
		return rowNotFound(x)
	}
	// The query names the dataset's partitions, so it is sent unprepared, as FindRows sends its own.
	var source *string
	err = tx.QueryRow(ctx, `SELECT r.ts, r.ingested_at, r.own_expiry, r.own_expiry_source::text, r.never_expires, r.setting_id,
       `+expiredInDataset(x.Store)+`, `+deletableInDataset(x.Store)+`
FROM `+storeTable(x.Store)+` r
WHERE r.dataset_id = @dataset AND r.row_id = @row AND r.replaced_at IS NULL AND `+parts.sql()+`
ORDER BY r.ingested_at DESC LIMIT 1`, pgx.QueryExecModeExec,
		pgx.StrictNamedArgs{"dataset": x.Dataset.ID, "row": x.RowID, "at": x.At, "grace": x.Grace.Interval()}).
		Scan(&x.Row.Timestamp, &x.Row.IngestedAt, &x.Row.OwnExpiry, &source, &x.Row.Never, &x.RowSetting, &x.Expired, &x.Deletable)
	if errors.Is(err, pgx.ErrNoRows) {
		return rowNotFound(x)
	}
	if err != nil {
		return fmt.Errorf("read row %q of %s: %w", x.RowID, x.Dataset.ID, err)
	}
	x.OwnExpiryField = overrideFieldOf(source)
	return nil
}

// rowNotFound is the ENOTFOUND of a row the store does not hold, worded as DeleteRow's.
func rowNotFound(x *catalog.RowExpiry) error {
	return catalog.Errorf(catalog.ENOTFOUND, "row %q was not found in dataset %s", x.RowID, x.Dataset.ID)
}

// settingIDs returns the ids of the store's settings in settingsHistory's order.
func settingIDs(ctx context.Context, tx pgx.Tx, datasetID string, store catalog.Store) ([]int64, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM ttl_settings WHERE dataset_id = $1 AND store = $2 ORDER BY effective_from, id`,
		datasetID, string(store))
	if err != nil {
		return nil, fmt.Errorf("read TTL settings of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// activeHolds returns the dataset's active holds, oldest first.
func activeHolds(ctx context.Context, tx pgx.Tx, datasetID string) ([]*catalog.Hold, error) {
	rows, err := tx.Query(ctx, `SELECT `+holdColumns+` FROM dataset_holds h
		WHERE h.dataset_id = $1 AND h.released_at IS NULL ORDER BY h.placed_at, h.id`, datasetID)
	if err != nil {
		return nil, fmt.Errorf("read holds of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Hold, error) { return scanHold(row) })
}
