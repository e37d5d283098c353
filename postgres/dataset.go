package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// DatasetService implements catalog.DatasetService.
type DatasetService struct{ db *DB }

// NewDatasetService returns a DatasetService on db.
func NewDatasetService(db *DB) *DatasetService { return &DatasetService{db: db} }

var _ catalog.DatasetService = (*DatasetService)(nil)

const datasetColumns = `d.id, d.org_id, d.sandbox_name, d.name, d.description, d.tags, d.data_behavior, d.managed_by,
       d.schema_ref, d.extensions, d.version, d.created_at, d.updated_at, d.created_user, d.updated_user, d.created_client,
       d.row_overrides_switch`

// scopeCondition keeps every query inside the caller's org and sandbox and away from deleted datasets.
const scopeCondition = `d.org_id = $1 AND d.sandbox_name = $2 AND d.deleted_at IS NULL`

// scanDataset reads a row of datasetColumns, followed by the columns extra scans into, if any.
func scanDataset(row pgx.Row, extra ...any) (*catalog.Dataset, error) {
	var ds catalog.Dataset
	var behavior, managedBy, overrides string
	var schemaRef, extensions []byte
	err := row.Scan(append([]any{&ds.ID, &ds.Org, &ds.Sandbox, &ds.Name, &ds.Description, &ds.Tags, &behavior, &managedBy,
		&schemaRef, &extensions, &ds.Version, &ds.Created, &ds.Updated, &ds.CreatedUser, &ds.UpdatedUser,
		&ds.CreatedClient, &overrides}, extra...)...)
	if err != nil {
		return nil, err
	}
	if ds.SchemaRef, err = decodeDocument(schemaRef); err != nil {
		return nil, fmt.Errorf("stored schemaRef of dataset %s: %w", ds.ID, err)
	}
	if ds.Extensions, err = decodeDocument(extensions); err != nil {
		return nil, fmt.Errorf("stored extensions of dataset %s: %w", ds.ID, err)
	}
	ds.Classification = catalog.Classification{DataBehavior: catalog.DataBehavior(behavior), ManagedBy: catalog.ManagedBy(managedBy)}
	ds.RowExpiration = map[catalog.Store]catalog.RowExpiration{}
	ds.RowOverrides = catalog.RowOverrides(overrides)
	return &ds, nil
}

