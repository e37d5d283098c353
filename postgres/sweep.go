package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// SweepStore implements retention.SweepStore.
type SweepStore struct{ db *DB }

// NewSweepStore returns a SweepStore on db.
func NewSweepStore(db *DB) *SweepStore { return &SweepStore{db: db} }

var _ retention.SweepStore = (*SweepStore)(nil)

// badGroupCondition is true for a group of a partition's rows (one dataset, one placement setting) that cannot go
// with a whole drop of partition p at $1 with grace $2: its dataset is live and either its setting changed before
// the partition's range ended (a longer TTL may keep some rows), it was placed under no TTL, it arrived too recently
// for the ingestion grace, or it is outside the run's scope ($3, NULL = all).
const badGroupCondition = `st.row_count > 0 AND NOT (
    (d.deleted_at IS NOT NULL AND d.deleted_at <= $1)
    OR (h.ttl IS NOT NULL
        AND (h.effective_until IS NULL OR h.effective_until >= p.upper_bound)
        AND st.max_ingested_at + $2::interval <= $1))
    OR ($3::text[] IS NOT NULL AND NOT st.dataset_id = ANY($3::text[]))`

const groupJoins = `FROM row_stats st
JOIN row_partitions p ON p.name = st.partition_name
LEFT JOIN datasets d ON d.id = st.dataset_id
LEFT JOIN ttl_settings h ON h.id = st.setting_id`

// sweepScope is the run's dataset scope as a query parameter: SQL NULL for every dataset (a nil slice would be
// sent as an empty array, which matches none).
func sweepScope(s retention.Sweep) any {
	if s.Datasets == nil {
		return nil
	}
	ids := make([]string, 0, len(s.Datasets))
	for id := range s.Datasets {
		ids = append(ids, id)
	}
	return ids
}

// DroppablePartitions implements retention.SweepStore.
func (s *SweepStore) DroppablePartitions(ctx context.Context, sw retention.Sweep) ([]retention.Partition, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT part.name FROM row_partitions part
WHERE part.store = $4 AND part.upper_bound <= $1
  AND NOT EXISTS (SELECT 1 `+groupJoins+` WHERE st.partition_name = part.name AND (`+badGroupCondition+`))
ORDER BY part.lower_bound`, sw.At, sw.Grace.Interval(), sweepScope(sw), sw.Store)
	if err != nil {
		return nil, fmt.Errorf("find droppable partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find droppable partitions: %w", err)
	}
	out := make([]retention.Partition, 0, len(names))
	for _, n := range names {
		out = append(out, retention.Partition{Name: n})
	}
	return out, nil
}

// DropPartition implements retention.SweepStore. The partition is locked first and re-checked under the lock,
// since an ingestion may have added rows since it was listed.
func (s *SweepStore) DropPartition(ctx context.Context, sw retention.Sweep, p retention.Partition, lockTimeout time.Duration) (map[string]int64, bool, error) {
	var counts map[string]int64
	dropped := false
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, max(lockTimeout.Milliseconds(), 1))); err != nil {
			return err
		}
		if !sw.DryRun {
			if _, err := tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{p.Name}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				return err
			}
		}
		var bad bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 `+groupJoins+` WHERE st.partition_name = $4 AND (`+badGroupCondition+`))`,
			sw.At, sw.Grace.Interval(), sweepScope(sw), p.Name).Scan(&bad)
		if err != nil || bad {
			return err
		}
		if counts, err = partitionCounts(ctx, tx, p.Name); err != nil {
			return err
		}
		dropped = true
		if sw.DryRun {
			return nil
		}
		return dropAndRecord(ctx, tx, sw, p.Name, counts, s.db.now())
	})
	if err != nil {
		return nil, false, fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	if dropped && !sw.DryRun {
		s.db.forgetPartition(p.Name)
	}
	return counts, dropped, nil
}

func partitionCounts(ctx context.Context, tx pgx.Tx, partition string) (map[string]int64, error) {
	rows, err := tx.Query(ctx, `SELECT dataset_id, sum(row_count)::bigint FROM row_stats WHERE partition_name = $1 AND row_count > 0 GROUP BY dataset_id`, partition)
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	var id string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		counts[id] = n
		return nil
	})
	return counts, err
}

