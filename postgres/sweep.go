package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/catalog"
)

// This file holds the row store's statements that the sweep (sweeper.go) drives. Every method that removes rows
// records, in the same transaction, how many rows of which dataset it removed, so that counts stay exact across
// interruptions.

// badGroupCondition is true for a group of a partition's rows (one dataset, one placement setting) that cannot go
// with a whole drop of partition p at @at with grace @grace: its dataset is live and either the partition's range has
// not ended (its rows are not all expired), its setting changed before the range ended (a longer TTL may keep some
// rows), it was placed under no TTL, it arrived too recently for the ingestion grace, or it is outside the run's
// scope (@scope, NULL = all). So a partition of any range goes whole when it holds only rows of deleted datasets, or
// none: the empty partitions a deleted dataset or a run's deletes leave do not stay attached. The past partition's
// range ends before any row in it was stored, and every row in it had expired under its setting when it arrived.
const badGroupCondition = `st.row_count > 0 AND NOT (
    ` + groupDeletable + `)
    OR (@scope::text[] IS NOT NULL AND NOT st.dataset_id = ANY(@scope::text[]))`

// undroppable lists, of the partitions whose rows p (row_partitions) meet filter (SQL), those that a drop may not
// take, with the datasets under an active legal hold in @held: a partition that has a bad group (badGroupCondition)
// of a dataset without a hold, or whose held rows, which the drop carries into a fresh partition of the same range
// (carryHeld), are more than the rows that leave with it. Where they are more, copying them would cost more than the
// walk, which deletes the others in place and holds no lock on the store's parent meanwhile. A partition that holds
// only held rows is therefore never taken: there is nothing to remove. A partition with no counters is in no group,
// so a drop may take it. It is one aggregate per partition (GROUP BY … HAVING bool_and) rather than a subquery
// correlated on the partition's name, which a store distributed by dataset cannot run (docs/scaling.md); a NULL
// verdict of a group, which the correlated form did not count as bad, bool_and skips.
func undroppable(filter string) string {
	return `SELECT st.partition_name ` + groupJoins + `
WHERE ` + filter + `
GROUP BY st.partition_name
HAVING NOT (coalesce(bool_and(st.dataset_id = ANY(@held::text[]) OR NOT (` + badGroupCondition + `)), true)
    AND coalesce(sum(st.row_count) FILTER (WHERE st.row_count > 0 AND st.dataset_id = ANY(@held::text[])), 0)
        <= coalesce(sum(st.row_count) FILTER (WHERE st.row_count > 0 AND NOT st.dataset_id = ANY(@held::text[])), 0))`
}

// groupJoins joins each counter group st with its partition p, its dataset d and its placement setting h. The
// setting is joined by its dataset as well as its id (the same row: a group's setting is its dataset's), so that no
// statement joins rows across datasets: on a store distributed by dataset that is a co-located join
// (docs/scaling.md).
const groupJoins = `FROM row_stats st
JOIN row_partitions p ON p.name = st.partition_name
LEFT JOIN datasets d ON d.id = st.dataset_id
LEFT JOIN ttl_settings h ON h.dataset_id = st.dataset_id AND h.id = st.setting_id`

// inRemovalTx runs fn in a transaction that removes rows and commits without waiting for its WAL to reach disk
// (synchronous_commit off): each batch of a run would otherwise wait for a flush of its own, most of it the
// full-page images a walk writes (docs/storage.md, "Figures behind code choices"). A
// crash may lose the last such commits, each whole: its rows come back with their counters and without their ledger
// rows, as if it never ran, and the run's retry removes them again. The run's end, which writes the audit events
// from the ledger, commits synchronously, and a flush carries every earlier commit of the log with it, so no
// removal an audit event reports can be lost.
func (rs *rowStore) inRemovalTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := rs.db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		return fn(tx)
	})
	if err == nil && rs.hooks.afterRemoval != nil {
		rs.hooks.afterRemoval()
	}
	return err
}

// sweepScope is the run's dataset scope as a query parameter: SQL NULL for every dataset (a nil slice would be
// sent as an empty array, which matches none).
func sweepScope(s Sweep) any {
	if s.Datasets == nil {
		return nil
	}
	ids := make([]string, 0, len(s.Datasets))
	for id := range s.Datasets {
		ids = append(ids, id)
	}
	return ids
}

// droppablePartitions lists the partitions all of whose rows are deletable under the sweep. A partition whose range has not ended qualifies only when it
// holds no row of a live dataset (badGroupCondition): for the few hundred of a store at most, that costs an index
// probe of the counters each, which stops at the first live group.
func (rs *rowStore) droppablePartitions(ctx context.Context, sw Sweep) ([]string, error) {
	held, err := activeHoldDatasets(ctx, rs.db.Pool)
	if err != nil {
		return nil, err
	}
	rows, err := rs.db.Pool.Query(ctx, `
SELECT part.name FROM row_partitions part
WHERE part.store = @store AND part.name NOT IN (`+undroppable("p.store = @store")+`)
ORDER BY part.lower_bound`, pgx.StrictNamedArgs{"at": sw.At, "grace": sw.Grace.Interval(), "scope": sweepScope(sw), "store": sw.Store, "held": held})
	if err != nil {
		return nil, fmt.Errorf("find droppable partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find droppable partitions: %w", err)
	}
	return names, nil
}