// decodeDocument decodes a jsonb object with its numbers as json.Number. pgx would decode it into float64s, which
// rounds 9007199254740993 and fails on a number past float64's range, and every read of the dataset with it.
func decodeDocument(raw []byte) (map[string]any, error) {
	if raw == nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// indexByID returns the datasets by id and their ids in order, for the attach functions that read a column of
// every dataset in one query (WHERE dataset_id = ANY(ids)) and set it on each.
func indexByID(datasets []*catalog.Dataset) (map[string]*catalog.Dataset, []string) {
	byID := make(map[string]*catalog.Dataset, len(datasets))
	ids := make([]string, 0, len(datasets))
	for _, ds := range datasets {
		byID[ds.ID] = ds
		ids = append(ids, ds.ID)
	}
	return byID, ids
}

const selectRowExpirations = `
SELECT dataset_id, store, ttl_value, value_status, set_by, updated_at, last_completed_at, deletion_manifest
FROM row_expirations WHERE dataset_id = ANY($1)`

// attachRowExpirations loads the row-expiration settings of the datasets in one query.
func attachRowExpirations(ctx context.Context, q querier, datasets []*catalog.Dataset) error {
	if len(datasets) == 0 {
		return nil
	}
	byID, ids := indexByID(datasets)
	rows, err := q.Query(ctx, selectRowExpirations, ids)
	if err != nil {
		return fmt.Errorf("read row expirations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, store string
		var ttl *string
		var re catalog.RowExpiration
		if err := rows.Scan(&id, &store, &ttl, &re.ValueStatus, &re.SetBy, &re.Updated, &re.LastCompleted, &re.DeletionManifest); err != nil {
			return fmt.Errorf("read row expirations: %w", err)
		}
		if err := setRowExpiration(byID[id], store, ttl, re); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read row expirations: %w", err)
	}
	return nil
}

// setRowExpiration sets a store's setting read from row_expirations on the dataset, with its stored ttl_value
// parsed.
func setRowExpiration(ds *catalog.Dataset, store string, ttl *string, re catalog.RowExpiration) error {
	if ttl != nil {
		p, err := retention.ParsePeriod(*ttl)
		if err != nil {
			return fmt.Errorf("stored ttl_value of %s/%s: %w", ds.ID, store, err)
		}
		re.TTL = &p
	}
	ds.RowExpiration[catalog.Store(store)] = re
	return nil
}

// rowExpirationArrays aggregates the row_expirations of the dataset d into one row of parallel arrays (NULL when it
// has none), for the statements that read a dataset whole in one round trip. The aggregates of one pass see the rows
// in the same order, so the arrays' elements line up.
const rowExpirationArrays = `SELECT array_agg(r.store) AS stores, array_agg(r.ttl_value) AS ttls,
  array_agg(r.value_status) AS statuses, array_agg(r.set_by) AS set_bys, array_agg(r.updated_at) AS updated,
  array_agg(r.last_completed_at) AS completed, array_agg(r.deletion_manifest) AS manifests
FROM row_expirations r WHERE r.dataset_id = d.id`

// rowExpirationColumns are the scan targets of rowExpirationArrays.
type rowExpirationColumns struct {
	stores, statuses, setBys []string
	ttls                     []*string
	updated                  []time.Time
	completed                []*time.Time
	manifests                []bool
}

func (c *rowExpirationColumns) targets() []any {
	return []any{&c.stores, &c.ttls, &c.statuses, &c.setBys, &c.updated, &c.completed, &c.manifests}
}

// set sets the settings read on the dataset, as attachRowExpirations does for a listing.
func (c *rowExpirationColumns) set(ds *catalog.Dataset) error {
	for i, store := range c.stores {
		re := catalog.RowExpiration{ValueStatus: c.statuses[i], SetBy: c.setBys[i], Updated: c.updated[i], LastCompleted: c.completed[i],
			DeletionManifest: c.manifests[i]}
		if err := setRowExpiration(ds, store, c.ttls[i], re); err != nil {
			return err
		}
	}
	return nil
}

func notFoundMessage(id string) string {
	return fmt.Sprintf("dataset %s was not found", id)
}

// findDataset reads one dataset of the caller's scope, locking it for the transaction when forUpdate is set.
func findDataset(ctx context.Context, q pgx.Tx, c *catalog.Caller, id string, forUpdate bool) (*catalog.Dataset, error) {
	query := `SELECT ` + datasetColumns + ` FROM datasets d WHERE ` + scopeCondition + ` AND d.id = $3`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	ds, err := scanDataset(q.QueryRow(ctx, query, c.Org, c.Sandbox, id))
	if errors.Is(err, pgx.ErrNoRows) {
		if moved := movedAway(ctx, q, c.Org); moved != nil {
			return nil, moved
		}
	}
	if err != nil {
		return nil, translate(err, notFoundMessage(id))
	}
	if err := attachRowExpirations(ctx, q, []*catalog.Dataset{ds}); err != nil {
		return nil, err
	}
	return ds, nil
}

// lakeShares are the counters of the lake rows, summed per (dataset, partition) by the statements that select from
// it: metricsQuery for a listing (datasetByIDQuery sums the same counters for one dataset in datasetCounters).
const lakeShares = `FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name AND p.store = 'adobe_lakeHouse'
WHERE st.row_count > 0`

// metricsQuery reads each dataset's lake rows per partition from the counters.
const metricsQuery = `SELECT st.dataset_id, st.partition_name, sum(st.row_count)::bigint ` + lakeShares + `
  AND st.dataset_id = ANY($1) GROUP BY 1, 2`

// share is a dataset's rows in one lake partition.
type share struct {
	dataset, partition string
	rows               int64
}

// attachMetrics fills each dataset's lake metrics (a record dataset's rows are lake rows as events are): its row
// count from the counters, and its storage as its rows times the bytes per row of each partition they share with
// other datasets. When storage is not nil it
// holds the storage of the datasets as the listing's own statement measured it (storageCTE), and those figures are
// shown rather than the cached ones, so that a listing ordered by storage shows the figures it was ordered by.
func (s *DatasetService) attachMetrics(ctx context.Context, q querier, datasets []*catalog.Dataset, now time.Time, storage map[string]int64) error {
	byID := map[string]*catalog.Dataset{}
	var ids []string
	for _, ds := range datasets {
		ds.Metrics = &catalog.Metrics{AsOf: now}
		byID[ds.ID] = ds
		ids = append(ids, ds.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, metricsQuery, ids)
	if err != nil {
		return fmt.Errorf("read dataset metrics: %w", err)
	}
	var shares []share
	var sh share
	if _, err := pgx.ForEachRow(rows, []any{&sh.dataset, &sh.partition, &sh.rows}, func() error {
		shares = append(shares, sh)
		return nil
	}); err != nil {
		return fmt.Errorf("read dataset metrics: %w", err)
	}
	if storage != nil {
		for _, sh := range shares {
			byID[sh.dataset].Metrics.RowCount += sh.rows
		}
		for id, ds := range byID {
			ds.Metrics.StorageSize = storage[id]
		}
		return nil
	}
	return s.addShares(ctx, q, byID, shares)
}

// addShares adds each share to its dataset's metrics: its rows, and its storage estimated by the bytes per row of
// its partition (each partition measured at most once a minute).
func (s *DatasetService) addShares(ctx context.Context, q querier, byID map[string]*catalog.Dataset, shares []share) error {
	for _, sh := range shares {
		byID[sh.dataset].Metrics.RowCount += sh.rows
	}
	if len(shares) == 0 {
		return nil
	}
	parts := make([]string, 0, len(shares))
	for _, sh := range shares {
		parts = append(parts, sh.partition)
	}
	slices.Sort(parts)
	perRow, err := s.db.rows.bytesPerRow(ctx, q, slices.Compact(parts))
	if err != nil {
		return err
	}
	// Summed, then truncated, as storageCTE does.
	sizes := make(map[string]float64, len(byID))
	for _, sh := range shares {
		sizes[sh.dataset] += float64(sh.rows) * perRow[sh.partition]
	}
	for id, size := range sizes {
		byID[id].Metrics.StorageSize = int64(size)
	}
	return nil
}

// datasetByIDQuery reads one dataset of the caller's scope with all that GET /dataSets/{id} shows of it, in one
// statement: its row expirations, its count of active holds (attachHolds' count), its pending expiration's expiry
// (attachPendingExpiries'), its lake shares (metricsQuery's) and its expired backlog at $4, both from one probe of its
// counters (datasetCounters). One statement is one round trip where a read-only transaction of five statements took
// seven with its BEGIN and COMMIT, and one snapshot for the whole answer, where READ COMMITTED gave each statement its
// own. Each subquery probes its table's index on the dataset.
var datasetByIDQuery = `
SELECT ` + datasetColumns + `, re.stores, re.ttls, re.statuses, re.set_bys, re.updated, re.completed, re.manifests,
  (SELECT count(*)::int FROM dataset_holds k WHERE k.dataset_id = d.id AND k.released_at IS NULL),
  (SELECT max(e.expiry) FROM dataset_expirations e WHERE e.dataset_id = d.id AND e.status = 'pending'),
  m.partitions, m.row_counts, m.bl_stores, m.bl_rows, m.bl_since
FROM datasets d
CROSS JOIN LATERAL (` + rowExpirationArrays + `) re
` + datasetCounters + `
WHERE ` + scopeCondition + ` AND d.id = $3`

// FindDatasetByID implements catalog.DatasetService, in one statement (datasetByIDQuery).
func (s *DatasetService) FindDatasetByID(ctx context.Context, c *catalog.Caller, id string) (_ *catalog.Dataset, err error) {
	defer outage(&err)
	now := s.db.now()
	var re rowExpirationColumns
	var holds int
	var pending *time.Time
	var partitions []string
	var counts []int64
	var backlogStores []string
	var backlogRows []int64
	var backlogSince []time.Time
	ds, err := scanDataset(s.db.Pool.QueryRow(ctx, datasetByIDQuery, c.Org, c.Sandbox, id, now),
		append(re.targets(), &holds, &pending, &partitions, &counts, &backlogStores, &backlogRows, &backlogSince)...)
	if err != nil {
		return nil, translate(err, notFoundMessage(id))
	}
	if err := re.set(ds); err != nil {
		return nil, err
	}
	ds.ActiveHolds = holds
	if pending != nil {
		t := pending.UTC()
		ds.PendingExpiry = &t
	}
	ds.Metrics = &catalog.Metrics{AsOf: now}
	ds.Backlog = backlogOf(backlogStores, backlogRows, backlogSince)
	shares := make([]share, len(partitions))
	for i, p := range partitions {
		shares[i] = share{dataset: ds.ID, partition: p, rows: counts[i]}
	}
	// The sizes are measured on the pool: the statement above has released its connection.
	if err := s.addShares(ctx, s.db.Pool, map[string]*catalog.Dataset{ds.ID: ds}, shares); err != nil {
		return nil, err
	}
	return ds, nil
}

// FindDatasets implements catalog.DatasetService.
func (s *DatasetService) FindDatasets(ctx context.Context, c *catalog.Caller, f catalog.DatasetFilter) (_ []*catalog.Dataset, err error) {
	defer outage(&err)
	query, args, withStorage := datasetQuery(c, f)
	rows, err := s.db.Pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list datasets: %w", err)
	}
	var storage map[string]int64
	if withStorage {
		storage = map[string]int64{}
	}
	datasets, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Dataset, error) {
		if !withStorage {
			return scanDataset(row)
		}
		var size int64
		ds, err := scanDataset(extraColumns{row, []any{&size}})
		if err == nil {
			storage[ds.ID] = size
		}
		return ds, err
	})
	if err != nil {
		return nil, fmt.Errorf("list datasets: %w", err)
	}
	if err := attachRowExpirations(ctx, s.db.Pool, datasets); err != nil {
		return nil, err
	}
	if err := attachHolds(ctx, s.db.Pool, datasets); err != nil {
		return nil, err
	}
	if err := attachPendingExpiries(ctx, s.db.Pool, datasets); err != nil {
		return nil, err
	}
	if err := s.attachMetrics(ctx, s.db.Pool, datasets, s.db.now(), storage); err != nil {
		return nil, err
	}
	return datasets, nil
}

