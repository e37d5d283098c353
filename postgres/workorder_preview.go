package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// previewScopeSQL lists the live datasets of sandbox $2 of org $1 an order covers: every one, or dataset $3 alone
// when $3 is not ALL.
const previewScopeSQL = `SELECT id, name FROM datasets
WHERE org_id = $1 AND sandbox_name = $2 AND deleted_at IS NULL AND ($3 = '` + catalog.AllDatasets + `' OR id = $3)`

// previewCountSQL counts, per store and dataset of $2, the stored rows carrying one of the identity keys $1: the
// rows an order's parts delete (deleteByIdentitySQL), matched as the parts match them: through each partition's
// identities indexes for a few keys, through a hash of the keys for more (%[1]s and %[2]s, previewMatchFew or
// previewMatchMany). One statement for both stores, so that the keys (up to 100,000) cross the wire once.
const previewCountSQL = `WITH keys AS MATERIALIZED (SELECT unnest($1::text[]) AS k)
SELECT '` + string(catalog.LakeHouse) + `', dataset_id, count(*) FROM (%[1]s) l GROUP BY dataset_id
UNION ALL
SELECT '` + string(catalog.Profile) + `', dataset_id, count(*) FROM (%[2]s) p GROUP BY dataset_id`

// previewMatchFew is the rows of store table %[1]s carrying one of the keys, found as identityMatchFew finds them.
var previewMatchFew = `SELECT r.dataset_id FROM %[1]s r WHERE ` + carriesKey("$1::text[]") + ` AND r.dataset_id = ANY($2::text[])`

// previewMatchMany is the rows of store table %[1]s with an identity in the hash of the keys (identityMatchMany).
const previewMatchMany = `SELECT DISTINCT r.tableoid, r.ctid, r.dataset_id FROM %[1]s r, unnest(r.identities) u(k)
    WHERE r.dataset_id = ANY($2::text[]) AND r.identities IS NOT NULL AND u.k IN (SELECT k FROM keys)`

// previewSQL is previewCountSQL for n keys.
func previewSQL(n int) string {
	match := previewMatchFew
	if n > fewIdentities {
		match = previewMatchMany
	}
	return fmt.Sprintf(previewCountSQL, fmt.Sprintf(match, storeTable(catalog.LakeHouse)), fmt.Sprintf(match, storeTable(catalog.Profile)))
}

// PreviewWorkOrder implements catalog.WorkOrderService. It reads in one read-only snapshot under a statement
// timeout of the limits' PreviewBudget, so that a preview holds no lock a run or an order waits for and costs
// at most that long a connection.
func (s *WorkOrderService) PreviewWorkOrder(ctx context.Context, c *catalog.Caller, create catalog.WorkOrderCreate) (_ *catalog.WorkOrderPreview, err error) {
	defer outage(&err)
	p := &catalog.WorkOrderPreview{At: s.db.now(), DatasetID: create.DatasetID, IdentityCount: len(create.Identities)}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, readSnapshot, func(tx pgx.Tx) error {
		if create.DatasetID != catalog.AllDatasets {
			if _, err := findDataset(ctx, tx, c, create.DatasetID, false); err != nil {
				return err
			}
		}
		byID, err := previewScope(ctx, tx, c, create.DatasetID)
		if err != nil {
			return err
		}
		p.DatasetCount = len(byID)
		if err := previewCounts(ctx, tx, create.Keys(), byID, s.limits.PreviewBudget); err != nil {
			return err
		}
		return previewDatasets(ctx, tx, p, byID, create.DatasetID != catalog.AllDatasets)
	})
	var qc *previewOverBudget
	if errors.As(err, &qc) {
		return nil, catalog.Invalid("preview-over-budget", "namespacesIdentities",
			"counting the rows of %d identities in %d datasets takes longer than a preview's %s: preview fewer identities or one dataset",
			len(create.Identities), p.DatasetCount, s.limits.PreviewBudget)
	}
	if err != nil {
		return nil, fmt.Errorf("preview work order: %w", err)
	}
	return p, nil
}

// previewOverBudget is a count the statement timeout cancelled.
type previewOverBudget struct{}

func (*previewOverBudget) Error() string { return "the preview's count is over its budget" }

// previewScope returns the datasets in the order's scope by id, each with no rows counted yet.
func previewScope(ctx context.Context, tx pgx.Tx, c *catalog.Caller, datasetID string) (map[string]*catalog.WorkOrderPreviewDataset, error) {
	rows, err := tx.Query(ctx, previewScopeSQL, c.Org, c.Sandbox, datasetID)
	if err != nil {
		return nil, fmt.Errorf("read the order's datasets: %w", err)
	}
	byID := map[string]*catalog.WorkOrderPreviewDataset{}
	var id, name string
	_, err = pgx.ForEachRow(rows, []any{&id, &name}, func() error {
		byID[id] = &catalog.WorkOrderPreviewDataset{DatasetID: id, DatasetName: name,
			Stores: map[catalog.Store]int64{catalog.LakeHouse: 0, catalog.Profile: 0}}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the order's datasets: %w", err)
	}
	return byID, nil
}

// previewCounts adds to byID the rows of each store carrying one of keys, within budget.
func previewCounts(ctx context.Context, tx pgx.Tx, keys []string, byID map[string]*catalog.WorkOrderPreviewDataset, budget time.Duration) error {
	if len(byID) == 0 || len(keys) == 0 {
		return nil
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = `+strconv.FormatInt(max(budget.Milliseconds(), 1), 10)); err != nil {
		return fmt.Errorf("set the preview's budget: %w", err)
	}
	var store, id string
	var n int64
	rows, err := tx.Query(ctx, previewSQL(len(keys)), keys, ids)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&store, &id, &n}, func() error {
			d := byID[id]
			d.Stores[catalog.Store(store)] += n
			d.RowCount += n
			return nil
		})
	}
	if isQueryCanceled(err) && ctx.Err() == nil {
		return &previewOverBudget{}
	}
	if err != nil {
		return fmt.Errorf("count the rows of the identities: %w", err)
	}
	return nil
}

// previewDatasets fills p's datasets from byID: those with rows (every one with listEmpty), by name, each with the
// hold that would keep its rows.
func previewDatasets(ctx context.Context, tx pgx.Tx, p *catalog.WorkOrderPreview, byID map[string]*catalog.WorkOrderPreviewDataset, listEmpty bool) error {
	for _, d := range byID {
		p.RowCount += d.RowCount
		if d.RowCount == 0 && !listEmpty {
			continue
		}
		held, err := heldReasonRead(ctx, tx, d.DatasetID)
		if err != nil {
			return err
		}
		d.HeldBy = held
		p.Datasets = append(p.Datasets, *d)
	}
	slices.SortFunc(p.Datasets, func(a, b catalog.WorkOrderPreviewDataset) int {
		return cmp.Or(cmp.Compare(a.DatasetName, b.DatasetName), cmp.Compare(a.DatasetID, b.DatasetID))
	})
	return nil
}
