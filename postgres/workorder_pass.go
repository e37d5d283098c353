package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// An order of more than fewIdentities identities removes its rows in passes (migration 0023): one transaction per
// block range of a partition, over every dataset of the order, its keys hashed once for the range and the rows read
// in block order. One statement per dataset read each dataset's rows through its index and hashed every key anew:
// 200 of them took 222 s for 100,000 keys on the benchmark's 10M rows (issue #31). Each pass writes what it removed
// from each dataset to the order's ledger (workorder_removals); when every pass is done, the order settles: each
// dataset's part completes from the ledger, with its Delete event.

// passRows is about how many rows a pass reads: a few seconds of work, well inside the job's timeout (about 2.5 s on
// the benchmark's store, idle). Each pass also pays a fixed cost: its keys hashed (about 50 ms for 100,000 keys), a
// ledger row per dataset it removed rows of, its commit; 200,000 rows a pass made 70 passes of the benchmark's 10M
// rows.
const passRows = 500_000

// byPasses reports whether an order may remove its rows in passes rather than dataset by dataset: one of many
// identities (planByPasses decides).
func byPasses(w *catalog.WorkOrder) bool { return w.IdentityCount > fewIdentities }

// passShare is the least share of the rows of the partitions holding an order's datasets' rows that those datasets
// must hold for the order to go by passes. A pass reads every row of its blocks, about 1 µs each; a dataset's own
// statement reads its rows through its index and hashes every key again, about 17 µs a row (issue #31's figures at
// 1M rows: 200 statements of 0.87 s for 50,000 rows and 0.2 s of hashing each). Below a tenth, as for an order of
// one dataset in a store of many, the order reads less dataset by dataset.
const passShare = 0.1

// planByPasses decides, when the order is submitted, whether it goes by passes (workorders.by_passes), and plans
// them if so.
func planByPasses(ctx context.Context, tx pgx.Tx, w *catalog.WorkOrder, rowsPerPass int64) error {
	if !byPasses(w) {
		return nil
	}
	var share float64
	if err := tx.QueryRow(ctx, `
WITH mine AS (SELECT st.partition_name, sum(st.row_count) AS n FROM row_stats st
              JOIN workorder_parts wp ON wp.dataset_id = st.dataset_id AND wp.workorder_id = $1
              WHERE st.row_count > 0 GROUP BY 1)
SELECT coalesce((SELECT sum(n) FROM mine)::float8 / nullif((SELECT sum(st.row_count) FROM row_stats st
       WHERE st.partition_name IN (SELECT partition_name FROM mine)), 0), 1)`, w.ID).Scan(&share); err != nil {
		return fmt.Errorf("size the rows of %s: %w", w.ID, err)
	}
	if share < passShare {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE workorders SET by_passes = true WHERE id = $1`, w.ID); err != nil {
		return fmt.Errorf("plan passes of %s: %w", w.ID, err)
	}
	_, err := planPasses(ctx, tx, w.ID, rowsPerPass)
	return err
}

// planPasses plans the passes of the partitions holding rows of the order's waiting parts that have none yet, and
// returns how many it planned. Each partition is cut into block ranges of about passRows rows; its last range is
// open-ended, so that it reaches the rows appended after the plan. Called when the order is submitted, and again
// when it settles, for the partitions that gained rows of its datasets since.
func planPasses(ctx context.Context, tx pgx.Tx, id string, rowsPerPass int64) (int, error) {
	rows, err := tx.Query(ctx, `
SELECT p.store, p.name, pg_relation_size(c.oid) / current_setting('block_size')::bigint,
       CASE WHEN c.relpages > 0 AND c.reltuples > 0 THEN c.reltuples / c.relpages ELSE 60 END
FROM row_partitions p JOIN pg_class c ON c.oid = to_regclass(quote_ident(p.name))
WHERE EXISTS (SELECT 1 FROM row_stats st JOIN workorder_parts wp ON wp.dataset_id = st.dataset_id
              WHERE wp.workorder_id = $1 AND wp.status = 'waiting' AND st.partition_name = p.name AND st.row_count > 0)
  AND NOT EXISTS (SELECT 1 FROM workorder_passes x WHERE x.workorder_id = $1 AND x.partition_name = p.name)
ORDER BY p.store, p.name`, id)
	if err != nil {
		return 0, fmt.Errorf("size partitions of %s: %w", id, err)
	}
	var stores, names []string
	var froms []int64
	var tos []*int64
	var store, name string
	var blocks int64
	var perBlock float64
	_, err = pgx.ForEachRow(rows, []any{&store, &name, &blocks, &perBlock}, func() error {
		step := max(int64(float64(rowsPerPass)/max(perBlock, 1)), 1)
		for from := int64(0); ; from += step {
			stores, names, froms = append(stores, store), append(names, name), append(froms, from)
			if from+step >= blocks {
				tos = append(tos, nil)
				return nil
			}
			to := from + step
			tos = append(tos, &to)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("size partitions of %s: %w", id, err)
	}
	if len(names) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO workorder_passes (workorder_id, store, partition_name, from_block, to_block)
SELECT $1, s, n, f, t FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS x (s, n, f, t)`,
		id, stores, names, froms, tos); err != nil {
		return 0, fmt.Errorf("plan passes of %s: %w", id, err)
	}
	return len(names), nil
}