// extraColumns scans a row whose dataset columns are followed by more, into extra.
type extraColumns struct {
	pgx.Row
	extra []any
}

// Scan scans the dataset columns into dest and the rest into extra.
func (r extraColumns) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// storageField is the orderBy field of the lake's storage estimate. Ordering by it adds storageCTE to the listing.
const storageField = "extensions.adobe_lakeHouse.metrics.storageSize"

// storageCTE estimates, in the listing's statement, the lake storage of every dataset its filters keep, as
// attachMetrics does: each lake partition's size on disk over its rows (of every dataset), measured once in the
// statement, times the dataset's rows there, summed. Only the partitions holding rows of those datasets are
// measured, so another tenant's partitions cost the listing nothing (internal/hostile holds it); to_regclass makes a
// partition a run dropped meanwhile measure NULL, not fail. Its per-dataset figure, storage.size, is both the order
// and what the listing shows.
func storageCTE(filters string) string {
	return `WITH scoped AS MATERIALIZED (
  SELECT st.dataset_id, st.partition_name, st.row_count
  FROM datasets d JOIN row_stats st ON st.dataset_id = d.id
  WHERE ` + filters + ` AND st.row_count > 0),
per_row AS MATERIALIZED (
  SELECT p.name, pg_total_relation_size(to_regclass(p.name))::float8 / NULLIF(sum(st.row_count), 0) AS bytes
  FROM row_partitions p JOIN row_stats st ON st.partition_name = p.name
  WHERE p.store = 'adobe_lakeHouse' AND p.name IN (SELECT partition_name FROM scoped) GROUP BY p.name),
storage AS (
  SELECT s.dataset_id, trunc(sum(s.row_count * r.bytes))::bigint AS size
  FROM scoped s JOIN per_row r ON r.name = s.partition_name GROUP BY s.dataset_id)
`
}

