package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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

const insertDeletion = `
INSERT INTO retention_deletions (run_id, dataset_id, partition_name, rows_deleted, dropped, deleted_at)
VALUES ($1, $2, $3, $4, $5, $6)`

// dropAndRecord drops the partition and records, in the same transaction, the rows each dataset lost with it.
func dropAndRecord(ctx context.Context, tx pgx.Tx, sw retention.Sweep, partition string, counts map[string]int64, now time.Time) error {
	if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{partition}.Sanitize()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM row_partitions WHERE name = $1`, partition); err != nil {
		return err
	}
	for ds, n := range counts {
		if _, err := tx.Exec(ctx, insertDeletion, sw.RunID, ds, partition, n, true, now); err != nil {
			return err
		}
	}
	return nil
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
// every row of a deleted dataset, else expired rows ingested at least the grace ago.
func deletableCondition(store catalog.Store) string {
	return `r.dataset_id = $1 AND (
    EXISTS (SELECT 1 FROM datasets d WHERE d.id = $1 AND d.deleted_at IS NOT NULL AND d.deleted_at <= $2)
    OR (r.ingested_at + $3::interval <= $2 AND ` + expiredPredicate(store, "$2::timestamptz") + `))`
}

// DeleteBatch implements retention.SweepStore. The batch, the counters and the ledger commit together.
func (s *SweepStore) DeleteBatch(ctx context.Context, sw retention.Sweep, datasetID, partition string, limit int) (int64, error) {
	table := pgx.Identifier{partition}.Sanitize()
	query := `DELETE FROM ` + table + ` WHERE ctid = ANY(ARRAY(
    SELECT r.ctid FROM ` + table + ` r WHERE ` + deletableCondition(catalog.Store(sw.Store)) + ` LIMIT $4))
RETURNING setting_id`
	var total int64
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, datasetID, sw.At, sw.Grace.Interval(), limit)
		if err != nil {
			return err
		}
		removed := removedRows{}
		var setting int64
		if _, err := pgx.ForEachRow(rows, []any{&setting}, func() error {
			removed.add(partition, setting)
			total++
			return nil
		}); err != nil {
			return err
		}
		if total == 0 {
			return nil
		}
		if err := removed.apply(ctx, tx, datasetID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insertDeletion, sw.RunID, datasetID, partition, total, false, s.db.now())
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
	err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{partition}.Sanitize()+` r WHERE `+
		deletableCondition(catalog.Store(sw.Store)), datasetID, sw.At, sw.Grace.Interval()).Scan(&n)
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

// DeleteBatchAll implements retention.SweepStore: one batch across the datasets in scope, with each dataset's
// counters and ledger row in the same transaction.
func (s *SweepStore) DeleteBatchAll(ctx context.Context, sw retention.Sweep, partition string, limit int) (map[string]int64, error) {
	table := pgx.Identifier{partition}.Sanitize()
	query := `DELETE FROM ` + table + ` WHERE ctid = ANY(ARRAY(
    SELECT r.ctid FROM ` + table + ` r
    WHERE ($4::text[] IS NULL OR r.dataset_id = ANY($4::text[])) AND (
        EXISTS (SELECT 1 FROM datasets d WHERE d.id = r.dataset_id AND d.deleted_at IS NOT NULL AND d.deleted_at <= $1)
        OR (r.ingested_at + $2::interval <= $1 AND ` + expiredPredicate(catalog.Store(sw.Store), "$1::timestamptz") + `))
    LIMIT $3))
RETURNING dataset_id, setting_id`
	out := map[string]int64{}
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, sw.At, sw.Grace.Interval(), limit, sweepScope(sw))
		if err != nil {
			return err
		}
		removed := map[string]removedRows{}
		var ds string
		var setting int64
		if _, err := pgx.ForEachRow(rows, []any{&ds, &setting}, func() error {
			if removed[ds] == nil {
				removed[ds] = removedRows{}
			}
			removed[ds].add(partition, setting)
			out[ds]++
			return nil
		}); err != nil {
			return err
		}
		now := s.db.now()
		for ds, r := range removed {
			if err := r.apply(ctx, tx, ds); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insertDeletion, sw.RunID, ds, partition, out[ds], false, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if isUndefinedTable(err) {
			return map[string]int64{}, nil // dropped since it was listed
		}
		return nil, fmt.Errorf("delete batch in %s: %w", partition, err)
	}
	return out, nil
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
