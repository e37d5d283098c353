package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// chunkKey names the chunk of an org's rows a row is in: the rows of one dataset in one partition whose _id falls
// in one of 64 buckets of its hash. Small enough that a catch-up copies again little more than what changed, and
// named the same on both cells (the partitions have the same names there).
const chunkKey = `t.tableoid::regclass::text || '/' || t.dataset_id || '/' || (hashtext(t.row_id) & 63)::text`

// catchUp brings the target's copy, made from a snapshot before the fence, to the source as fenced, in one
// transaction of the target that also moves its row of the move to copied:
//   - every table of the registry but the stores' rows and the audit log is copied again whole (they are small);
//   - of the stores' rows, only the chunks that changed since the snapshot (catchUpRows), each compared by
//     checksum on both sides after;
//   - the audit log gets the events appended since, the source's chain head and anchor, and loses what the
//     source's audit retention removed since (catchUpAudit).
//
// The source is read in one repeatable-read snapshot; fenced, it does not change (no write of the org passes the
// fence, no run lists it). A catch-up killed halfway leaves the copy as it was, and runs again whole.
func (m *OrgMove) catchUp(ctx context.Context, st *moveState, rep *MoveReport) error {
	if err := m.createPartitions(ctx); err != nil { // partitions the org's rows entered since the copy
		return err
	}
	mc, err := m.targetCounts(ctx, st.id)
	if err != nil {
		return err
	}
	if err := flushOrgPending(ctx, m.Source, m.Org); err != nil { // drops since the copy: the manifests whole
		return err
	}
	src, err := m.Source.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = src.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := src.Exec(ctx, `SET LOCAL TIME ZONE 'UTC'`); err != nil {
		return err
	}
	mc.CaughtUp, mc.Dropped = rep.CaughtUp, map[string]int64{}
	return m.Target.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL TIME ZONE 'UTC'`); err != nil {
			return err
		}
		ids, err := settingMap(ctx, src, tx, m.Org, settingMapOf(mc.Settings))
		if err != nil {
			return err
		}
		remap := remapSQL(ids)
		if err := syncTables(ctx, src, tx, m.Org, remap, rep); err != nil {
			return err
		}
		for _, ot := range orgTables {
			if ot.chunked {
				if err := catchUpRows(ctx, src, tx, ot, m.Org, remap, mc); err != nil {
					return fmt.Errorf("catch up %s: %w", ot.name, err)
				}
			}
		}
		if err := catchUpAudit(ctx, src, tx, m.Org, rep); err != nil {
			return err
		}
		rep.ChunksChanged = mc.ChunksChanged
		mc.Settings = settingPairs(ids)
		if err := saveCounts(ctx, tx, st.id, mc); err != nil {
			return err
		}
		return setStepIn(ctx, tx, st.id, "target", stepCopied, m.Target.now())
	})
}

// syncTables replaces the target's rows of every small table of the registry with the source's: removed children
// first, then copied parents first. Of a table shared with other orgs (scheduled runs) only the org's own rows are
// replaced; the shared ones the org's runs refer to ended before the copy (waitRuns) and no longer change.
func syncTables(ctx context.Context, src, tx pgx.Tx, org, remap string, rep *MoveReport) error {
	small := func(ot orgTable) bool { return !ot.chunked && !ot.audit }
	for i := len(orgTables) - 1; i >= 0; i-- {
		if ot := orgTables[i]; small(ot) {
			if _, err := tx.Exec(ctx, `DELETE FROM `+pgx.Identifier{ot.name}.Sanitize()+` t WHERE `+ot.removeWhere(org)); err != nil {
				return fmt.Errorf("clear %s on the target: %w", ot.name, err)
			}
		}
	}
	for _, ot := range orgTables {
		if small(ot) {
			n, err := copyTable(ctx, src, tx, ot, org, remap, "")
			if err != nil {
				return fmt.Errorf("copy %s again: %w", ot.name, err)
			}
			rep.CaughtUp[ot.name] = n
		}
	}
	return nil
}

// chunkState is what a side holds of a chunk: its rows, and (on the source) whether any of them was written after
// the copy's snapshot.
type chunkState struct {
	rows  int64
	fresh bool
}

// catchUpRows finds the chunks of a store's rows that changed since the copy's snapshot, replaces the target's
// rows of those chunks with the source's, and compares their checksums on both sides.
//
// Why the chunks it leaves are equal on both sides: a chunk is left when none of its rows on the source has an
// xmin at or after the snapshot's watermark and it has as many rows on the source as on the target. Every row the
// source holds now was then written by a transaction that had ended before the snapshot, so it was in the
// snapshot: the source's chunk is a subset of the chunk as the snapshot saw it, and as large, so the same. (Any
// change of a row, an UPDATE included, writes a new row version with a new xmin; a deletion leaves fewer rows.)
// The target's chunk is the snapshot's, compared by checksum before the copy committed, and nothing wrote it since
// (its fence). A row whose xmin is older than 2^31 transactions reads as new, which copies its chunk again: a
// false alarm costs time, never a row.
func catchUpRows(ctx context.Context, src, tx pgx.Tx, ot orgTable, org, remap string, mc *moveCounts) error {
	fresh, err := freshSQL(ctx, src, mc.Watermark)
	if err != nil {
		return err
	}
	changed, err := changedChunks(ctx, src, tx, ot, org, fresh)
	if err != nil || len(changed) == 0 {
		return err
	}
	only := "(" + chunkKey + ") = ANY(" + quoteLiteral(arrayLiteral(changed)) + "::text[])"
	table := pgx.Identifier{ot.name}.Sanitize()
	tag, err := tx.Exec(ctx, `DELETE FROM `+table+` t WHERE (`+ot.where(org)+`) AND `+only)
	if err != nil {
		return fmt.Errorf("clear the changed chunks on the target: %w", err)
	}
	n, err := copyTable(ctx, src, tx, ot, org, remap, only)
	if err != nil {
		return err
	}
	if _, _, err := compareChunks(ctx, src, tx, org, remap, only, ot.name); err != nil {
		return err
	}
	mc.ChunksChanged += len(changed)
	mc.CaughtUp[ot.name], mc.Dropped[ot.name] = n, tag.RowsAffected()
	return nil
}

// freshSQL is the condition over t of a row written at or after the watermark. xmin is 32 bits: it follows the
// watermark when their difference modulo 2^32 is under 2^31 (ids 0-2 are bootstrap and frozen, always old), which
// holds for every row written since as long as fewer than 2^31 transactions began since the watermark; past that
// (a copy left unfenced for a very long time) every row counts as written since, and every chunk is copied again.
func freshSQL(ctx context.Context, src pgx.Tx, watermark int64) (string, error) {
	var next int64
	if err := src.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		return "", fmt.Errorf("read the source's transaction horizon: %w", err)
	}
	if next-watermark >= 1<<31 {
		return "true", nil
	}
	w := strconv.FormatInt(watermark%(1<<32), 10)
	return `t.xmin::text::bigint >= 3 AND (t.xmin::text::bigint - ` + w + ` + 4294967296) % 4294967296 < 2147483648`, nil
}

// changedChunks names the chunks of a store's rows that differ in rows or hold a row meeting fresh, counting both
// sides at once.
func changedChunks(ctx context.Context, src, tx pgx.Tx, ot orgTable, org, fresh string) ([]string, error) {
	table := pgx.Identifier{ot.name}.Sanitize()
	var theirs map[string]chunkState
	done := make(chan error, 1)
	go func() {
		var err error
		theirs, err = chunkStates(ctx, src, `SELECT `+chunkKey+`, count(*), bool_or(`+fresh+`) FROM `+table+` t WHERE `+ot.where(org)+` GROUP BY 1`)
		done <- err
	}()
	ours, err := chunkStates(ctx, tx, `SELECT `+chunkKey+`, count(*), false FROM `+table+` t WHERE `+ot.where(org)+` GROUP BY 1`)
	if srcErr := <-done; srcErr != nil {
		return nil, fmt.Errorf("the source's chunks: %w", srcErr)
	}
	if err != nil {
		return nil, fmt.Errorf("the target's chunks: %w", err)
	}
	var changed []string
	for k, s := range theirs {
		if s.fresh || s.rows != ours[k].rows {
			changed = append(changed, k)
		}
	}
	for k := range ours {
		if _, ok := theirs[k]; !ok {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	return changed, nil
}

func chunkStates(ctx context.Context, q pgx.Tx, sql string) (map[string]chunkState, error) {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	out := map[string]chunkState{}
	var k string
	var s chunkState
	_, err = pgx.ForEachRow(rows, []any{&k, &s.rows, &s.fresh}, func() error {
		out[k] = s
		return nil
	})
	return out, err
}

var arrayQuote = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// arrayLiteral is a text[] literal of keys, each quoted.
func arrayLiteral(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = `"` + arrayQuote.Replace(k) + `"`
	}
	return "{" + strings.Join(q, ",") + "}"
}

// compareChunks compares the checksum of every chunk of the org's rows (those meeting only, when not empty) in the
// given stores (both by default) of the source's snapshot and of the target's transaction, both computed at once.
// A chunk's checksum is its count and an order-free sum of a hash of each row's every column (the setting id as
// the target numbers it) and its partition. It returns how many chunks and datasets it compared.
func compareChunks(ctx context.Context, src, tx pgx.Tx, org, remap, only string, tables ...string) (chunks, datasets int, err error) {
	if len(tables) == 0 {
		tables = []string{"lake_rows", "profile_rows"}
	}
	seen := map[string]bool{}
	for _, table := range tables {
		var theirs map[string]string
		done := make(chan error, 1)
		go func() {
			var err error
			theirs, err = chunkSums(ctx, src, table, org, remap, only)
			done <- err
		}()
		ours, err := chunkSums(ctx, tx, table, org, "", only)
		if srcErr := <-done; srcErr != nil {
			return 0, 0, fmt.Errorf("checksum %s on the source: %w", table, srcErr)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("checksum %s on the target: %w", table, err)
		}
		var diffs []string
		for _, k := range slices.Sorted(maps.Keys(theirs)) {
			if theirs[k] != ours[k] {
				diffs = append(diffs, fmt.Sprintf("%s: source %s, target %s", k, theirs[k], ours[k]))
			}
			seen[k[strings.Index(k, "/")+1:strings.LastIndex(k, "/")]] = true
		}
		for k := range ours {
			if _, ok := theirs[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s: only on the target, %s", k, ours[k]))
			}
		}
		if len(diffs) > 0 {
			return 0, 0, fmt.Errorf("the copy of %s differs from the source in %d chunks: %s", table, len(diffs), strings.Join(diffs[:min(len(diffs), 5)], "; "))
		}
		chunks += len(theirs)
	}
	return chunks, len(seen), nil
}

// chunkSums is the checksum of each chunk of the org's rows in a store. remap, when not empty, maps the source's
// setting ids to the target's.
func chunkSums(ctx context.Context, q pgx.Tx, table, org, remap, only string) (map[string]string, error) {
	row := `to_jsonb(t)`
	from := pgx.Identifier{table}.Sanitize() + ` t`
	if remap != "" {
		row = `(to_jsonb(t) || jsonb_build_object('setting_id', m.n))`
		from += ` LEFT JOIN (` + remap + `) AS m (o, n) ON m.o = t.setting_id`
	}
	where := scopeFor(byDataset, org)
	if only != "" {
		where += ` AND ` + only
	}
	rows, err := q.Query(ctx, `SELECT `+chunkKey+`, count(*)::text || ':' || sum(('x' || left(md5(`+row+`::text || '|' || t.tableoid::regclass::text), 15))::bit(60)::bigint)::text
		FROM `+from+` WHERE `+where+` GROUP BY 1`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var k, sum string
	_, err = pgx.ForEachRow(rows, []any{&k, &sum}, func() error {
		out[k] = sum
		return nil
	})
	return out, err
}

// catchUpAudit brings the target's copy of the org's audit log to the source's: the source's head, anchor and
// purge records, without the events the source's audit retention removed since (audit_move_catch_up, migration
// 0021), and with the events appended since. Events are append-only, so those the target holds are the source's.
func catchUpAudit(ctx context.Context, src, tx pgx.Tx, org string, rep *MoveReport) error {
	var chain, purges []byte
	var firstKept int64
	err := src.QueryRow(ctx, `SELECT (SELECT to_jsonb(c) FROM audit_chains c WHERE c.org_id = $1),
		coalesce((SELECT jsonb_agg(to_jsonb(p) ORDER BY p.id) FROM audit_purges p WHERE p.org_id = $1), '[]'),
		coalesce((SELECT min(e.seq) FROM audit_events e WHERE e.org_id = $1), (SELECT c.seq + 1 FROM audit_chains c WHERE c.org_id = $1), 0)`,
		org).Scan(&chain, &purges, &firstKept)
	if err != nil {
		return fmt.Errorf("read the audit chain: %w", err)
	}
	var kept int64
	if err := tx.QueryRow(ctx, `SELECT audit_move_catch_up($1, $2::jsonb, $3::jsonb, $4)`, org, chain, purges, firstKept).Scan(&kept); err != nil {
		return fmt.Errorf("catch up the audit chain: %w", err)
	}
	i := slices.IndexFunc(orgTables, func(ot orgTable) bool { return ot.name == "audit_events" })
	n, err := copyTable(ctx, src, tx, orgTables[i], org, "", "t.seq > "+strconv.FormatInt(kept, 10))
	if err != nil {
		return fmt.Errorf("copy the audit events appended since the copy: %w", err)
	}
	rep.CaughtUp["audit_events"] = n
	return nil
}