// orderColumns maps the orderable fields of the API to columns, or to a per-dataset subquery for the retention
// columns of the inventory, or to the storage estimate of storageCTE; nothing else reaches ORDER BY. Each subquery is
// one index probe per dataset (row_expirations' key, row_stats_dataset_idx), so ordering 10,000 datasets stays well
// under the time of a page.
var orderColumns = map[string]string{
	"name": "d.name", "created": "d.created_at", "updated": "d.updated_at",
	"classification.dataBehavior": "d.data_behavior", "classification.managedBy": "d.managed_by",
	"extensions.adobe_lakeHouse.rowExpiration.ttlValue":      ttlOrder("adobe_lakeHouse"),
	"extensions.adobe_unifiedProfile.rowExpiration.ttlValue": ttlOrder("adobe_unifiedProfile"),
	"extensions.adobe_lakeHouse.rowExpiration.lastCompleted": `(SELECT r.last_completed_at FROM row_expirations r
		WHERE r.dataset_id = d.id AND r.store = 'adobe_lakeHouse')`,
	// The partition's store is probed per counter (EXISTS) rather than joined: a join builds a hash of every
	// partition for each dataset ordered, 10,000 times over.
	"extensions.adobe_lakeHouse.metrics.rowCount": `(SELECT COALESCE(sum(st.row_count), 0) FROM row_stats st
		WHERE st.dataset_id = d.id AND st.row_count > 0 AND EXISTS (SELECT 1 FROM row_partitions p
		WHERE p.name = st.partition_name AND p.store = 'adobe_lakeHouse'))`,
	// The SQL twin of catalog.Dataset.NextRun: the store's next run, the same for every dataset that has one, for a
	// dataset with a lake rowExpiration (0), none while held (1, after those: the run comes after the release), and
	// NULL without a rowExpiration.
	"extensions.adobe_lakeHouse.rowExpiration.nextRun": `(SELECT CASE WHEN ` + heldCondition + ` THEN 1 ELSE 0 END
		FROM row_expirations r WHERE r.dataset_id = d.id AND r.store = 'adobe_lakeHouse')`,
	// Every dataset shows a storage (attachMetrics), records' as events'; one without rows has 0.
	storageField: "COALESCE(storage.size, 0)",
}

