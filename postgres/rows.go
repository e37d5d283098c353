package postgres

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// DefaultChunkRows is how many rows an ingestion commits at a time: large enough that COPY's per-statement cost
// vanishes, small enough that a streaming client sees its rows stored while it is still sending.
const DefaultChunkRows = 5000

// RowService implements catalog.RowService.
type RowService struct {
	db        *DB
	chunkRows int
}

// NewRowService returns a RowService on db committing chunkRows rows at a time (0: DefaultChunkRows).
func NewRowService(db *DB, chunkRows int) *RowService {
	if chunkRows <= 0 {
		chunkRows = DefaultChunkRows
	}
	return &RowService{db: db, chunkRows: chunkRows}
}

var _ catalog.RowService = (*RowService)(nil)

// currentSetting is the TTL setting in force for one store of a dataset.
type currentSetting struct {
	id  int64
	ttl *retention.Period
}

// ingestTarget is what an ingestion writes to: the dataset, its stores and their current settings.
type ingestTarget struct {
	ds       *catalog.Dataset
	limits   catalog.Limits
	settings map[catalog.Store]currentSetting // the stores the rows go to
}

const selectCurrentSettings = `
SELECT store, id FROM ttl_settings WHERE dataset_id = $1 AND effective_until IS NULL`

func (s *RowService) target(ctx context.Context, c *catalog.Caller, datasetID string) (*ingestTarget, error) {
	t := &ingestTarget{settings: map[catalog.Store]currentSetting{}}
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if t.ds, err = findDataset(ctx, tx, c, datasetID, false); err != nil {
			return err
		}
		limits, err := findLimits(ctx, tx, c.Org)
		if err != nil {
			return err
		}
		t.limits = limits[catalog.PolicyKey{Store: catalog.LakeHouse, ManagedBy: t.ds.Classification.ManagedBy}]
		rows, err := tx.Query(ctx, selectCurrentSettings, datasetID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var store string
			var cs currentSetting
			if err := rows.Scan(&store, &cs.id); err != nil {
				return err
			}
			st := catalog.Store(store)
			if st == catalog.Profile && !t.ds.ProfileEnabled() {
				continue // only profile-enabled datasets keep a profile copy
			}
			// The dataset row was read in the same transaction, so its TTL is this setting's.
			cs.ttl = t.ds.RowExpiration[st].TTL
			t.settings[st] = cs
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("prepare ingestion into %s: %w", datasetID, err)
	}
	if !t.ds.IsTimeSeries() {
		t.settings[catalog.LakeHouse] = currentSetting{} // record rows never expire
	}
	return t, nil
}

// Ingest implements catalog.RowService.
func (s *RowService) Ingest(ctx context.Context, c *catalog.Caller, datasetID string, events iter.Seq[catalog.RawEvent], opts catalog.IngestOptions) (*catalog.IngestResult, error) {
	t, err := s.target(ctx, c, datasetID)
	if err != nil {
		return nil, err
	}
	rc := catalog.RowContext{Dataset: t.ds, Lake: t.limits, AllowIngestedAt: opts.AllowIngestedAt}
	res := &catalog.IngestResult{}
	valid := func(yield func(catalog.RowInput) bool) {
		for ev := range events {
			if ev.Err != nil {
				res.Reject(ev.Line, ev.Err)
				continue
			}
			in, err := rc.ParseRow(ev.Data)
			if err != nil {
				res.Reject(ev.Line, err)
				continue
			}
			if !yield(in) {
				return
			}
		}
	}
	return res, s.store(ctx, t, valid, res, opts)
}

// IngestRows stores rows that are valid by construction, such as an operator's synthetic data, without the JSON
// round trip of Ingest. Overrides are the caller's to keep within limits.
func (s *RowService) IngestRows(ctx context.Context, c *catalog.Caller, datasetID string, rows iter.Seq[catalog.RowInput], opts catalog.IngestOptions) (*catalog.IngestResult, error) {
	t, err := s.target(ctx, c, datasetID)
	if err != nil {
		return nil, err
	}
	res := &catalog.IngestResult{}
	return res, s.store(ctx, t, rows, res, opts)
}