// workOrderPass is one pass of an order: a block range [from, to) of a store's partition, to nil for the table's end.
type workOrderPass struct {
	store     catalog.Store
	partition string
	from      int64
	to        *int64
}

// RunWorkOrderPass runs the order's next pass not yet done, in one transaction with its ledger, and reports whether
// there was one. It locks the order's row, then the pass's, so a pass is done once whichever replica runs it and a
// pass whose transaction is lost is run again whole. It takes a removal's locks as a run's walk does (the store's
// parent, the partition, the holds lock shared): the datasets held now are left as they are and named in the pass,
// so that their parts wait; the datasets deleted since validation are left to their parts, which end skipped.
//
// A pass's statement ends before its context does (passBudget): one that ran out of time, on a machine slower than
// its plan allowed for, is rolled back whole and split in two, and each half runs as a pass of its own. So no pass
// is run again and again into the job's timeout, an order stuck behind it.
func (r *WorkOrderRunner) RunWorkOrderPass(ctx context.Context, id string) (ran bool, err error) {
	defer outage(&err)
	ran, failed, err := r.runWorkOrderPass(ctx, id)
	if failed != nil && isQueryCanceled(err) && ctx.Err() == nil {
		return true, r.splitPass(context.WithoutCancel(ctx), id, *failed, err)
	}
	return ran, err
}

// passMargin is what a pass's statement leaves of its context's time, for the split of a pass that ran out of it.
const passMargin = time.Second

// passBudget is how long a pass's statement may take: until a second before ctx's deadline, at least a second; no
// bound without a deadline.
func (r *WorkOrderRunner) passBudget(ctx context.Context) time.Duration {
	if r.passTimeout > 0 {
		return r.passTimeout
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(deadline)-passMargin, time.Second)
}