// ttlOrder orders by a store's TTL as the API compares periods (Postgres compares intervals with 30 days to a month,
// as retention.Period does): keep forever (a NULL ttl_value) as the longest, a dataset without a rowExpiration
// (NULL, placed last by NULLS LAST) after every value.
func ttlOrder(store string) string {
	return `(SELECT COALESCE(r.ttl_value::interval, interval '1000000 years') FROM row_expirations r
		WHERE r.dataset_id = d.id AND r.store = '` + store + `')`
}

// datasetQuery builds the listing's statement, and says whether it ends each row with the dataset's storage: it
// does when ordered by storage.
func datasetQuery(c *catalog.Caller, f catalog.DatasetFilter) (query string, args []any, withStorage bool) {
	args = []any{c.Org, c.Sandbox}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := []string{scopeCondition}
	if len(f.Names) > 0 {
		where = append(where, "d.name = ANY("+arg(f.Names)+")")
	}
	if len(f.NotNames) > 0 {
		where = append(where, "d.name <> ALL("+arg(f.NotNames)+")")
	}
	if f.NameContains != "" {
		// strpos, not LIKE: the text is matched literally, with no wildcard to escape.
		where = append(where, "strpos(lower(d.name), lower("+arg(f.NameContains)+")) > 0")
	}
	for _, t := range f.Tags {
		where = append(where, tagCondition(t, arg))
	}
	if f.Held != nil && *f.Held {
		where = append(where, heldCondition)
	} else if f.Held != nil {
		where = append(where, "NOT "+heldCondition)
	}
	var order []string
	for _, o := range f.OrderBy {
		// NULLS LAST in both directions: a dataset without the value (no rowExpiration, never run) ends the list.
		dir := " ASC NULLS LAST"
		if o.Desc {
			dir = " DESC NULLS LAST"
		}
		order = append(order, orderColumns[o.Field]+dir)
		withStorage = withStorage || o.Field == storageField
	}
	order = append(order, "d.created_at ASC", "d.id ASC")
	filters := strings.Join(where, " AND ")
	query = `SELECT ` + datasetColumns + ` FROM datasets d WHERE ` + filters + ` ORDER BY ` + strings.Join(order, ", ")
	if withStorage {
		query = storageCTE(filters) + `SELECT ` + datasetColumns + `, COALESCE(storage.size, 0)
FROM datasets d LEFT JOIN storage ON storage.dataset_id = d.id WHERE ` + filters + ` ORDER BY ` + strings.Join(order, ", ")
	}
	if !f.IncludeAll {
		query += ` LIMIT ` + arg(f.Limit) + ` OFFSET ` + arg(f.Offset)
	}
	return query, args, withStorage
}