// recordDeletions writes the ledger rows of one drop or batch, one per dataset, in one statement.
const recordDeletions = `
INSERT INTO retention_deletions (run_id, dataset_id, partition_name, rows_deleted, dropped, deleted_at)
SELECT $1, d.dataset_id, $2, d.n, $3, $4 FROM unnest($5::text[], $6::bigint[]) AS d (dataset_id, n)`

// dropAndRecord drops the partition and records, in the same transaction, the rows each dataset lost with it.
func dropAndRecord(ctx context.Context, tx pgx.Tx, sw retention.Sweep, partition string, counts map[string]int64, now time.Time) error {
	if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{partition}.Sanitize()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM row_partitions WHERE name = $1`, partition); err != nil {
		return err
	}
	ids := make([]string, 0, len(counts))
	ns := make([]int64, 0, len(counts))
	for ds, n := range counts {
		ids, ns = append(ids, ds), append(ns, n)
	}
	_, err := tx.Exec(ctx, recordDeletions, sw.RunID, partition, true, now, ids, ns)
	return err
}

// DatasetPartitions implements retention.SweepStore: the partitions holding rows of the dataset that may be
// deletable. A partition placed after the evaluation time can only hold such rows if the TTL they were placed under
// has changed since (a shorter TTL, or one set where there was none).
func (s *SweepStore) DatasetPartitions(ctx context.Context, sw retention.Sweep, datasetID string) ([]string, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT st.partition_name `+groupJoins+`
WHERE st.dataset_id = $1 AND p.store = $2 AND st.row_count > 0
  AND (d.deleted_at IS NOT NULL OR p.lower_bound <= $3 OR h.effective_until IS NOT NULL)
  AND NOT ($4 AND p.lower_bound <= $3)
GROUP BY st.partition_name, p.lower_bound ORDER BY p.lower_bound`, datasetID, sw.Store, sw.At, sw.BoundaryDone)
	if err != nil {
		return nil, fmt.Errorf("find partitions of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// deletableCondition selects the rows of dataset $1 in a partition r that a sweep at $2 with grace $3 may delete:
// every row of a deleted dataset, else expired rows ingested at least the grace ago, with an event time at or before
// $4 when that bound is given (see deletableBound).
func deletableCondition(store catalog.Store) string {
	return `r.dataset_id = $1 AND (
    EXISTS (SELECT 1 FROM datasets d WHERE d.id = $1 AND d.deleted_at IS NOT NULL AND d.deleted_at <= $2)
    OR ($4::timestamptz IS NULL OR r.ts <= $4) AND r.ingested_at + $3::interval <= $2
       AND ` + expiredPredicate(store, "$2::timestamptz", placedUnderCurrent(store)) + `)`
}

// countRemoved turns a CTE "gone" of deleted rows (dataset_id, setting_id) into the counter updates and the ledger
// rows of partition $P, in the statement that deleted them, and returns the rows each dataset lost.
func countRemoved(partition, runID, dropped, now string) string {
	return `,
counted AS (SELECT dataset_id, setting_id, count(*) AS n FROM gone GROUP BY dataset_id, setting_id),
stats AS (
    UPDATE row_stats st SET row_count = st.row_count - c.n FROM counted c
    WHERE st.partition_name = ` + partition + ` AND st.dataset_id = c.dataset_id AND st.setting_id = c.setting_id),
ledger AS (
    INSERT INTO retention_deletions (run_id, dataset_id, partition_name, rows_deleted, dropped, deleted_at)
    SELECT ` + runID + `, dataset_id, ` + partition + `, sum(n), ` + dropped + `, ` + now + ` FROM counted GROUP BY dataset_id)
SELECT dataset_id, sum(n)::bigint FROM counted GROUP BY dataset_id`
}

// deletableBound returns the latest event time a row of the dataset without an override can have and still be
// deletable at the sweep's time, as retention.LastExpiredEvent computes it from the store's history, so that a
// batch reads the dataset's rows in event-time order only as far as that. It returns nil when no bound applies (the
// dataset was deleted, or has rows with overrides, whose expiry does not follow their event time), and none=true
// when no row can be deletable at all.
func deletableBound(ctx context.Context, q querier, sw retention.Sweep, datasetID string) (bound *time.Time, none bool, err error) {
	var deleted, overrides bool
	err = q.QueryRow(ctx, `SELECT
    EXISTS (SELECT 1 FROM datasets WHERE id = $1 AND deleted_at IS NOT NULL AND deleted_at <= $3),
    EXISTS (SELECT 1 FROM row_overrides WHERE dataset_id = $1 AND store = $2)`, datasetID, sw.Store, sw.At).Scan(&deleted, &overrides)
	if err != nil || deleted || overrides {
		return nil, false, err
	}
	history, err := settingsHistory(ctx, q, datasetID, catalog.Store(sw.Store))
	if err != nil {
		return nil, false, err
	}
	last, ok := retention.LastExpiredEvent(history, sw.At)
	if !ok {
		return nil, true, nil
	}
	return &last, false, nil
}

// settingsHistory reads every TTL setting a store of a dataset has had, oldest first.
func settingsHistory(ctx context.Context, q querier, datasetID string, store catalog.Store) ([]retention.Setting, error) {
	rows, err := q.Query(ctx, `SELECT ttl, effective_from, effective_until FROM ttl_settings
		WHERE dataset_id = $1 AND store = $2 ORDER BY effective_from, id`, datasetID, string(store))
	if err != nil {
		return nil, fmt.Errorf("read TTL history of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (retention.Setting, error) {
		var s retention.Setting
		var ttl pgtype.Interval
		if err := row.Scan(&ttl, &s.From, &s.Until); err != nil {
			return s, err
		}
		s.TTL = periodOf(ttl)
		return s, nil
	})
}

// periodOf reads a stored TTL back as a period (nil for NULL: expiry disabled). Postgres adds an interval's months,
// then its days, as Period.AddTo adds these, so the two agree on every expiry.
func periodOf(ttl pgtype.Interval) *retention.Period {
	if !ttl.Valid {
		return nil
	}
	return &retention.Period{Months: int64(ttl.Months), Days: int64(ttl.Days)}
}

// hasOverrides reports whether the store of the dataset has ever held a row with its own expiry (row_overrides),
// in which case no event-time bound applies to it.
func hasOverrides(ctx context.Context, q querier, datasetID string, store catalog.Store) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM row_overrides WHERE dataset_id = $1 AND store = $2)`,
		datasetID, string(store)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read overrides of %s: %w", datasetID, err)
	}
	return ok, nil
}

// DeleteBatch implements retention.SweepStore. The batch, the counters and the ledger commit together, in one
// statement.
func (s *SweepStore) DeleteBatch(ctx context.Context, sw retention.Sweep, datasetID, partition string, limit int) (int64, error) {
	table := pgx.Identifier{partition}.Sanitize()
	query := `WITH gone AS (
    DELETE FROM ` + table + ` WHERE ctid = ANY(ARRAY(
        SELECT r.ctid FROM ` + table + ` r WHERE ` + deletableCondition(catalog.Store(sw.Store)) + ` LIMIT $5))
    RETURNING dataset_id, setting_id)` + countRemoved("$6", "$7", "false", "$8")
	var total int64
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		bound, none, err := deletableBound(ctx, tx, sw, datasetID)
		if err != nil || none {
			return err
		}
		rows, err := tx.Query(ctx, query, datasetID, sw.At, sw.Grace.Interval(), bound, limit, partition, sw.RunID, s.db.now())
		if err != nil {
			return err
		}
		var ds string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&ds, &n}, func() error {
			total += n
			return nil
		})
		return err
	})
	if err != nil {
		if isUndefinedTable(err) {
			return 0, nil // dropped since it was listed: nothing left to delete there
		}
		return 0, fmt.Errorf("delete batch of %s in %s: %w", datasetID, partition, err)
	}
	return total, nil
}

// CountDeletable implements retention.SweepStore.
func (s *SweepStore) CountDeletable(ctx context.Context, sw retention.Sweep, datasetID, partition string) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		bound, none, err := deletableBound(ctx, tx, sw, datasetID)
		if err != nil || none {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{partition}.Sanitize()+` r WHERE `+
			deletableCondition(catalog.Store(sw.Store)), datasetID, sw.At, sw.Grace.Interval(), bound).Scan(&n)
	})
	if err != nil && !isUndefinedTable(err) {
		return 0, fmt.Errorf("count deletable rows of %s in %s: %w", datasetID, partition, err)
	}
	return n, nil
}

// BoundaryPartitions implements retention.SweepStore.
func (s *SweepStore) BoundaryPartitions(ctx context.Context, sw retention.Sweep) ([]string, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT p.name FROM row_partitions p
WHERE p.store = $1 AND p.lower_bound <= $2
  AND EXISTS (SELECT 1 FROM row_stats st WHERE st.partition_name = p.name AND st.row_count > 0
              AND ($3::text[] IS NULL OR st.dataset_id = ANY($3::text[])))
ORDER BY p.lower_bound`, sw.Store, sw.At, sweepScope(sw))
	if err != nil {
		return nil, fmt.Errorf("find boundary partitions: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// PartitionSize implements retention.SweepStore.
func (s *SweepStore) PartitionSize(ctx context.Context, partition string) (int64, float64, error) {
	var blocks int64
	var perBlock float64
	err := s.db.Pool.QueryRow(ctx, `
SELECT pg_relation_size(c.oid) / current_setting('block_size')::bigint,
       CASE WHEN c.relpages > 0 AND c.reltuples > 0 THEN c.reltuples / c.relpages ELSE 60 END
FROM pg_class c WHERE c.oid = to_regclass($1)`, pgx.Identifier{partition}.Sanitize()).Scan(&blocks, &perBlock)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil // dropped since it was listed
	}
	if err != nil {
		return 0, 0, fmt.Errorf("size of %s: %w", partition, err)
	}
	return blocks, perBlock, nil
}

// DeleteBlocks implements retention.SweepStore: one batch across the datasets in scope, with each dataset's counters
// and ledger row in the same statement. Rows of deleted datasets ($6) all go; the others by the expiry rule, where
// a row still under the setting it was stored with is judged by its placed expiry alone.
func (s *SweepStore) DeleteBlocks(ctx context.Context, sw retention.Sweep, partition string, from, to int64) (map[string]int64, error) {
	table := pgx.Identifier{partition}.Sanitize()
	query := `WITH gone AS (
    DELETE FROM ` + table + ` r USING ttl_settings h
    WHERE r.ctid >= $1::tid AND r.ctid < $2::tid AND h.id = r.setting_id
      AND ($5::text[] IS NULL OR r.dataset_id = ANY($5::text[]))
      AND (r.dataset_id = ANY($6::text[])
           OR (r.ingested_at + $4::interval <= $3
               AND ` + expiredPredicate(catalog.Store(sw.Store), "$3::timestamptz", "h.effective_until IS NULL AND "+soleSettingSQL("h.ttl", "h.earlier_ttl_until", "h.earlier_expired_through")) + `))
    RETURNING r.dataset_id, r.setting_id)` + countRemoved("$7", "$8", "false", "$9")
	out := map[string]int64{}
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		deleted, err := deletedDatasets(ctx, tx, sw)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, query, fmt.Sprintf("(%d,0)", from), fmt.Sprintf("(%d,0)", to), sw.At, sw.Grace.Interval(),
			sweepScope(sw), deleted, partition, sw.RunID, s.db.now())
		if err != nil {
			return err
		}
		var ds string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&ds, &n}, func() error {
			out[ds] = n
			return nil
		})
		return err
	})
	if err != nil {
		if isUndefinedTable(err) {
			return map[string]int64{}, nil // dropped since it was listed
		}
		return nil, fmt.Errorf("delete blocks %d-%d of %s: %w", from, to, partition, err)
	}
	return out, nil
}