// splitPass splits pass p of order id, which ran out of time (cause), into two passes of half its blocks each; an
// open-ended pass is split at the partition's end now, its second half open-ended still. A pass of one block cannot
// be split: cause is returned, for the job's next attempt.
func (r *WorkOrderRunner) splitPass(ctx context.Context, id string, p workOrderPass, cause error) error {
	return r.db.inTx(ctx, func(tx pgx.Tx) error {
		to := p.to
		if to == nil {
			var blocks int64
			if err := tx.QueryRow(ctx, `SELECT coalesce(pg_relation_size(to_regclass(quote_ident($1))), 0) / current_setting('block_size')::bigint`,
				p.partition).Scan(&blocks); err != nil {
				return fmt.Errorf("size partition %s: %w", p.partition, err)
			}
			to = &blocks
		}
		if *to-p.from < 2 {
			return fmt.Errorf("pass %s %d of %s, one block, ran out of time: %w", p.partition, p.from, id, cause)
		}
		mid := p.from + (*to-p.from)/2
		tag, err := tx.Exec(ctx, `UPDATE workorder_passes SET to_block = $5
WHERE workorder_id = $1 AND store = $2 AND partition_name = $3 AND from_block = $4 AND done_at IS NULL`,
			id, string(p.store), p.partition, p.from, mid)
		if err != nil || tag.RowsAffected() == 0 {
			return err // done meanwhile, by another replica
		}
		_, err = tx.Exec(ctx, `INSERT INTO workorder_passes (workorder_id, store, partition_name, from_block, to_block)
VALUES ($1, $2, $3, $4, $5)`, id, string(p.store), p.partition, mid, p.to)
		if err != nil {
			return fmt.Errorf("split pass %s %d of %s: %w", p.partition, p.from, id, err)
		}
		return nil
	})
}

// runWorkOrderPass runs the order's next pass, as RunWorkOrderPass says; when the pass's removal fails, it also
// returns that pass, so that one which ran out of time can be split.
func (r *WorkOrderRunner) runWorkOrderPass(ctx context.Context, id string) (ran bool, failed *workOrderPass, err error) {
	now := r.db.now()
	err = r.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := lockWorkOrderIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if !w.Status.Removing() {
			return nil
		}
		var p workOrderPass
		err = tx.QueryRow(ctx, `SELECT store, partition_name, from_block, to_block FROM workorder_passes
WHERE workorder_id = $1 AND done_at IS NULL ORDER BY store, partition_name, from_block LIMIT 1 FOR UPDATE`, id).
			Scan(&p.store, &p.partition, &p.from, &p.to)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock a pass of %s: %w", id, err)
		}
		ran = true
		if budget := r.passBudget(ctx); budget > 0 {
			if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = `+strconv.FormatInt(budget.Milliseconds(), 10)); err != nil {
				return err
			}
		}
		rows, held, err := r.runPass(ctx, tx, w, p, now)
		if err != nil {
			failed = &p
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE workorder_passes SET done_at = $5, rows = $6, held = $7
WHERE workorder_id = $1 AND store = $2 AND partition_name = $3 AND from_block = $4`,
			id, string(p.store), p.partition, p.from, now, rows, held); err != nil {
			return fmt.Errorf("end pass %s %d of %s: %w", p.partition, p.from, id, err)
		}
		if r.beforePassCommit != nil {
			return r.beforePassCommit()
		}
		return nil
	})
	return ran, failed, err
}

// runPass removes the order's rows of pass p and returns how many, and the order's datasets a hold kept out.
func (r *WorkOrderRunner) runPass(ctx context.Context, tx pgx.Tx, w *catalog.WorkOrder, p workOrderPass, now time.Time) (int64, []string, error) {
	if _, err := tx.Exec(ctx, lockRows([]catalog.Store{p.store}, nil)); err != nil {
		return 0, nil, err
	}
	var attached bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM row_partitions WHERE name = $1 AND store = $2)
AND to_regclass(quote_ident($1)) IS NOT NULL`, p.partition, string(p.store)).Scan(&attached); err != nil {
		return 0, nil, fmt.Errorf("find partition %s: %w", p.partition, err)
	}
	if !attached {
		return 0, []string{}, nil // a run dropped it, with its rows
	}
	if _, err := tx.Exec(ctx, lockRows([]catalog.Store{p.store}, []string{p.partition})); err != nil {
		return 0, nil, err
	}
	held, err := heldDatasets(ctx, tx)
	if err != nil {
		return 0, nil, err
	}
	var hasKeys bool
	var datasets, heldHere, listed []string
	if err := tx.QueryRow(ctx, `SELECT cardinality(w.identities) > 0,
  coalesce(ARRAY(SELECT p.dataset_id FROM workorder_parts p JOIN datasets d ON d.id = p.dataset_id
                 WHERE p.workorder_id = w.id AND p.status = 'waiting' AND d.deleted_at IS NULL
                   AND NOT p.dataset_id = ANY($2::text[]) ORDER BY 1), '{}'),
  coalesce(ARRAY(SELECT p.dataset_id FROM workorder_parts p
                 WHERE p.workorder_id = w.id AND p.status = 'waiting' AND p.dataset_id = ANY($2::text[]) ORDER BY 1), '{}'),
  coalesce(ARRAY(SELECT e.dataset_id FROM row_expirations e WHERE e.store = $3 AND e.deletion_manifest), '{}')