// tagCondition matches a tag name and a value pattern in which "*" is a wildcard. catalog.ExpirationTag is matched
// against the dataset's pending expiration, from which reads derive it, never against stored tags.
func tagCondition(t catalog.TagFilter, arg func(any) string) string {
	if t.Name == catalog.ExpirationTag {
		return expirationTagCondition(t.Value, arg)
	}
	if t.Value == "*" {
		return "d.tags ? " + arg(t.Name)
	}
	escaped := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(t.Value)
	pattern := strings.ReplaceAll(escaped, "*", "%")
	return "EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(d.tags -> " + arg(t.Name) +
		") = 'array' THEN d.tags -> " + arg(t.Name) + " ELSE '[]' END) v WHERE v LIKE " + arg(pattern) + ")"
}

const insertDataset = `
INSERT INTO datasets (id, org_id, sandbox_name, name, description, tags, data_behavior, managed_by, schema_ref,
                      extensions, version, created_at, updated_at, created_user, updated_user, created_client)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`

const upsertRowExpiration = `
INSERT INTO row_expirations (dataset_id, store, ttl_value, value_status, set_by, updated_at, last_completed_at,
                             deletion_manifest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (dataset_id, store) DO UPDATE
SET ttl_value = EXCLUDED.ttl_value, value_status = EXCLUDED.value_status, set_by = EXCLUDED.set_by,
    updated_at = EXCLUDED.updated_at, deletion_manifest = EXCLUDED.deletion_manifest`

// CreateDataset implements catalog.DatasetService.
func (s *DatasetService) CreateDataset(ctx context.Context, c *catalog.Caller, create catalog.DatasetCreate) (_ *catalog.Dataset, err error) {
	defer outage(&err)
	now := s.db.now()
	var ds *catalog.Dataset
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		limits, err := findLimits(ctx, tx, c.Org)
		if err != nil {
			return err
		}
		ds = catalog.NewDataset(create, limits, c, catalog.NewDatasetID(), now)
		_, err = tx.Exec(ctx, insertDataset, ds.ID, ds.Org, ds.Sandbox, ds.Name, ds.Description, ds.Tags,
			string(ds.Classification.DataBehavior), string(ds.Classification.ManagedBy), ds.SchemaRef,
			nonNil(ds.Extensions), ds.Version, ds.Created, ds.Updated, ds.CreatedUser, ds.UpdatedUser, ds.CreatedClient)
		if err != nil {
			if catalog.ErrorCode(translate(err, "")) == catalog.ECONFLICT {
				return catalog.Errorf(catalog.ECONFLICT, "a dataset named %q already exists in sandbox %s", ds.Name, ds.Sandbox)
			}
			return fmt.Errorf("insert dataset %s: %w", ds.ID, err)
		}
		for store, re := range ds.RowExpiration {
			if err := writeRowExpiration(ctx, tx, ds.ID, store, re); err != nil {
				return err
			}
			if err := startSetting(ctx, tx, ds.ID, store, re.TTL, now); err != nil {
				return err
			}
		}
		return writeAuditEvent(ctx, tx, datasetEvent(c, ds, audit.ActionCreate, now, createDetails(ds)))
	})
	if err != nil {
		return nil, err
	}
	return ds, nil
}

func createDetails(ds *catalog.Dataset) map[string]any {
	stores := map[string]any{}
	for store, re := range ds.RowExpiration {
		stores[string(store)] = map[string]any{"after": re.Document()}
	}
	if len(stores) == 0 {
		return map[string]any{}
	}
	return map[string]any{"rowExpiration": stores}
}

