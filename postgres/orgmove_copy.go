package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
)

// precopy copies the org while its writes still pass: one repeatable-read snapshot of the source into one
// transaction of the target (copyTables), checked chunk by chunk against that snapshot. The source then records the
// step with its audit event, which the catch-up carries over. It skips the copy when the target's row of the move
// is there already (a move killed after the copy committed).
func (m *OrgMove) precopy(ctx context.Context, st *moveState, rep *MoveReport) error {
	step, err := m.targetStep(ctx, st.id)
	if err != nil {
		return err
	}
	began := time.Now()
	if step == "" {
		if err := m.createPartitions(ctx); err != nil {
			return err
		}
		if err := m.copyTables(ctx, st, rep, stepPrecopied); err != nil {
			return err
		}
	}
	tc, err := m.targetCounts(ctx, st.id)
	if err != nil {
		return err
	}
	now := m.Source.now()
	return m.Source.inTx(ctx, func(tx pgx.Tx) error {
		if err := setStepIn(ctx, tx, st.id, "source", stepPrecopied, now); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, m.event(st.id, now, map[string]any{"step": "precopied", "rows": tc.Copied,
			"chunksCompared": tc.Chunks, "tookMs": time.Since(began).Milliseconds()}))
	})
}

// copyOrg brings the target to the source as fenced: the catch-up of a copy made before the fence, or, for a move
// begun by a version that copied only after it, the whole copy now. It skips both when the target's row of the move
// says the copy is complete (a move killed after the catch-up committed).
func (m *OrgMove) copyOrg(ctx context.Context, st *moveState, rep *MoveReport) error {
	step, err := m.targetStep(ctx, st.id)
	if err != nil {
		return err
	}
	switch step {
	case "":
		if err := m.createPartitions(ctx); err != nil {
			return err
		}
		if err := m.copyTables(ctx, st, rep, stepCopied); err != nil {
			return err
		}
	case stepPrecopied:
		if err := m.catchUp(ctx, st, rep); err != nil {
			return err
		}
	}
	return m.setStep(ctx, m.Source, st.id, "source", stepCopied)
}

// moveCounts is what the target's row of a move records (org_moves.counts): what the copy wrote, the ids the
// target gave the org's TTL settings, the watermark of the copy's snapshot, and what the catch-up did.
type moveCounts struct {
	Copied   map[string]int64 `json:"copied"`
	Settings [][2]int64       `json:"settings,omitempty"` // source id, target id
	// Watermark is the xmin of the copy's snapshot (a 64-bit transaction id): every transaction before it had
	// ended when the snapshot was taken, so a row whose xmin precedes it was in the snapshot (catchUpRows).
	Watermark     int64            `json:"watermark"`
	Chunks        int              `json:"chunks"`
	ChunksChanged int              `json:"chunksChanged,omitempty"`
	CaughtUp      map[string]int64 `json:"caughtUp,omitempty"`
	Dropped       map[string]int64 `json:"droppedOnTarget,omitempty"`
}

// targetCounts reads the target's record of the move.
func (m *OrgMove) targetCounts(ctx context.Context, id string) (*moveCounts, error) {
	var mc moveCounts
	if err := m.Target.Pool.QueryRow(ctx, `SELECT counts FROM org_moves WHERE id = $1 AND role = 'target'`, id).Scan(&mc); err != nil {
		return nil, fmt.Errorf("read the target's record of move %s: %w", id, err)
	}
	return &mc, nil
}