// dropPartitions removes from the store, in one transaction, those of the partitions all of whose rows are still
// deletable when re-checked under their locks, recording the rows of each dataset in each, and returns those rows
// by partition name; a partition that no longer qualifies is absent. It waits at most lockTimeout for the locks; a
// lock timeout is an error the caller retries. In a dry run it removes nothing and returns what it would have. The
// partitions are locked first and re-checked under their locks,
// since an ingestion may have added rows since they were listed; those that still qualify are detached from the
// store and their rows written to the ledger in the same transaction, which is when their rows leave the store.
// The detached tables wait, listed in detached_partitions, for dropDetached: the store's parent table is locked
// only for the catalog change, and the run does not wait while the file system releases the files.
func (rs *rowStore) dropPartitions(ctx context.Context, sw Sweep, names []string, lockTimeout time.Duration) (map[string]map[string]int64, error) {
	var counts map[string]map[string]int64
	var carried map[string][]string
	err := rs.inRemovalTx(ctx, func(tx pgx.Tx) error {
		if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
			return err
		}
		if !sw.DryRun {
			if err := lockPartitions(ctx, tx, sw.Store, names); err != nil {
				return err
			}
		}
		held, err := heldDatasets(ctx, tx)
		if err != nil {
			return err
		}
		var d droppable
		if d, err = droppableCounts(ctx, tx, sw, names, held); err != nil || sw.DryRun || len(d.counts) == 0 {
			counts = d.counts
			return err
		}
		counts, carried = d.counts, d.carry
		return detachAndRecord(ctx, tx, sw, d, rs.db.now())
	})
	if err != nil {
		return nil, fmt.Errorf("drop partitions from %s: %w", names[0], err)
	}
	if sw.DryRun {
		return counts, nil
	}
	for name := range counts {
		if carried[name] == nil {
			rs.forgetPartition(name) // a carried partition is there again, under its name and range
		}
	}
	return counts, nil
}

// forgetIDFilters deletes, in a transaction of its own, the _id filters of the partitions' datasets that are not
// under a hold, ahead of a drop of the partitions: as a cascade of the drop's own delete of the partitions, under
// the store's parent table held ACCESS EXCLUSIVE, deleting a few thousand filters was most of the time every
// ingestion waited for the drop (774 ms of its 1.2 s, with ingestion beside it; docs/storage.md). A pair left with
// rows and no filter is unfiltered, probed for every _id (idfilter.go), so a drop that does not follow costs probes
// only, never a missed _id. The held datasets keep their filters, as carryHeld keeps them. It commits without
// waiting for its WAL flush, as removals do (inRemovalTx): lost in a crash, the filters are back as they were. It is
// on the run's path: the benchmark's run takes about 0.35 s longer with it, the price of ingestion no longer waiting
// for the deletion (docs/benchmarks.md, goal 3).
func (rs *rowStore) forgetIDFilters(ctx context.Context, names []string) error {
	err := rs.db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		held, err := activeHoldDatasets(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM row_id_filters WHERE partition_name = ANY($1) AND NOT dataset_id = ANY($2)`, names, held)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget the _id filters of %s: %w", names[0], err)
	}
	return nil
}

// dropDetached drops the tables dropPartitions detached at or before detachedBy, and returns how many: this frees
// their files. Their rows left the store, counted, when they were detached. It drops, in one transaction, every table detached_partitions lists
// as detached by then that no other call is dropping, or at most limit of them when limit > 0. A table whose rows
// are still to be listed in a manifest (pending_listings) is left to releaseListed.
func (rs *rowStore) dropDetached(ctx context.Context, detachedBy time.Time, lockTimeout time.Duration, limit int) (int, error) {
	var names []string
	err := rs.db.inTx(ctx, func(tx pgx.Tx) error {
		if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT d.name FROM detached_partitions d WHERE d.detached_at <= $1
			AND NOT EXISTS (SELECT 1 FROM pending_listings p WHERE p.name = d.name)
			ORDER BY d.name LIMIT nullif($2, 0) FOR UPDATE SKIP LOCKED`, detachedBy, limit)
		if err != nil {
			return err
		}
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(names) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+tableList(names)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM detached_partitions WHERE name = ANY($1)`, names)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("drop detached partitions: %w", err)
	}
	return len(names), nil
}

// pendingDetached returns the tables detached at or before detachedBy whose rows are still to be listed in a
// manifest, in the order they were detached.
func (rs *rowStore) pendingDetached(ctx context.Context, detachedBy time.Time) ([]string, error) {
	rows, err := rs.db.Pool.Query(ctx, `SELECT d.name FROM detached_partitions d JOIN pending_listings p ON p.name = d.name
		WHERE d.detached_at <= $1 ORDER BY d.detached_at, d.name`, detachedBy)
	if err != nil {
		return nil, fmt.Errorf("find detached partitions to list: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find detached partitions to list: %w", err)
	}
	return names, nil
}

// releaseListed lists the rows of detached table name that its pending listing holds back (listPending) and drops
// the table, in one transaction, and tells whether it dropped it: not when another release has it. The drop is in
// the listing's transaction, so no table leaves before its rows are listed (the foreign key of pending_listings
// holds this too); a reader listing it meanwhile makes the release wait for its commit, and find it listed.
func (rs *rowStore) releaseListed(ctx context.Context, name string, lockTimeout time.Duration) (bool, error) {
	dropped := false
	err := rs.db.inTx(ctx, func(tx pgx.Tx) error {
		var found string
		err := tx.QueryRow(ctx, `SELECT name FROM detached_partitions WHERE name = $1 FOR UPDATE SKIP LOCKED`, name).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another release has it, or dropped it
		}
		if err != nil {
			return err
		}
		if err := rs.listPending(ctx, tx, name); err != nil {
			return err
		}
		if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM detached_partitions WHERE name = $1`, name)
		dropped = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("list and drop detached partition %s: %w", name, err)
	}
	return dropped, nil
}