func writeRowExpiration(ctx context.Context, tx pgx.Tx, id string, store catalog.Store, re catalog.RowExpiration) error {
	var ttl *string
	if re.TTL != nil {
		v := re.TTL.String()
		ttl = &v
	}
	_, err := tx.Exec(ctx, upsertRowExpiration, id, string(store), ttl, re.ValueStatus, re.SetBy, re.Updated, re.LastCompleted,
		re.DeletionManifest)
	if err != nil {
		return fmt.Errorf("write row expiration %s/%s: %w", id, store, err)
	}
	return nil
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func datasetEvent(c *catalog.Caller, ds *catalog.Dataset, action string, now time.Time, details map[string]any) *audit.Event {
	return &audit.Event{
		Org: ds.Org, Sandbox: ds.Sandbox, Timestamp: now, RequestID: c.RequestID, AssetType: audit.AssetDataset,
		AssetID: ds.ID, AssetName: ds.Name, Action: action, Status: audit.StatusSuccess, User: c.User,
		ClientID: c.ClientID, Details: details,
	}
}

const softDeleteDataset = `UPDATE datasets SET deleted_at = $2, updated_at = $2, updated_user = $3 WHERE id = $1`

// DeleteDataset implements catalog.DatasetService. The dataset's open expiration ends cancelled in the same
// transaction, its reason saying why, so that it stops counting against the org's quota at once; the Delete event
// names it (details.cancelledExpirationId). The expiration is locked before the dataset, in the order the
// expiration runner and a reopen take them, so that neither waits for the other in a cycle.
func (s *DatasetService) DeleteDataset(ctx context.Context, c *catalog.Caller, id string) (err error) {
	defer outage(&err)
	now := s.db.now()
	return s.db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockOpenExpiration(ctx, tx, c, id); err != nil {
			return err
		}
		ds, err := findDataset(ctx, tx, c, id, true)
		if err != nil {
			return err
		}
		details := map[string]any{}
		cancelled, err := cancelOpenExpiration(ctx, tx, c, ds.ID, now)
		if err != nil {
			return err
		}
		if cancelled != "" {
			details["cancelledExpirationId"] = cancelled
		}
		return deleteDataset(ctx, tx, c, ds, now, details)
	})
}

// deleteDataset hides ds at once and writes its Delete event with details, inside tx: the one path of a dataset's
// deletion, for DELETE /dataSets/{id} and for an expiration come due. Its rows are left to the next retention run,
// which removes the rows of deleted datasets. A SYSTEM dataset is refused with EFORBIDDEN.
func deleteDataset(ctx context.Context, tx pgx.Tx, c *catalog.Caller, ds *catalog.Dataset, now time.Time, details map[string]any) error {
	if ds.Classification.ManagedBy == catalog.System {
		return catalog.Errorf(catalog.EFORBIDDEN, "dataset %s is managed by the SYSTEM and cannot be deleted", ds.ID)
	}
	if err := refuseIfHeld(ctx, tx, ds.ID, "deleting the dataset"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, softDeleteDataset, ds.ID, now, c.User); err != nil {
		return fmt.Errorf("delete dataset %s: %w", ds.ID, err)
	}
	return writeAuditEvent(ctx, tx, datasetEvent(c, ds, audit.ActionDelete, now, details))
}

const updateDataset = `
UPDATE datasets SET description = $2, tags = $3, extensions = $4, version = $5, updated_at = $6, updated_user = $7,
       name = $8, row_overrides_switch = $9
WHERE id = $1`