FROM workorders w WHERE w.id = $1`, w.ID, held, string(p.store)).Scan(&hasKeys, &datasets, &heldHere, &listed); err != nil {
		return 0, nil, fmt.Errorf("read the datasets of %s: %w", w.ID, err)
	}
	if len(datasets) == 0 || !hasKeys {
		return 0, heldHere, nil
	}
	removed, err := r.deletePass(ctx, tx, w.ID, p, datasets, listed, now)
	if err != nil {
		return 0, nil, err
	}
	total, err := r.recordPass(ctx, tx, w.ID, p, removed, now)
	return total, heldHere, err
}

// passRemoval is what a pass removed from one dataset: how many rows of each setting, the smallest row ids, and the
// keys of the order the rows carried.
type passRemoval struct {
	dataset  string
	settings []int64
	rows     []int64
	rowIDs   []string
	matched  []string
}

// blockRemovalSQL deletes the rows of the datasets $1 carrying any of the keys of order $2 from blocks %[2]s of
// partition %[1]s, and returns, per dataset, the rows of each setting, up to $3 row ids and the keys matched; %[3]s is
// the manifest's listing, or nothing. The keys are read in the statement and hashed once (a hashed SubPlan: an IN
// under an OR is not turned into a join), a row's first identity probed in that hash, the others only for rows of
// several. Sent as a constant array instead, 100,000 keys cost 3 MB each way a pass and about 0.1 s of planning, the
// planner estimating each element. dataset_id is compared as an expression, so that no index on it is read: the
// blocks are read in order (a TID range scan), where an index over every dataset of the order reads them out of order.
// A removed row's matched keys are its identities when it has one (it was removed for it); only a row of several
// probes them again. Matching every removed row's identities against the keys afterwards, as a join, built a second
// hash of the keys a pass: about a fifth of a pass's time at 20,000 keys (810 against 640 ms for 200,000 rows read).
const blockRemovalSQL = `WITH keys AS MATERIALIZED (SELECT unnest(w.identities) AS k FROM workorders w WHERE w.id = $2),
gone AS (
    DELETE FROM %[1]s r
    WHERE %[2]s AND (r.dataset_id || '') = ANY($1::text[]) AND r.identities IS NOT NULL
      AND (r.identities[1] IN (SELECT k FROM keys)
           OR (cardinality(r.identities) > 1
               AND EXISTS (SELECT 1 FROM unnest(r.identities[2:]) u(k) WHERE (u.k IN (SELECT k FROM keys)) IS TRUE)))
    RETURNING r.dataset_id, r.setting_id, r.row_id, r.ts,
        CASE WHEN cardinality(r.identities) = 1 THEN r.identities
             ELSE ARRAY(SELECT u.k FROM unnest(r.identities) u(k) WHERE (u.k IN (SELECT k FROM keys)) IS TRUE) END AS matched)%[3]s,
counts AS (SELECT dataset_id, setting_id, count(*)::bigint AS n FROM gone GROUP BY 1, 2),
ids AS (SELECT dataset_id, (array_agg(DISTINCT row_id COLLATE "C"))[1:$3] AS ids FROM gone GROUP BY 1),
matched AS (SELECT g.dataset_id, array_agg(DISTINCT u.k) AS ks FROM gone g, unnest(g.matched) u(k) GROUP BY 1)
SELECT i.dataset_id, ARRAY(SELECT c.setting_id FROM counts c WHERE c.dataset_id = i.dataset_id ORDER BY 1),
       ARRAY(SELECT c.n FROM counts c WHERE c.dataset_id = i.dataset_id ORDER BY c.setting_id), i.ids, coalesce(m.ks, '{}')