// store writes rows in chunks of s.chunkRows, each committed as it fills.
func (s *RowService) store(ctx context.Context, t *ingestTarget, rows iter.Seq[catalog.RowInput], res *catalog.IngestResult, opts catalog.IngestOptions) error {
	chunk := make([]catalog.RowInput, 0, s.chunkRows)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		now := s.db.now()
		if err := s.writeChunk(ctx, t, chunk, now); err != nil {
			return err
		}
		res.Accepted += len(chunk)
		res.ExpiredOnArrival += expiredOnArrival(t, chunk, now)
		if opts.ChunkCommitted != nil {
			opts.ChunkCommitted(len(chunk))
		}
		chunk = chunk[:0]
		return nil
	}
	for in := range rows {
		chunk = append(chunk, in)
		if len(chunk) >= s.chunkRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// expiredOnArrival counts the rows already past their expiry under the lake's current setting: a backfill of old
// events is accepted and hidden at once.
func expiredOnArrival(t *ingestTarget, chunk []catalog.RowInput, now time.Time) int {
	ttl := t.settings[catalog.LakeHouse].ttl
	if ttl == nil {
		return 0
	}
	n := 0
	for _, in := range chunk {
		if e := placedExpiry(in, ttl); e != nil && !e.After(now) {
			n++
		}
	}
	return n
}

// placedExpiry is the row's expiry under a setting: nil when the setting keeps rows forever or the row never expires.
func placedExpiry(in catalog.RowInput, ttl *retention.Period) *time.Time {
	if ttl == nil || in.Never {
		return nil
	}
	r := retention.Row{Timestamp: in.Timestamp, OwnExpiry: in.OwnExpiry}
	e := r.Expiry(*ttl)
	return &e
}

// writeChunk stores one chunk in one transaction. A partition dropped by a run between our check and our COPY is
// recreated and the chunk retried once.
func (s *RowService) writeChunk(ctx context.Context, t *ingestTarget, chunk []catalog.RowInput, now time.Time) error {
	chunk = lastPerID(chunk)
	groups := map[string]*placedGroup{}
	for store, cs := range t.settings {
		for i := range chunk {
			in := &chunk[i]
			spec := placement(store, placedExpiry(*in, cs.ttl))
			key := spec.name()
			g := groups[key]
			if g == nil {
				g = &placedGroup{spec: spec, settingID: cs.id}
				groups[key] = g
			}
			g.rows = append(g.rows, in)
		}
	}
	specs := map[string]partitionSpec{}
	for name, g := range groups {
		specs[name] = g.spec
	}
	err := s.db.ensurePartitions(ctx, specs)
	if err == nil {
		err = s.db.inTx(ctx, func(tx pgx.Tx) error { return copyChunk(ctx, tx, t, chunk, groups, now) })
	}
	if isUndefinedTable(err) {
		for name := range specs {
			s.db.forgetPartition(name)
		}
		if err = s.db.ensurePartitions(ctx, specs); err == nil {
			err = s.db.inTx(ctx, func(tx pgx.Tx) error { return copyChunk(ctx, tx, t, chunk, groups, now) })
		}
	}
	if err != nil {
		return fmt.Errorf("store %d rows of %s: %w", len(chunk), t.ds.ID, err)
	}
	return nil
}

// placedGroup is the rows of a chunk bound for one partition.
type placedGroup struct {
	spec      partitionSpec
	settingID int64
	rows      []*catalog.RowInput
}

// lastPerID keeps the last event of each _id in a chunk, so that an _id sent twice is stored once, with the later
// content.
func lastPerID(chunk []catalog.RowInput) []catalog.RowInput {
	seen := make(map[string]int, len(chunk))
	out := chunk[:0:0]
	for _, in := range chunk {
		if i, ok := seen[in.ID]; ok {
			out[i] = in
			continue
		}
		seen[in.ID] = len(out)
		out = append(out, in)
	}
	return out
}

// datasetLockSQL serializes the chunks of one dataset, so two concurrent uploads of the same _id cannot both see it
// missing and both store it.
const datasetLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('rows:' || $1, 0))`

var rowColumns = []string{"dataset_id", "row_id", "ts", "ingested_at", "placed_expiry", "setting_id", "own_expiry", "never_expires", "payload"}

func copyChunk(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput, groups map[string]*placedGroup, now time.Time) error {
	if _, err := tx.Exec(ctx, datasetLockSQL, t.ds.ID); err != nil {
		return err
	}
	if err := replaceClientIDs(ctx, tx, t, chunk); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		g := groups[name]
		ttl := t.settings[g.spec.store].ttl
		maxIngested := time.Time{}
		src := pgx.CopyFromSlice(len(g.rows), func(i int) ([]any, error) {
			in := g.rows[i]
			ingested := now
			if in.IngestedAt != nil {
				ingested = *in.IngestedAt
			}
			if ingested.After(maxIngested) {
				maxIngested = ingested
			}
			ts := in.Timestamp
			if ts.IsZero() {
				ts = ingested
			}
			return []any{t.ds.ID, in.ID, ts, ingested, placedValue(placedExpiry(*in, ttl)), g.settingID, in.OwnExpiry, in.Never, in.Payload}, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{name}, rowColumns, src); err != nil {
			return err
		}
		if err := addStats(ctx, tx, name, t.ds.ID, g.settingID, int64(len(g.rows)), maxIngested); err != nil {
			return err
		}
	}
	return nil
}

const upsertStats = `
INSERT INTO row_stats (partition_name, dataset_id, setting_id, row_count, max_ingested_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (partition_name, dataset_id, setting_id) DO UPDATE
SET row_count = row_stats.row_count + EXCLUDED.row_count,
    max_ingested_at = GREATEST(row_stats.max_ingested_at, EXCLUDED.max_ingested_at)`

func addStats(ctx context.Context, tx pgx.Tx, partition, datasetID string, settingID, n int64, maxIngested time.Time) error {
	if _, err := tx.Exec(ctx, upsertStats, partition, datasetID, settingID, n, maxIngested); err != nil {
		return fmt.Errorf("count rows of %s in %s: %w", datasetID, partition, err)
	}
	return nil
}

const subtractStats = `
UPDATE row_stats SET row_count = row_count - $4 WHERE partition_name = $1 AND dataset_id = $2 AND setting_id = $3`

// removedRows counts rows a statement removed, by partition and setting, for the counters.
type removedRows map[statsKey]int64

// statsKey names one counter of a dataset: its rows placed in a partition under a setting.
type statsKey struct {
	partition string
	settingID int64
}

func (r removedRows) add(partition string, settingID int64) {
	r[statsKey{partition, settingID}]++
}

func (r removedRows) apply(ctx context.Context, tx pgx.Tx, datasetID string) error {
	for key, n := range r {
		if _, err := tx.Exec(ctx, subtractStats, key.partition, datasetID, key.settingID, n); err != nil {
			return fmt.Errorf("uncount rows of %s in %s: %w", datasetID, key.partition, err)
		}
	}
	return nil
}

// replaceClientIDs removes the stored rows whose _id the chunk sends again, from every store, so that the chunk's
// version replaces them, as an upsert does.
func replaceClientIDs(ctx context.Context, tx pgx.Tx, t *ingestTarget, chunk []catalog.RowInput) error {
	var ids []string
	for _, in := range chunk {
		if in.ClientID {
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := deleteRowsByID(ctx, tx, t.ds.ID, ids)
	return err
}

// deleteRowsByID deletes the rows with these _ids from both stores, keeping the counters exact, and returns how many
// rows it removed.
func deleteRowsByID(ctx context.Context, tx pgx.Tx, datasetID string, ids []string) (int64, error) {
	var total int64
	for _, store := range catalog.Stores {
		removed := removedRows{}
		rows, err := tx.Query(ctx, `DELETE FROM `+storeTable(store)+` WHERE dataset_id = $1 AND row_id = ANY($2)
			RETURNING tableoid::regclass::text, setting_id`, datasetID, ids)
		if err != nil {
			return 0, fmt.Errorf("replace rows of %s: %w", datasetID, err)
		}
		for rows.Next() {
			var part string
			var setting int64
			if err := rows.Scan(&part, &setting); err != nil {
				rows.Close()
				return 0, err
			}
			removed.add(part, setting)
			total++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if err := removed.apply(ctx, tx, datasetID); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// expiredPredicate is the SQL form of retention.Expired for a row r of a store's table, with $now the evaluation
// time: reads, previews and runs all use it, so they never disagree about which rows have expired.
func expiredPredicate(store catalog.Store, now string) string {
	return `(NOT r.never_expires AND EXISTS (
    SELECT 1 FROM ttl_settings h
    WHERE h.dataset_id = r.dataset_id AND h.store = '` + string(store) + `' AND h.ttl IS NOT NULL
      AND (h.effective_until IS NULL OR h.effective_until > r.ingested_at)
      AND COALESCE(r.own_expiry, r.ts + h.ttl) <= LEAST(COALESCE(h.effective_until, ` + now + `), ` + now + `)))`
}

// FindRows implements catalog.RowService.
func (s *RowService) FindRows(ctx context.Context, c *catalog.Caller, datasetID string, f catalog.RowFilter) ([]catalog.Row, error) {
	var out []catalog.Row
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := findDataset(ctx, tx, c, datasetID, false); err != nil {
			return err
		}
		query, args := rowQuery(datasetID, f, s.db.now())
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("read rows of %s: %w", datasetID, err)
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.Row, error) {
			var r catalog.Row
			err := row.Scan(&r.ID, &r.Timestamp, &r.IngestedAt, &r.OwnExpiry, &r.Never, &r.Payload, &r.Expiry)
			return r, err
		})
		return err
	})
	return out, err
}

func rowQuery(datasetID string, f catalog.RowFilter, now time.Time) (string, []any) {
	args := []any{datasetID, now}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	where := []string{"r.dataset_id = $1", "NOT " + expiredPredicate(f.Store, "$2::timestamptz")}
	if f.Start != nil {
		where = append(where, "r.ts >= "+arg(*f.Start))
	}
	if f.End != nil {
		where = append(where, "r.ts < "+arg(*f.End))
	}
	if f.After != nil {
		where = append(where, "(r.ts, r.row_id) > ("+arg(f.After.Timestamp)+"::timestamptz, "+arg(f.After.ID)+"::text)")
	}
	query := `SELECT r.row_id, r.ts, r.ingested_at, r.own_expiry, r.never_expires, r.payload,
       CASE WHEN r.never_expires OR cur.ttl IS NULL THEN NULL ELSE COALESCE(r.own_expiry, r.ts + cur.ttl) END
FROM ` + storeTable(f.Store) + ` r
LEFT JOIN ttl_settings cur ON cur.dataset_id = r.dataset_id AND cur.store = '` + string(f.Store) + `' AND cur.effective_until IS NULL
WHERE ` + strings.Join(where, " AND ") + `
ORDER BY r.ts, r.row_id
LIMIT ` + arg(f.Limit)
	return query, args
}

// DeleteRow implements catalog.RowService.
func (s *RowService) DeleteRow(ctx context.Context, c *catalog.Caller, datasetID, rowID string) error {
	now := s.db.now()
	return s.db.inTx(ctx, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, false)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, datasetLockSQL, datasetID); err != nil {
			return err
		}
		n, err := deleteRowsByID(ctx, tx, datasetID, []string{rowID})
		if err != nil {
			return err
		}
		if n == 0 {
			return catalog.Errorf(catalog.ENOTFOUND, "row %q was not found in dataset %s", rowID, datasetID)
		}
		return writeAuditEvent(ctx, tx, datasetEvent(c, ds, audit.ActionDelete, now, map[string]any{"rowId": rowID, "rowsDeleted": n}))
	})
}