// PatchDataset implements catalog.DatasetService. The dataset row is locked for the transaction, so concurrent
// patches of different fields apply one after the other and none is lost, whichever replica serves them.
func (s *DatasetService) PatchDataset(ctx context.Context, c *catalog.Caller, id string, p *catalog.Patch, ifMatch *catalog.Precondition) (_ *catalog.Dataset, err error) {
	defer outage(&err)
	now := s.db.now()
	var next *catalog.Dataset
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, id, true)
		if err != nil {
			return err
		}
		if err := ifMatch.Check(ds); err != nil {
			return err
		}
		limits, err := findLimits(ctx, tx, c.Org)
		if err != nil {
			return err
		}
		var change *catalog.Change
		next, change, err = catalog.ApplyPatch(ds, p, limits, c, now)
		if err != nil {
			return err
		}
		if err := writeDataset(ctx, tx, next); err != nil {
			return err
		}
		for store, ch := range change.RowExpiration {
			if err := writeRowExpiration(ctx, tx, id, store, ch.After); err != nil {
				return err
			}
			if !retention.SamePeriod(ch.Before.TTL, ch.After.TTL) {
				if err := startSetting(ctx, tx, id, store, ch.After.TTL, now); err != nil {
					return err
				}
			}
		}
		if err := writeAuditEvent(ctx, tx, datasetEvent(c, next, audit.ActionUpdate, now, change.AuditDetails())); err != nil {
			return err
		}
		// The answer shows the dataset's holds, as GET does, and with them whether a run may remove its rows.
		return attachHolds(ctx, tx, []*catalog.Dataset{next})
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

// writeDataset stores a patched dataset's own columns. A v1 rename to a name another live dataset of the sandbox
// has breaks the unique index, which is the ECONFLICT it answers.
func writeDataset(ctx context.Context, tx pgx.Tx, ds *catalog.Dataset) error {
	_, err := tx.Exec(ctx, updateDataset, ds.ID, ds.Description, ds.Tags, nonNil(ds.Extensions), ds.Version, ds.Updated,
		ds.UpdatedUser, ds.Name, string(ds.RowOverrides))
	if err == nil {
		return nil
	}
	if catalog.ErrorCode(translate(err, "")) == catalog.ECONFLICT {
		return &catalog.Error{Code: catalog.ECONFLICT, Type: "name-taken", Field: "name",
			Message: fmt.Sprintf("a dataset named %q already exists in sandbox %s", ds.Name, ds.Sandbox)}
	}
	return fmt.Errorf("update dataset %s: %w", ds.ID, err)
}

// ttlLimitsQuery reads all that GET /ttl/{id} shows in one statement (one round trip where a read-only
// transaction of two statements and a query after it took five): the dataset of the caller's scope with its row expirations, and its
// org's TTL policies (selectPolicies') as parallel arrays.
const ttlLimitsQuery = `
SELECT ` + datasetColumns + `, re.stores, re.ttls, re.statuses, re.set_bys, re.updated, re.completed, re.manifests,
  pol.stores, pol.managed_bys, pol.records, pol.mins, pol.maxes, pol.defaults
FROM datasets d
CROSS JOIN LATERAL (` + rowExpirationArrays + `) re
CROSS JOIN LATERAL (SELECT array_agg(t.store) AS stores, array_agg(t.managed_by) AS managed_bys,
  array_agg(t.records) AS records, array_agg(t.min_value) AS mins, array_agg(t.max_value) AS maxes,
  array_agg(t.default_value) AS defaults
  FROM ttl_policies t WHERE t.org_id = $1) pol
WHERE ` + scopeCondition + ` AND d.id = $3`

// TTLLimits implements catalog.DatasetService, in one statement (ttlLimitsQuery). The dataset's metrics are not
// read: the limits answer does not show them.
func (s *DatasetService) TTLLimits(ctx context.Context, c *catalog.Caller, id string) (_ *catalog.Dataset, _ map[catalog.Store]catalog.Limits, err error) {
	defer outage(&err)
	var re rowExpirationColumns
	var pol policyColumns
	ds, err := scanDataset(s.db.Pool.QueryRow(ctx, ttlLimitsQuery, c.Org, c.Sandbox, id), append(re.targets(), pol.targets()...)...)
	if err != nil {
		return nil, nil, translate(err, notFoundMessage(id))
	}
	if err := re.set(ds); err != nil {
		return nil, nil, err
	}
	all, err := limitsWith(c.Org, pol.rows())
	if err != nil {
		return nil, nil, err
	}
	out := map[catalog.Store]catalog.Limits{}
	for _, store := range catalog.Stores {
		out[store] = all[ds.PolicyKey(store)]
	}
	return ds, out, nil
}