FROM ids i LEFT JOIN matched m ON m.dataset_id = i.dataset_id ORDER BY 1`

// passListSQL lists the rows the pass removed of the datasets $7 in the order $4's manifest of store $5 at $6.
const passListSQL = `,
listed AS (
    INSERT INTO ` + manifestColumns + `
    SELECT '` + removalWorkOrder + `', $4, e.dataset_id, $5, $6, 'work-order', count(*), array_agg(e.row_id), array_agg(e.ts), NULL
    FROM (SELECT g.dataset_id COLLATE "C" AS dataset_id, g.row_id, g.ts, ` + chunkOf + ` AS chunk
          FROM gone g WHERE g.dataset_id = ANY($7::text[])) e` + chunkGroups + `)`

// passSQL is blockRemovalSQL for pass p, listing the rows when list. The block range is written as constants (the
// plan's own numbers), so that the planner sees a TID range.
func passSQL(p workOrderPass, list bool) string {
	blocks := fmt.Sprintf("r.ctid >= '(%d,0)'::tid", p.from)
	if p.to != nil {
		blocks += fmt.Sprintf(" AND r.ctid < '(%d,0)'::tid", *p.to)
	}
	listing := ""
	if list {
		listing = passListSQL
	}
	return fmt.Sprintf(blockRemovalSQL, pgx.Identifier{p.partition}.Sanitize(), blocks, listing)
}

// passArgs are passSQL's arguments.
func passArgs(id string, p workOrderPass, datasets, listed []string, now time.Time) []any {
	args := []any{pgx.QueryExecModeExec, datasets, id, maxAuditedIdentities}
	if len(listed) > 0 {
		args = append(args, id, string(p.store), now, listed)
	}
	return args
}

// blockScanSettings are the pass's settings, for its transaction. JIT would compile the statement's expressions for
// longer than a pass reads. The commit does not wait for the pass's WAL to reach the disk (tens of MB: the pages it
// deletes from are written whole after a checkpoint): a pass lost in a crash is lost whole, its deletion with its
// ledger, its counters and its done_at, so the order runs it again; and the settlement's commit, which completes
// the order and writes its audit events, waits for all of it.
const blockScanSettings = `SET LOCAL jit = off; SET LOCAL synchronous_commit = off`

func (r *WorkOrderRunner) deletePass(ctx context.Context, tx pgx.Tx, id string, p workOrderPass, datasets, listed []string, now time.Time) ([]passRemoval, error) {
	if _, err := tx.Exec(ctx, blockScanSettings); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, passSQL(p, len(listed) > 0), passArgs(id, p, datasets, listed, now)...)
	if err != nil {
		return nil, fmt.Errorf("pass %s %d of %s: %w", p.partition, p.from, id, err)
	}
	removed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (passRemoval, error) {
		var m passRemoval
		err := row.Scan(&m.dataset, &m.settings, &m.rows, &m.rowIDs, &m.matched)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("pass %s %d of %s: %w", p.partition, p.from, id, err)
	}
	return removed, nil
}

// recordPass subtracts what the pass removed from the partition's counters, locked in key order as a run's walk
// does, and writes the order's ledger: per dataset, its rows, up to maxAuditedIdentities row ids and the keyed hashes
// of the keys matched.
func (r *WorkOrderRunner) recordPass(ctx context.Context, tx pgx.Tx, id string, p workOrderPass, removed []passRemoval, now time.Time) (int64, error) {
	var g removedGroups
	var total int64
	l := ledgerRows{rowIDs: []string{}, hashes: []string{}} // a nil slice would be sent as NULL
	for _, m := range removed {
		var n int64
		for i, s := range m.settings {
			g.datasets, g.settings, g.rows = append(g.datasets, m.dataset), append(g.settings, s), append(g.rows, m.rows[i])
			n += m.rows[i]
		}
		total += n
		l.add(m.dataset, n, m.rowIDs, r.hashes(m.matched))
	}
	if len(g.rows) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, lockCountersInOrder, p.partition, g.datasets, g.settings); err != nil {
		return 0, fmt.Errorf("lock counters of %s: %w", p.partition, err)
	}
	if _, err := tx.Exec(ctx, subtractCounters, p.partition, g.datasets, g.settings, g.rows); err != nil {
		return 0, fmt.Errorf("count rows removed from %s: %w", p.partition, err)
	}
	if _, err := tx.Exec(ctx, insertRemovals, id, string(p.store), p.partition, p.from, now, l.datasets, l.rows,
		l.rowIDs, l.idTo, l.hashes, l.hashTo); err != nil {
		return 0, fmt.Errorf("write the ledger of %s: %w", id, err)
	}
	return total, nil
}

// ledgerRows are a pass's rows of its order's ledger, one a dataset, as insertRemovals takes them: each dataset's
// row ids and hashes end, in one flat array each, at its idTo and hashTo (1-based, inclusive).
type ledgerRows struct {
	datasets       []string
	rows           []int64
	rowIDs, hashes []string
	idTo, hashTo   []int32
}

func (l *ledgerRows) add(datasetID string, rows int64, rowIDs, hashes []string) {
	l.datasets, l.rows = append(l.datasets, datasetID), append(l.rows, rows)
	l.rowIDs, l.hashes = append(l.rowIDs, rowIDs...), append(l.hashes, hashes...)
	l.idTo, l.hashTo = append(l.idTo, int32(len(l.rowIDs))), append(l.hashTo, int32(len(l.hashes))) //nolint:gosec // a pass's rows, far below 2^31
}

// subtractCounters updates the counters of partition $1 (subtractAndRecord, without a run's ledger).
const subtractCounters = `
WITH c AS (SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS c (dataset_id, setting_id, n))
UPDATE row_stats st SET row_count = st.row_count - c.n FROM c
WHERE st.partition_name = $1 AND st.dataset_id = ANY($2::text[]) AND st.dataset_id = c.dataset_id AND st.setting_id = c.setting_id`

// ledgerMerge is what a write to an order's ledger does with a row of the same pass and dataset: an org move
// carries the order's ledger to another cell but not its passes (a plan of the source's blocks), and the target's
// own passes of a partition of the same name start at the same blocks. Their rows are other rows (those the
// source's passes removed were not copied), so the counts add; the _ids and hashes are kept as a pass keeps them.
var ledgerMerge = `
ON CONFLICT (workorder_id, dataset_id, store, partition_name, from_block) DO UPDATE
SET rows_deleted = workorder_removals.rows_deleted + EXCLUDED.rows_deleted,
    row_ids = ARRAY(SELECT DISTINCT x COLLATE "C" FROM unnest(workorder_removals.row_ids || EXCLUDED.row_ids) x
                    ORDER BY 1 LIMIT ` + strconv.Itoa(maxAuditedIdentities) + `),
    identity_hashes = ARRAY(SELECT DISTINCT h COLLATE "C" FROM unnest(workorder_removals.identity_hashes || EXCLUDED.identity_hashes) h
                            ORDER BY 1),
    removed_at = EXCLUDED.removed_at`

// insertRemoval writes one row of an order's ledger ($1 to $9, in the table's order), merging as ledgerMerge says.
var insertRemoval = `INSERT INTO workorder_removals (workorder_id, store, partition_name, from_block, dataset_id,
    rows_deleted, row_ids, identity_hashes, removed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)` + ledgerMerge

// insertRemovals writes a pass's rows of the order's ledger in one statement (ledgerRows: the datasets $6, their
// rows $7, their row ids and hashes sliced from $8 and $10 at the ends $9 and $11), merging as ledgerMerge says.
// One statement a dataset took about 0.6 ms each, 14,000 of them for an order on the benchmark's store.
var insertRemovals = `INSERT INTO workorder_removals (workorder_id, store, partition_name, from_block, dataset_id,
    rows_deleted, row_ids, identity_hashes, removed_at)