// copyTables copies every table of the registry from one repeatable-read snapshot of the source into one
// transaction of the target, which also writes the target's row of the move (at step) and a fence that keeps the
// target's copy of the org unwritten until the move is verified: the copy is on the target whole, or not at all.
// Before it commits, the checksums of every chunk of rows are compared on both sides (compareChunks).
func (m *OrgMove) copyTables(ctx context.Context, st *moveState, rep *MoveReport, step string) error {
	if err := flushOrgPending(ctx, m.Source, m.Org); err != nil { // the org's manifests whole, before the snapshot
		return err
	}
	src, err := m.Source.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = src.Rollback(context.WithoutCancel(ctx)) }()
	mc := moveCounts{Copied: rep.Copied}
	// The snapshot's first statement: the snapshot is the transaction's from here on.
	if err := src.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&mc.Watermark); err != nil {
		return fmt.Errorf("read the snapshot's watermark: %w", err)
	}
	if _, err := src.Exec(ctx, `SET LOCAL TIME ZONE 'UTC'`); err != nil {
		return err
	}
	now := m.Target.now()
	return m.Target.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL TIME ZONE 'UTC'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO org_moves (id, org_id, role, target_cell, step, started_at, updated_at)
			VALUES ($1, $2, 'target', $3, $4, $5, $5)`, st.id, m.Org, m.TargetCell, step, now); err != nil {
			return fmt.Errorf("record the move on the target: %w", err)
		}
		// An org coming back to a cell it once left finds there the fence its departure left (moved), which would
		// refuse its writes and answer its requests with the cell it left for: the org is this cell's again, once
		// verified. Until then the target's own fence keeps its copy unwritten and out of the target's runs.
		if _, err := tx.Exec(ctx, `DELETE FROM org_write_fences WHERE org_id = $1`, m.Org); err != nil {
			return fmt.Errorf("clear the fence of an earlier move on the target: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO org_write_fences (org_id, move_id, state, since) VALUES ($1, $2, 'fenced', $3)`,
			m.Org, st.id, now); err != nil {
			return fmt.Errorf("fence the copy on the target: %w", err)
		}
		ids, err := settingMap(ctx, src, tx, m.Org, nil)
		if err != nil {
			return err
		}
		remap := remapSQL(ids)
		for _, ot := range orgTables {
			if ot.audit && ot.name != "audit_events" {
				continue // audit_chains and audit_purges: copyChain
			}
			n, err := copyTable(ctx, src, tx, ot, m.Org, remap, "")
			if err != nil {
				return fmt.Errorf("copy %s: %w", ot.name, err)
			}
			rep.Copied[ot.name] = n
		}
		if err := copyChain(ctx, src, tx, m.Org, rep); err != nil {
			return err
		}
		if mc.Chunks, rep.Datasets, err = compareChunks(ctx, src, tx, m.Org, remap, ""); err != nil {
			return err
		}
		rep.Chunks = mc.Chunks
		mc.Settings = settingPairs(ids)
		return saveCounts(ctx, tx, st.id, &mc)
	})
}

// saveCounts writes the target's record of the move.
func saveCounts(ctx context.Context, tx pgx.Tx, id string, mc *moveCounts) error {
	b, err := json.Marshal(mc)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE org_moves SET counts = $2::jsonb WHERE id = $1 AND role = 'target'`, id, b)
	return err
}

// settingMap gives each of the org's TTL settings on the source an id of the target's sequence: the ids known
// already (a copy's, for its catch-up) stay, the others are drawn now.
func settingMap(ctx context.Context, src, tx pgx.Tx, org string, known map[int64]int64) (map[int64]int64, error) {
	rows, err := src.Query(ctx, `SELECT t.id FROM ttl_settings t WHERE `+scopeFor(byDataset, org)+` ORDER BY t.id`)
	if err != nil {
		return nil, err
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read the TTL settings: %w", err)
	}
	out := maps.Clone(known)
	if out == nil {
		out = map[int64]int64{}
	}
	old = slices.DeleteFunc(old, func(id int64) bool { _, ok := out[id]; return ok })
	if len(old) == 0 {
		return out, nil
	}
	rows, err = tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('ttl_settings', 'id')) FROM generate_series(1, $1)`, len(old))
	if err != nil {
		return nil, err
	}
	fresh, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("number the TTL settings on the target: %w", err)
	}
	for i := range old {
		out[old[i]] = fresh[i]
	}
	return out, nil
}