// deletedDatasets lists the datasets deleted by the sweep's time that still have rows in its store.
func deletedDatasets(ctx context.Context, q querier, sw retention.Sweep) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT d.id FROM datasets d WHERE d.deleted_at IS NOT NULL AND d.deleted_at <= $1
  AND EXISTS (SELECT 1 FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
              WHERE st.dataset_id = d.id AND p.store = $2 AND st.row_count > 0)`, sw.At, sw.Store)
	if err != nil {
		return nil, fmt.Errorf("find deleted datasets: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if ids == nil {
		ids = []string{} // an empty array matches none; nil would be NULL
	}
	return ids, err
}

// DatasetsWithLaterWork implements retention.SweepStore: of the datasets, those with rows in partitions placed after
// the sweep's time that may still be deletable (their TTL changed since placement, or their dataset was deleted).
func (s *SweepStore) DatasetsWithLaterWork(ctx context.Context, sw retention.Sweep, datasetIDs []string) ([]string, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT DISTINCT st.dataset_id `+groupJoins+`
WHERE st.dataset_id = ANY($1) AND p.store = $2 AND st.row_count > 0 AND p.lower_bound > $3
  AND (d.deleted_at IS NOT NULL OR h.effective_until IS NOT NULL)`, datasetIDs, sw.Store, sw.At)
	if err != nil {
		return nil, fmt.Errorf("find datasets with work left: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