SELECT $1, $2, $3, $4, x.dataset_id, x.n, ($8::text[])[coalesce(x.id_from, 0) + 1:x.id_to],
       ($10::text[])[coalesce(x.hash_from, 0) + 1:x.hash_to], $5
FROM (SELECT d.dataset_id, d.n, d.id_to, d.hash_to, lag(d.id_to) OVER (ORDER BY d.i) AS id_from,
             lag(d.hash_to) OVER (ORDER BY d.i) AS hash_from
      FROM unnest($6::text[], $7::bigint[], $9::int[], $11::int[]) WITH ORDINALITY AS d (dataset_id, n, id_to, hash_to, i)) x` + ledgerMerge

// hashes are the keyed hashes of keys, sorted.
func (r *WorkOrderRunner) hashes(keys []string) []string {
	out := make([]string, 0, len(keys))
	h := catalog.NewIdentityHasher(r.hashKey)
	for _, k := range keys {
		out = append(out, h.Hash(k))
	}
	slices.Sort(out)
	return out
}

// SettleWorkOrder completes, from the ledger, the parts of an order removed in passes once every pass is done, each
// with its Delete event, in one transaction. It first plans the partitions that gained rows of the order's datasets
// since the plan, and reports more when it did (their passes are to run first). The parts it leaves waiting are
// those of datasets deleted since validation, and of datasets a hold kept out of a pass: RunWorkOrderPart ends them,
// the latter at the first tick after the release, adding the ledger of the passes that did run.
func (r *WorkOrderRunner) SettleWorkOrder(ctx context.Context, id string) (more bool, err error) {
	defer outage(&err)
	now := r.db.now()
	err = r.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := lockWorkOrderIn(ctx, tx, id)
		if err != nil {
			return err
		}
		if !w.Status.Removing() {
			return nil
		}
		var passes bool
		if err := tx.QueryRow(ctx, `SELECT by_passes FROM workorders WHERE id = $1`, id).Scan(&passes); err != nil || !passes {
			return err
		}
		planned, err := planPasses(ctx, tx, id, r.passRows)
		if err != nil || planned > 0 {
			more = planned > 0
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workorder_passes WHERE workorder_id = $1 AND done_at IS NULL)`, id).Scan(&more); err != nil || more {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT p.dataset_id FROM workorder_parts p JOIN datasets d ON d.id = p.dataset_id
WHERE p.workorder_id = $1 AND p.status = 'waiting' AND d.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM workorder_passes x WHERE x.workorder_id = $1 AND p.dataset_id = ANY(x.held))
ORDER BY 1`, id)
		if err != nil {
			return fmt.Errorf("read parts of %s: %w", id, err)
		}
		settled, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read parts of %s: %w", id, err)
		}
		for _, datasetID := range settled {
			ds, err := findDataset(ctx, tx, workOrderCaller(w), datasetID, false)
			if err != nil {
				return err
			}
			if err := r.completePart(ctx, tx, w, ds, now); err != nil {
				return err
			}
		}
		return nil
	})
	return more, err
}

// partLedger is the sum of an order's ledger for one dataset.
type partLedger struct {
	perStore map[catalog.Store]int64
	total    int64
	rowIDs   []string // the smallest, up to maxAuditedIdentities
	hashes   []string // the smallest, up to maxAuditedIdentities
	matched  int64    // the identities matched, each once
}

// readLedgerSQL sums order $1's ledger of dataset $2: its rows per store, its $3 smallest row ids and identity hashes,
// and how many distinct hashes it holds. The hashes are made distinct once, for the list and the count (each a
// sort of every hash of the dataset's ledger, before).
const readLedgerSQL = `
WITH h AS MATERIALIZED (SELECT DISTINCT x COLLATE "C" AS h FROM workorder_removals r, unnest(r.identity_hashes) x
                        WHERE r.workorder_id = $1 AND r.dataset_id = $2)