// lockPartitions takes the store's parent table, as the detach will, and then the partitions, in the lock order
// (partition.go), skipping those another run has dropped since they were listed. One dropped between the listing
// here and the lock fails the transaction, and the caller's retry lists again.
func lockPartitions(ctx context.Context, tx pgx.Tx, store catalog.Store, names []string) error {
	if _, err := tx.Exec(ctx, `LOCK TABLE ONLY `+storeTable(store)+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT name FROM row_partitions WHERE name = ANY($1) ORDER BY name`, names)
	if err != nil {
		return err
	}
	present, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(present) == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `LOCK TABLE `+tableList(present)+` IN ACCESS EXCLUSIVE MODE`)
	return err
}

// droppable is what a batch of drops takes: for each partition that still qualifies, the rows of each dataset
// without a hold that leave with it (counts; a partition whose rows have all gone is there with none), and the held
// datasets whose rows stay (carry), with how many rows those are in all (carried).
type droppable struct {
	counts  map[string]map[string]int64
	carry   map[string][]string
	carried map[string]int64
	// listed names, by partition, the datasets whose rows leave with it and whose store keeps a deletion manifest,
	// and deleted those of them that were deleted (manifest.go).
	listed, deleted map[string][]string
}

// droppableCounts returns what of the partitions still qualifies for a drop, from the counters, with the datasets
// under a hold (held) carried rather than counted. Each partition that qualifies comes as a row of its own, and its
// counters as rows beside it (a union rather than an outer join of row_partitions with row_stats, which a store
// distributed by dataset runs only with row_partitions inside: docs/scaling.md).
func droppableCounts(ctx context.Context, tx pgx.Tx, sw Sweep, names, held []string) (droppable, error) {
	d := droppable{counts: map[string]map[string]int64{}, carry: map[string][]string{}, carried: map[string]int64{},
		listed: map[string][]string{}, deleted: map[string][]string{}}
	rows, err := tx.Query(ctx, `
WITH ok AS (SELECT part.name FROM row_partitions part
            WHERE part.name = ANY(@names::text[]) AND part.name NOT IN (`+undroppable("p.name = ANY(@names::text[])")+`))
SELECT name, NULL::text, NULL::bigint, false, false, false FROM ok
UNION ALL
SELECT st.partition_name, st.dataset_id, sum(st.row_count)::bigint, st.dataset_id = ANY(@held::text[]),
       EXISTS (SELECT 1 FROM row_expirations e WHERE e.dataset_id = st.dataset_id AND e.store = @store AND e.deletion_manifest),
       EXISTS (SELECT 1 FROM datasets d WHERE d.id = st.dataset_id AND d.deleted_at IS NOT NULL AND d.deleted_at <= @at)
FROM row_stats st WHERE st.partition_name IN (SELECT name FROM ok) AND st.row_count > 0
GROUP BY st.partition_name, st.dataset_id`,
		pgx.StrictNamedArgs{"at": sw.At, "grace": sw.Grace.Interval(), "scope": sweepScope(sw), "names": names, "held": held,
			"store": string(sw.Store)})
	if err != nil {
		return d, err
	}
	var part string
	var ds *string
	var n *int64
	var isHeld, listed, deleted bool
	_, err = pgx.ForEachRow(rows, []any{&part, &ds, &n, &isHeld, &listed, &deleted}, func() error {
		if d.counts[part] == nil {
			d.counts[part] = map[string]int64{}
		}
		switch {
		case ds == nil || n == nil:
		case isHeld:
			d.carry[part] = append(d.carry[part], *ds)
			d.carried[part] += *n
		default:
			d.counts[part][*ds] = *n
			d.noteListed(part, *ds, listed, deleted)
		}
		return nil
	})
	return d, err
}

// recordDeletions writes the ledger rows of one batch of drops, one per partition and dataset, in one statement.
const recordDeletions = `
INSERT INTO retention_deletions (run_id, dataset_id, partition_name, rows_deleted, dropped, deleted_at)
SELECT $1, d.dataset_id, d.partition_name, d.n, $2, $3 FROM unnest($4::text[], $5::text[], $6::bigint[]) AS d (partition_name, dataset_id, n)`

// detachAndRecord detaches the partitions from their store, renames them out of the way of a partition that a late
// event may need for the same range, lists them for dropDetached, and records the rows each dataset lost with them,
// and, where datasets keep a deletion manifest, which of the detached table's rows the release is to list
// (recordPending).
// A detached table is named after its object id, which no other table has: a partition made again for the same
// range can be detached again before the first one's table is released. The held datasets' rows of a partition are
// carried into a fresh partition of its name and range first (carryHeld), with their counters, which stay as they
// are: only the others' rows leave.
func detachAndRecord(ctx context.Context, tx pgx.Tx, sw Sweep, d droppable, now time.Time) error {
	parent := pgx.Identifier{storeTable(sw.Store)}.Sanitize()
	names := slices.Collect(maps.Keys(d.counts))
	oids, err := tableOIDs(ctx, tx, names)
	if err != nil {
		return err
	}
	var parts, ids, gone []string
	var ns []int64
	for _, name := range names {
		for ds, n := range d.counts[name] {
			parts, ids, ns = append(parts, name), append(ids, ds), append(ns, n)
		}
		detached := fmt.Sprintf("%s_gone%d", name, oids[name])
		if err := detachPartition(ctx, tx, parent, name, detached, d.carry[name], d.carried[name]); err != nil {
			return err
		}
		if d.carry[name] == nil {
			gone = append(gone, name)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO detached_partitions (name, detached_at) VALUES ($1, $2)`, detached, now); err != nil {
			return err
		}
		if listed := d.listed[name]; len(listed) > 0 {
			if err := recordPending(ctx, tx, sw, detached, listed, d.deleted[name], now); err != nil {
				return err
			}
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM row_partitions WHERE name = ANY($1)`, gone); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, recordDeletions, sw.RunID, true, now, parts, ids, ns)
	return err
}

// detachPartition detaches partition name from parent and renames it detached; with held datasets (carry), it then
// carries their rows into a fresh partition of the same name and range (carryHeld).
func detachPartition(ctx context.Context, tx pgx.Tx, parent, name, detached string, carry []string, carried int64) error {
	var bound string
	if carry != nil {
		if err := tx.QueryRow(ctx, `SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_class c WHERE c.oid = to_regclass($1)`,
			pgx.Identifier{name}.Sanitize()).Scan(&bound); err != nil {
			return fmt.Errorf("read the bounds of %s: %w", name, err)
		}
	}
	for _, stmt := range []string{
		`ALTER TABLE ` + parent + ` DETACH PARTITION ` + pgx.Identifier{name}.Sanitize(),
		`ALTER TABLE ` + pgx.Identifier{name}.Sanitize() + ` RENAME TO ` + pgx.Identifier{detached}.Sanitize(),
	} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	if carry == nil {
		return nil
	}
	return carryHeld(ctx, tx, parent, name, detached, bound, carry, carried)
}

// carryHeld makes partition name again, with the range bound it had, and copies into it the rows of the held
// datasets from its detached table: the copy costs the held rows only, and every other row still leaves with the
// detached table, by a drop. The held rows keep their placed expiry, setting and counters (the counters are per
// partition name, and the others' are deleted), so once the holds are released the next run drops or walks them
// exactly as if there had been no hold. It all happens in the drop's transaction: a crash before its commit leaves
// the partition attached as it was, and none of its rows lost. A copy that does not find the rows the counters
// count fails the transaction: the partition then stays, to be walked.
func carryHeld(ctx context.Context, tx pgx.Tx, parent, name, detached, bound string, held []string, want int64) error {
	if _, err := tx.Exec(ctx, `CREATE TABLE `+pgx.Identifier{name}.Sanitize()+` PARTITION OF `+parent+` `+bound); err != nil {
		return fmt.Errorf("make %s again: %w", name, err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{name}.Sanitize()+` SELECT * FROM `+
		pgx.Identifier{detached}.Sanitize()+` WHERE dataset_id = ANY($1)`, held)
	if err != nil {
		return fmt.Errorf("carry the held rows of %s: %w", name, err)
	}
	if tag.RowsAffected() != want {
		return fmt.Errorf("carry the held rows of %s: copied %d rows, the counters count %d", name, tag.RowsAffected(), want)
	}
	if _, err = tx.Exec(ctx, `DELETE FROM row_stats WHERE partition_name = $1 AND NOT dataset_id = ANY($2)`, name, held); err != nil {
		return err
	}
	// The others' _ids left with the detached table; a filter of them would only cost probes.
	_, err = tx.Exec(ctx, `DELETE FROM row_id_filters WHERE partition_name = $1 AND NOT dataset_id = ANY($2)`, name, held)
	return err
}

// tableOIDs returns the object ids of the tables, by name.
func tableOIDs(ctx context.Context, tx pgx.Tx, names []string) (map[string]uint32, error) {
	rows, err := tx.Query(ctx, `SELECT n, to_regclass(quote_ident(n))::oid FROM unnest($1::text[]) n`, names)
	if err != nil {
		return nil, err
	}
	oids := map[string]uint32{}
	var name string
	var oid uint32
	_, err = pgx.ForEachRow(rows, []any{&name, &oid}, func() error {
		oids[name] = oid
		return nil
	})
	return oids, err
}

// datasetPartitions lists the partitions holding rows of the dataset that may be
// deletable. A partition placed after the evaluation time can only hold such rows if the TTL they were placed under
// has changed since (a shorter TTL, or one set where there was none), or if an earlier setting expired rows
// imported with an older _ingestedAt (laterGroupMayExpire).
func (rs *rowStore) datasetPartitions(ctx context.Context, sw Sweep, datasetID string) ([]string, error) {
	rows, err := rs.db.Pool.Query(ctx, `
SELECT st.partition_name `+groupJoins+`
WHERE st.dataset_id = @dataset AND p.store = @store AND st.row_count > 0
  AND (p.lower_bound <= @at OR `+laterGroupMayExpire+`)
  AND NOT st.partition_name = ANY(@walked::text[])
GROUP BY st.partition_name, p.lower_bound ORDER BY p.lower_bound`,
		pgx.StrictNamedArgs{"dataset": datasetID, "store": sw.Store, "at": sw.At, "walked": walked(sw)})
	if err != nil {
		return nil, fmt.Errorf("find partitions of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// batchKey is where a row-phase batch stopped in the dataset's index order (ts, row_id): the next batch of the
// partition starts after it. At the sweep's fixed time a row the scan passed over was judged and stays judged, so
// no batch needs to read it again.
type batchKey struct {
	TS    time.Time
	RowID string
}

// deleteBatchSQL is one row-phase batch of partition %[1]s: it picks, in the dataset's index order from after the
// previous batch's key (%[3]s), at most @limit rows that the condition %[2]s selects, deletes them, and answers the
// countGone groups beside the key of the last row picked and how many were picked. A LIMIT batch without the key
// would walk again, from the start of the range, over every index entry the batches before it deleted (dead until
// VACUUM) or passed over. The outer dataset_id test is what the pick already guarantees on one server; it keeps the
// statement confined to the dataset where ctids are per shard (docs/scaling.md). A batch of a dataset whose store
// keeps a deletion manifest returns more of each row (%[4]s) and lists them (%[5]s, listGone).
const deleteBatchSQL = `WITH pick AS MATERIALIZED (
    SELECT r.ctid, r.ts, r.row_id FROM %[1]s r WHERE %[2]s%[3]s ORDER BY r.ts, r.row_id LIMIT @limit),
gone AS (
    DELETE FROM %[1]s WHERE dataset_id = @dataset AND ctid = ANY(ARRAY(SELECT ctid FROM pick))
    RETURNING dataset_id, setting_id%[4]s)%[5]s,
groups AS (SELECT dataset_id, setting_id, count(*)::bigint AS n FROM gone GROUP BY dataset_id, setting_id)
SELECT g.dataset_id, g.setting_id, g.n, l.ts, l.row_id, l.picked
FROM (SELECT p.ts, p.row_id, count(*) OVER ()::bigint AS picked FROM pick p ORDER BY p.ts DESC, p.row_id DESC LIMIT 1) l
LEFT JOIN groups g ON true`

// afterKey is deleteBatchSQL's start condition for a batch after the key @after_ts, @after_id, as the row
// comparison the index (dataset_id, ts, row_id) scans from.
const afterKey = ` AND (r.ts, r.row_id) > (@after_ts::timestamptz, @after_id::text)`

// deleteBatch deletes at most limit deletable rows of the dataset from the partition, in its index order from after
// key (nil: from the start), and returns how many it deleted and where the next batch starts; a nil next key means
// the batch picked fewer than limit rows: the partition holds no more. The batch, the counters and the ledger commit
// together, in one transaction (recordRemoved).
func (rs *rowStore) deleteBatch(ctx context.Context, sw Sweep, datasetID, partition string, limit int, key *batchKey) (int64, *batchKey, error) {
	table := pgx.Identifier{partition}.Sanitize()
	var total int64
	var next *batchKey
	err := rs.inRemovalTx(ctx, func(tx pgx.Tx) error {
		total, next = 0, nil
		if held, err := heldDataset(ctx, tx, datasetID); err != nil || held {
			return err
		}
		rule, err := deletableRule(ctx, tx, sw.Store, sw.At, sw.Grace, datasetID)
		if err != nil || rule.none {
			return err
		}
		args := rule.args
		args["limit"] = limit
		start := ""
		if key != nil {
			start = afterKey
			args["after_ts"], args["after_id"] = key.TS, key.RowID
		}
		returning, listed := "", ""
		if rule.listed {
			returning, listed = goneListedColumns, listGoneOne
			listArgs(args, removal{removalRun, sw.RunID}, sw.Store, []string{datasetID}, deletedIf(rule.deleted, datasetID), rs.db.now())
		}
		query := fmt.Sprintf(deleteBatchSQL, table, rule.cond, start, returning, listed)
		g, last, picked, err := collectBatch(tx.Query(ctx, query, pgx.StrictNamedArgs(args)))
		if err != nil {
			return err
		}
		for _, n := range g.rows {
			total += n
		}
		if picked == int64(limit) {
			next = &last
		}
		return recordRemoved(ctx, tx, partition, sw.RunID, rs.db.now(), g)
	})
	if err != nil {
		if isUndefinedTable(err) {
			return 0, nil, nil // dropped since it was listed: nothing left to delete there
		}
		return 0, nil, fmt.Errorf("delete batch of %s in %s: %w", datasetID, partition, err)
	}
	return total, next, nil
}

// collectBatch reads what a deleteBatchSQL statement answers: the groups it deleted, the key of the last row it
// picked and how many it picked (no row at all when it picked none).
func collectBatch(rows pgx.Rows, err error) (removedGroups, batchKey, int64, error) {
	var g removedGroups
	var last batchKey
	var picked int64
	if err != nil {
		return g, last, 0, err
	}
	var ds *string
	var setting, n *int64
	_, err = pgx.ForEachRow(rows, []any{&ds, &setting, &n, &last.TS, &last.RowID, &picked}, func() error {
		if ds != nil {
			g.datasets, g.settings, g.rows = append(g.datasets, *ds), append(g.settings, *setting), append(g.rows, *n)
		}
		return nil
	})
	return g, last, picked, err
}

// countDeletable counts the dataset's deletable rows in the partition, for dry runs.
func (rs *rowStore) countDeletable(ctx context.Context, sw Sweep, datasetID, partition string) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, rs.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if held, err := datasetHeld(ctx, tx, datasetID); err != nil || held {
			return err // a run deletes nothing of a held dataset, so its dry run counts nothing
		}
		cond, args, none, err := deletableRows(ctx, tx, sw.Store, sw.At, sw.Grace, datasetID)
		if err != nil || none {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{partition}.Sanitize()+` r WHERE `+cond, pgx.StrictNamedArgs(args)).Scan(&n)
	})
	if err != nil && !isUndefinedTable(err) {
		return 0, fmt.Errorf("count deletable rows of %s in %s: %w", datasetID, partition, err)
	}
	return n, nil
}

// boundaryPartitions lists the partitions placed at or before the sweep's time that still hold rows of the
// datasets in scope: where the rows no drop took (the current month, and groups a drop had to leave) are. Rows of
// held datasets do not count as the scope's: the walk leaves them, so a partition of held rows alone is not walked.
func (rs *rowStore) boundaryPartitions(ctx context.Context, sw Sweep) ([]placedPartition, error) {
	held, err := activeHoldDatasets(ctx, rs.db.Pool)
	if err != nil {
		return nil, err
	}
	rows, err := rs.db.Pool.Query(ctx, `
SELECT p.name, sum(st.row_count)::bigint AS rows,
       coalesce(sum(st.row_count) FILTER (WHERE ($3::text[] IS NULL OR st.dataset_id = ANY($3::text[]))
                                          AND NOT st.dataset_id = ANY($4::text[])), 0)::bigint AS scope_rows
FROM row_partitions p JOIN row_stats st ON st.partition_name = p.name AND st.row_count > 0
WHERE p.store = $1 AND p.lower_bound <= $2
GROUP BY p.name, p.lower_bound
HAVING sum(st.row_count) FILTER (WHERE ($3::text[] IS NULL OR st.dataset_id = ANY($3::text[]))
                                 AND NOT st.dataset_id = ANY($4::text[])) > 0
ORDER BY p.lower_bound`, sw.Store, sw.At, sweepScope(sw), held)
	if err != nil {
		return nil, fmt.Errorf("find boundary partitions: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[placedPartition])
}

// partitionSize returns how many blocks the partition has now and about how many rows a block holds, so that a
// boundary walk can cut it into block ranges of about BatchSize rows.
func (rs *rowStore) partitionSize(ctx context.Context, partition string) (int64, float64, error) {
	var blocks int64
	var perBlock float64
	err := rs.db.Pool.QueryRow(ctx, `
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

// deleteBlocks deletes the deletable rows of any dataset in scope stored in blocks [from, to) of the partition, and
// returns how many of each dataset: one batch across the datasets in scope, with each dataset's counters
// and ledger row in the same transaction. The rows of datasets under a legal hold (@held) all stay. Rows of deleted
// datasets (@deleted) all go; the others by the expiry rule, where a row still under the setting it was stored with
// is judged by its placed expiry alone.
//
// Several workers may walk one partition; recordRemoved keeps their counter updates from deadlocking. Each row's
// setting is joined by its dataset as well as its id, so that the statement joins no rows across datasets
// (groupJoins). It stays one DELETE that judges the rows it scans: the rule read in a SELECT CTE first and the rows
// then deleted by (dataset_id, ctid), a form a store distributed by dataset would accept, fetched every row twice
// and took half again the buffers and up to twice the time on one server (docs/scaling.md), and on such a store the
// walk runs on each shard's own table anyway, where this statement runs as it is.
func (rs *rowStore) deleteBlocks(ctx context.Context, sw Sweep, partition string, from, to int64) (map[string]int64, error) {
	table := pgx.Identifier{partition}.Sanitize()
	query := `WITH gone AS (
    DELETE FROM ` + table + ` r USING ttl_settings h
    WHERE r.ctid >= @from::tid AND r.ctid < @to::tid AND h.dataset_id = r.dataset_id AND h.id = r.setting_id
      AND (@scope::text[] IS NULL OR r.dataset_id = ANY(@scope::text[])) AND NOT r.dataset_id = ANY(@held::text[])
      AND (r.dataset_id = ANY(@deleted::text[])
           OR (` + pastGrace + `
               AND ` + expiredUnderRowSetting(sw.Store) + `))
    RETURNING r.dataset_id, r.setting_id%s)%s` + countGone
	out := map[string]int64{}
	err := rs.inRemovalTx(ctx, func(tx pgx.Tx) error {
		held, err := heldDatasets(ctx, tx)
		if err != nil {
			return err
		}
		deleted, listed, err := walkDatasets(ctx, tx, sw)
		if err != nil {
			return err
		}
		args := pgx.StrictNamedArgs{"from": fmt.Sprintf("(%d,0)", from),
			"to": fmt.Sprintf("(%d,0)", to), "at": sw.At, "grace": sw.Grace.Interval(), "scope": sweepScope(sw),
			"deleted": deleted, "held": held}
		returning, list := "", ""
		if len(listed) > 0 {
			returning, list = goneListedColumns, listGone
			listArgs(pgx.NamedArgs(args), removal{removalRun, sw.RunID}, sw.Store, listed, deleted, rs.db.now())
		}
		g, err := collectRemoved(tx.Query(ctx, fmt.Sprintf(query, returning, list), args))
		if err != nil {
			return err
		}
		for i, ds := range g.datasets {
			out[ds] += g.rows[i]
		}
		return recordRemoved(ctx, tx, partition, sw.RunID, rs.db.now(), g)
	})
	if err != nil {
		if isUndefinedTable(err) {
			return map[string]int64{}, nil // dropped since it was listed
		}
		return nil, fmt.Errorf("delete blocks %d-%d of %s: %w", from, to, partition, err)
	}
	return out, nil
}

// countGone ends a statement whose CTE "gone" deleted rows (dataset_id, setting_id): it returns how many of each
// counter group went, for collectRemoved.
const countGone = `
SELECT dataset_id, setting_id, count(*)::bigint FROM gone GROUP BY dataset_id, setting_id`

// removedGroups is what one delete removed from a partition, by counter group (dataset and setting), as parallel
// slices for unnest.
type removedGroups struct {
	datasets []string
	settings []int64
	rows     []int64
}

// collectRemoved reads the groups a countGone statement returns.
func collectRemoved(rows pgx.Rows, err error) (removedGroups, error) {
	var g removedGroups
	if err != nil {
		return g, err
	}
	var ds string
	var setting, n int64
	_, err = pgx.ForEachRow(rows, []any{&ds, &setting, &n}, func() error {
		g.datasets, g.settings, g.rows = append(g.datasets, ds), append(g.settings, setting), append(g.rows, n)
		return nil
	})
	return g, err
}

// lockCountersInOrder locks the counters of the groups in key order, which every walker of the partition uses. The
// datasets' own array ($2) restricts the counters read as well as the join does, so that a batch of the row phase,
// whose groups are all of its dataset, reads the counters of that dataset alone (docs/scaling.md).
const lockCountersInOrder = `
SELECT 1 FROM row_stats st JOIN unnest($2::text[], $3::bigint[]) AS c (dataset_id, setting_id)
    ON st.dataset_id = c.dataset_id AND st.setting_id = c.setting_id
WHERE st.partition_name = $1 AND st.dataset_id = ANY($2::text[]) ORDER BY st.dataset_id, st.setting_id FOR UPDATE OF st`

// subtractAndRecord updates the counters of partition $1 and writes one ledger row per dataset.
const subtractAndRecord = `
WITH c AS (SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS c (dataset_id, setting_id, n)),
stats AS (
    UPDATE row_stats st SET row_count = st.row_count - c.n FROM c
    WHERE st.partition_name = $1 AND st.dataset_id = ANY($2::text[]) AND st.dataset_id = c.dataset_id
      AND st.setting_id = c.setting_id)
INSERT INTO retention_deletions (run_id, dataset_id, partition_name, rows_deleted, dropped, deleted_at)
SELECT $5, dataset_id, $1, sum(n), false, $6 FROM c GROUP BY dataset_id`

// recordRemoved subtracts what a delete removed from the partition's counters and writes the ledger, in the
// delete's transaction. The counters are locked first, in key order, by a statement of their own: several workers
// may walk one partition, and in the delete's statement the order of their locks would follow the plan, so two
// ranges holding rows of the same datasets could take them in opposite orders and deadlock.
func recordRemoved(ctx context.Context, tx pgx.Tx, partition, runID string, now time.Time, g removedGroups) error {
	if len(g.rows) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, lockCountersInOrder, partition, g.datasets, g.settings); err != nil {
		return fmt.Errorf("lock counters of %s: %w", partition, err)
	}
	if _, err := tx.Exec(ctx, subtractAndRecord, partition, g.datasets, g.settings, g.rows, runID, now); err != nil {
		return fmt.Errorf("count rows removed from %s: %w", partition, err)
	}
	return nil
}

// walkDatasets lists the datasets deleted by the sweep's time that still have rows in its store, and, in the same
// statement, the datasets whose store keeps a deletion manifest (listed), whose rows a walk lists as it removes
// them (manifest.go).
func walkDatasets(ctx context.Context, q querier, sw Sweep) (deleted, listed []string, err error) {
	err = q.QueryRow(ctx, `SELECT
  coalesce(ARRAY(SELECT d.id FROM datasets d WHERE d.deleted_at IS NOT NULL AND d.deleted_at <= $1
  AND EXISTS (SELECT 1 FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
              WHERE st.dataset_id = d.id AND p.store = $2 AND st.row_count > 0)), '{}'),
  coalesce(ARRAY(SELECT e.dataset_id FROM row_expirations e WHERE e.store = $2 AND e.deletion_manifest), '{}')`,
		sw.At, sw.Store).Scan(&deleted, &listed)
	if err != nil {
		return nil, nil, fmt.Errorf("find deleted datasets: %w", err)
	}
	if deleted == nil {
		deleted = []string{} // an empty array matches none; nil would be NULL
	}
	return deleted, listed, nil
}

// datasetsWithLaterWork returns, of the datasets, those with rows in partitions placed at or
// before the sweep's time that its walk left, or in later partitions that may still be deletable (their TTL changed
// since placement, their dataset was deleted, or they hold imports an earlier setting expired: laterGroupMayExpire).
// A dataset under a legal hold has none: a run removes nothing of it, and its part ends as held.
func (rs *rowStore) datasetsWithLaterWork(ctx context.Context, sw Sweep, datasetIDs []string) ([]string, error) {
	rows, err := rs.db.Pool.Query(ctx, `
SELECT DISTINCT st.dataset_id `+groupJoins+`
WHERE st.dataset_id = ANY(@datasets) AND p.store = @store AND st.row_count > 0
  AND NOT EXISTS (SELECT 1 FROM dataset_holds k WHERE k.dataset_id = st.dataset_id AND k.released_at IS NULL)
  AND (p.lower_bound > @at AND `+laterGroupMayExpire+`
       OR p.lower_bound <= @at AND NOT st.partition_name = ANY(@walked::text[]))`,
		pgx.StrictNamedArgs{"datasets": datasetIDs, "store": sw.Store, "at": sw.At, "walked": walked(sw)})
	if err != nil {
		return nil, fmt.Errorf("find datasets with work left: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// walked is the sweep's walked partitions as a query parameter (an empty array when none).
func walked(sw Sweep) []string {
	names := make([]string, 0, len(sw.Walked))
	for name := range sw.Walked {
		names = append(names, name)
	}
	return names
}