// remapSQL is a setting map as a VALUES list (old, new).
func remapSQL(ids map[int64]int64) string {
	if len(ids) == 0 {
		return `SELECT NULL::bigint, NULL::bigint WHERE false`
	}
	pairs := make([]string, 0, len(ids))
	for _, o := range slices.Sorted(maps.Keys(ids)) {
		pairs = append(pairs, "("+strconv.FormatInt(o, 10)+"::bigint, "+strconv.FormatInt(ids[o], 10)+"::bigint)")
	}
	return "VALUES " + strings.Join(pairs, ", ")
}

func settingPairs(ids map[int64]int64) [][2]int64 {
	out := make([][2]int64, 0, len(ids))
	for _, o := range slices.Sorted(maps.Keys(ids)) {
		out = append(out, [2]int64{o, ids[o]})
	}
	return out
}

func settingMapOf(pairs [][2]int64) map[int64]int64 {
	out := make(map[int64]int64, len(pairs))
	for _, p := range pairs {
		out[p[0]] = p[1]
	}
	return out
}

// tableColumns lists a table's columns in their order.
func tableColumns(ctx context.Context, q querier, table string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT column_name::text FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// copyColumns is the columns both cells' table has, but those the target fills itself; the two cells must run the
// same migrations.
func copyColumns(ctx context.Context, src, tx pgx.Tx, ot orgTable) ([]string, error) {
	from, err := tableColumns(ctx, src, ot.name)
	if err != nil {
		return nil, err
	}
	to, err := tableColumns(ctx, tx, ot.name)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(from, to) {
		return nil, fmt.Errorf("the cells' %s differ (%v, %v): migrate both to the same version first", ot.name, from, to)
	}
	return slices.DeleteFunc(from, func(c string) bool { return slices.Contains(ot.omit, c) }), nil
}

// copyTable streams the org's rows of one table (those also meeting extra, a condition over t, when not empty)
// from the source's snapshot into the target, in COPY's binary form.
func copyTable(ctx context.Context, src, tx pgx.Tx, ot orgTable, org, remap, extra string) (int64, error) {
	cols, err := copyColumns(ctx, src, tx, ot)
	if err != nil {
		return 0, err
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "t." + pgx.Identifier{c}.Sanitize()
		if c == ot.remap {
			sel[i] = "m.n"
		}
	}
	from := pgx.Identifier{ot.name}.Sanitize() + " t"
	if ot.remap != "" {
		from += " JOIN (" + remap + ") AS m (o, n) ON m.o = t." + pgx.Identifier{ot.remap}.Sanitize()
	}
	where := ot.where(org)
	if extra != "" {
		where = "(" + where + ") AND " + extra
	}
	out := `COPY (SELECT ` + strings.Join(sel, ", ") + ` FROM ` + from + ` WHERE ` + where + `) TO STDOUT (FORMAT binary)`
	dest := pgx.Identifier{ot.name}.Sanitize()
	if ot.shared {
		dest = pgx.Identifier{"move_stage_" + ot.name}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE `+dest+` (LIKE `+pgx.Identifier{ot.name}.Sanitize()+` INCLUDING DEFAULTS) ON COMMIT DROP`); err != nil {
			return 0, err
		}
	}
	list := identList(cols)
	n, err := pipeCopy(ctx, src, tx, out, `COPY `+dest+` (`+list+`) FROM STDIN (FORMAT binary)`)
	if err != nil || !ot.shared {
		return n, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{ot.name}.Sanitize()+` (`+list+`) SELECT `+list+` FROM `+dest+` ON CONFLICT DO NOTHING`)
	return n, err
}

func identList(cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = pgx.Identifier{c}.Sanitize()
	}
	return strings.Join(out, ", ")
}

// pipeCopy runs COPY … TO STDOUT on src and COPY … FROM STDIN on tx at once, through a pipe.
func pipeCopy(ctx context.Context, src, tx pgx.Tx, out, in string) (int64, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := src.Conn().PgConn().CopyTo(ctx, pw, out)
		_ = pw.CloseWithError(err)
		done <- err
	}()
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, pr, in)
	_ = pr.CloseWithError(io.ErrClosedPipe) // unblocks the reader's side should the target have failed first
	if srcErr := <-done; srcErr != nil && err == nil {
		err = srcErr
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// copyChain copies the org's chain head and anchor, and its purge records, through audit_move_in.
func copyChain(ctx context.Context, src, tx pgx.Tx, org string, rep *MoveReport) error {
	var chain, purges []byte
	var n int64
	err := src.QueryRow(ctx, `SELECT (SELECT to_jsonb(c) FROM audit_chains c WHERE c.org_id = $1),
		coalesce((SELECT jsonb_agg(to_jsonb(p) ORDER BY p.id) FROM audit_purges p WHERE p.org_id = $1), '[]'),
		(SELECT count(*) FROM audit_purges p WHERE p.org_id = $1)`, org).Scan(&chain, &purges, &n)
	if err != nil {
		return fmt.Errorf("read the audit chain: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT audit_move_in($1, $2::jsonb, $3::jsonb)`, org, chain, purges); err != nil {
		return fmt.Errorf("copy the audit chain: %w", err)
	}
	if chain != nil {
		rep.Copied["audit_chains"] = 1
	}
	rep.Copied["audit_purges"] = n
	return nil
}

// createPartitions creates on the target, each in a short transaction of its own, the partitions the org's rows
// and counters are in on the source, with the same names and bounds. An empty partition is harmless, so a copy
// that fails after them leaves nothing to undo.
func (m *OrgMove) createPartitions(ctx context.Context) error {
	rows, err := m.Source.Pool.Query(ctx, `SELECT p.name, p.store, p.lower_bound, p.upper_bound, pg_get_expr(c.relpartbound, c.oid)
		FROM row_partitions p JOIN pg_class c ON c.oid = to_regclass(quote_ident(p.name))
		WHERE p.name IN (SELECT t.partition_name FROM row_stats t WHERE `+scopeFor(byDataset, m.Org)+`
		                 UNION SELECT t.partition_name FROM row_id_filters t WHERE `+scopeFor(byDataset, m.Org)+`)
		ORDER BY p.name`)
	if err != nil {
		return err
	}
	type part struct {
		name, store, bound string
		lower, upper       pgtype.Timestamptz // the past partition starts at -infinity
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (part, error) {
		var p part
		err := r.Scan(&p.name, &p.store, &p.lower, &p.upper, &p.bound)
		return p, err
	})
	if err != nil {
		return fmt.Errorf("list the org's partitions: %w", err)
	}
	for _, p := range parts {
		err := retryLockTimeouts(ctx, func(ctx context.Context) error {
			return m.Target.inTx(ctx, func(tx pgx.Tx) error {
				if err := setLockTimeout(ctx, tx, time.Second); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{p.name}.Sanitize()+` PARTITION OF `+
					storeTable(catalog.Store(p.store))+` `+p.bound); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO row_partitions (name, store, lower_bound, upper_bound) VALUES ($1, $2, $3, $4)
					ON CONFLICT (name) DO NOTHING`, p.name, p.store, p.lower, p.upper)
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("create partition %s on the target (a partition of another shape there over the same range stops a move): %w", p.name, err)
		}
	}
	return nil
}

// verify holds the copy to the source as fenced: the same count in every table of the registry, and an audit chain
// that verifies on the target with the source's head (the rows' checksums were compared chunk by chunk by the copy
// and the catch-up, compareChunks). It then lifts the target's fence, records the step and its audit event on the
// target, in one transaction.
func (m *OrgMove) verify(ctx context.Context, st *moveState) error {
	step, err := m.targetStep(ctx, st.id)
	if err != nil {
		return err
	}
	if step == stepCopied {
		if err := m.verifyCopy(ctx, st); err != nil {
			return err
		}
	}
	return m.setStep(ctx, m.Source, st.id, "source", stepVerified)
}

func (m *OrgMove) verifyCopy(ctx context.Context, st *moveState) error {
	counts := map[string]int64{}
	var diffs []string
	for _, ot := range orgTables {
		var ns, nt int64
		if err := m.Source.Pool.QueryRow(ctx, countSQL(ot, m.Org)).Scan(&ns); err != nil {
			return err
		}
		if err := m.Target.Pool.QueryRow(ctx, countSQL(ot, m.Org)).Scan(&nt); err != nil {
			return err
		}
		if ns != nt {
			diffs = append(diffs, fmt.Sprintf("%s: source %d, target %d", ot.name, ns, nt))
		}
		counts[ot.name] = nt
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the copy differs from the source: %s", strings.Join(diffs, "; "))
	}
	v, err := NewAuditService(m.Target).Verify(ctx, m.Org)
	if err != nil {
		return fmt.Errorf("verify the audit chain on the target: %w", err)
	}
	if !v.Valid {
		return fmt.Errorf("the audit chain of %s does not verify on the target (first break at %+v)", m.Org, v.FirstBroken)
	}
	mc, err := m.targetCounts(ctx, st.id)
	if err != nil {
		return err
	}
	details := map[string]any{"step": "verified", "rows": counts, "chunksCompared": mc.Chunks,
		"chunksChanged": mc.ChunksChanged, "caughtUp": mc.CaughtUp, "droppedOnTarget": mc.Dropped, "auditEventsVerified": v.Events}
	if !st.since.IsZero() {
		details["writesRefusedSoFarMs"] = m.Source.now().Sub(st.since).Milliseconds() // from the fence to now
	}
	now := m.Target.now()
	return m.Target.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM org_write_fences WHERE org_id = $1`, m.Org); err != nil {
			return fmt.Errorf("lift the fence of the copy on the target: %w", err)
		}
		if err := setStepIn(ctx, tx, st.id, "target", stepVerified, now); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, m.event(st.id, now, details))
	})
}

// removeOrgTables deletes the org's rows from every table of the registry but the audit log, children first (of a
// shared table only the org's own rows), and counts them by table into removed.
func removeOrgTables(ctx context.Context, tx pgx.Tx, org string, removed map[string]int64) error {
	for i := len(orgTables) - 1; i >= 0; i-- {
		ot := orgTables[i]
		if ot.audit {
			continue
		}
		tag, err := tx.Exec(ctx, `DELETE FROM `+pgx.Identifier{ot.name}.Sanitize()+` t WHERE `+ot.removeWhere(org))
		if err != nil {
			return fmt.Errorf("remove %s: %w", ot.name, err)
		}
		removed[ot.name] = tag.RowsAffected()
	}
	return nil
}

// removeSource removes every row of the org from the source in one transaction, with its audit chain
// (audit_move_out), leaves the fence there as moved, and records what it removed in the move's row.
func (m *OrgMove) removeSource(ctx context.Context, st *moveState, rep *MoveReport) error {
	now := m.Source.now()
	return m.Source.inTx(ctx, func(tx pgx.Tx) error {
		if err := removeOrgTables(ctx, tx, m.Org, rep.Removed); err != nil {
			return err
		}
		var events int64
		if err := tx.QueryRow(ctx, `SELECT audit_move_out($1)`, m.Org).Scan(&events); err != nil {
			return fmt.Errorf("remove the audit chain: %w", err)
		}
		rep.Removed["audit_events"] = events
		if _, err := tx.Exec(ctx, `UPDATE org_write_fences SET state = 'moved', since = $2 WHERE org_id = $1`, m.Org, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE org_moves SET counts = counts || jsonb_build_object('removed', $2::jsonb) WHERE id = $1 AND role = 'source'`,
			st.id, marshalCounts(rep.Removed)); err != nil {
			return err
		}
		return setStepIn(ctx, tx, st.id, "source", stepDone, now)
	})
}