SELECT coalesce(sum(rows_deleted) FILTER (WHERE store = 'adobe_lakeHouse'), 0)::bigint,
       coalesce(sum(rows_deleted) FILTER (WHERE store = 'adobe_unifiedProfile'), 0)::bigint,
       ARRAY(SELECT DISTINCT x COLLATE "C" FROM workorder_removals r, unnest(r.row_ids) x
             WHERE r.workorder_id = $1 AND r.dataset_id = $2 ORDER BY 1 LIMIT $3),
       ARRAY(SELECT h FROM h ORDER BY 1 LIMIT $3),
       (SELECT count(*) FROM h)
FROM workorder_removals WHERE workorder_id = $1 AND dataset_id = $2`

// readLedger sums the order's ledger of the dataset (readLedgerSQL).
func readLedger(ctx context.Context, tx pgx.Tx, id, datasetID string) (partLedger, error) {
	l := partLedger{perStore: map[catalog.Store]int64{}}
	var lake, profile int64
	err := tx.QueryRow(ctx, readLedgerSQL, id, datasetID, maxAuditedIdentities).Scan(&lake, &profile, &l.rowIDs, &l.hashes, &l.matched)
	if err != nil {
		return l, fmt.Errorf("read the ledger of %s for %s: %w", id, datasetID, err)
	}
	l.perStore[catalog.LakeHouse], l.perStore[catalog.Profile], l.total = lake, profile, lake+profile
	return l, nil
}

// completePart completes the dataset's part of the order from its ledger: its counts, the order's total and the
// dataset's Delete event.
func (r *WorkOrderRunner) completePart(ctx context.Context, tx pgx.Tx, w *catalog.WorkOrder, ds *catalog.Dataset, now time.Time) error {
	l, err := readLedger(ctx, tx, w.ID, ds.ID)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE workorder_parts SET status = 'completed', lake_rows = $3, profile_rows = $4, completed_at = $5
WHERE workorder_id = $1 AND dataset_id = $2`, w.ID, ds.ID, l.perStore[catalog.LakeHouse], l.perStore[catalog.Profile], now); err != nil {
		return fmt.Errorf("complete part %s of %s: %w", ds.ID, w.ID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE workorders SET rows_deleted = rows_deleted + $2, updated_at = $3 WHERE id = $1`, w.ID, l.total, now); err != nil {
		return fmt.Errorf("count rows of %s: %w", w.ID, err)
	}
	stores := map[string]any{}
	for st, n := range l.perStore {
		stores[string(st)] = n
	}
	return writeAuditEvent(ctx, tx, datasetEvent(workOrderCaller(w), ds, audit.ActionDelete, now, map[string]any{
		"workorderId": w.ID, "identities": w.IdentityCount, "identitiesMatched": l.matched, "identityHashes": l.hashes,
		"rowsDeleted": l.total, "stores": stores, "rowIds": l.rowIDs,
	}))
}

// recordPartRemoval writes what a removal of one dataset's rows from one store (deleteRowsByIdentity) took to the
// order's ledger, under the pseudo-partition partRemovalPartition: a part that ends by itself records as a pass does.
func (r *WorkOrderRunner) recordPartRemoval(ctx context.Context, tx pgx.Tx, id, datasetID string, store catalog.Store, res identityRemoval, now time.Time) error {
	if res.n == 0 {
		return nil
	}
	slices.Sort(res.rowIDs)
	if _, err := tx.Exec(ctx, insertRemoval, id, string(store), partRemovalPartition, int64(0), datasetID, res.n,
		slices.Compact(res.rowIDs), r.hashes(res.matched), now); err != nil {
		return fmt.Errorf("write the ledger of %s: %w", id, err)
	}
	return nil
}

// partRemovalPartition is the ledger's partition name of a part's own removal, across the store's partitions.
const partRemovalPartition = "*"
