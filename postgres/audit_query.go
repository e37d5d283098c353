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
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// auditFilterColumns maps each filterable field to the SQL it compares; the case-insensitive ones compare lower()
// of the column, which their indexes hold. No text of a request ever reaches the SQL: only these fixed strings and
// numbered parameters.
var auditFilterColumns = map[audit.Field]string{
	audit.FieldAction:    "lower(action)",
	audit.FieldAssetType: "lower(asset_type)",
	audit.FieldStatus:    "lower(status)",
	audit.FieldAssetID:   "asset_id",
	audit.FieldAssetName: "asset_name",
	audit.FieldUser:      "user_id",
	audit.FieldRequestID: "request_id",
	audit.FieldTimestamp: "occurred_at",
}

// auditOrderColumns maps each orderable field to its column.
var auditOrderColumns = map[audit.Field]string{
	audit.FieldTimestamp: "occurred_at",
	audit.FieldAction:    "action",
	audit.FieldAssetType: "asset_type",
	audit.FieldAssetID:   "asset_id",
	audit.FieldAssetName: "asset_name",
	audit.FieldUser:      "user_id",
	audit.FieldStatus:    "status",
	audit.FieldRequestID: "request_id",
}

var auditSQLOps = map[audit.Op]string{audit.OpGt: ">", audit.OpLt: "<", audit.OpGe: ">=", audit.OpLe: "<="}

const auditEventColumns = `id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name, action,
       status, user_id, client_id, details, seq, COALESCE(prev_hash, ''), COALESCE(hash, '')`

// auditWhere builds the WHERE clause of q in the caller's org and sandbox, with its arguments.
func auditWhere(c *catalog.Caller, q audit.Query) (string, []any) {
	return auditWhereAfter(c, q, nil)
}

// auditWhereAfter is auditWhere numbering its parameters after those already in args, which it extends.
func auditWhereAfter(c *catalog.Caller, q audit.Query, args []any) (string, []any) {
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	conds := []string{"org_id = " + arg(c.Org), "sandbox_name = " + arg(c.Sandbox)}
	for _, f := range q.Filters {
		if f.Field == audit.FieldType {
			// Every event is a core event: the filter holds for all events or for none.
			core := false
			for _, v := range f.Values {
				core = core || strings.EqualFold(v, "core")
			}
			if core != (f.Op == audit.OpEq) {
				conds = append(conds, "false")
			}
			continue
		}
		col := auditFilterColumns[f.Field]
		if f.Field == audit.FieldTimestamp {
			if op, ok := auditSQLOps[f.Op]; ok {
				conds = append(conds, col+" "+op+" "+arg(f.Times[0]))
				continue
			}
			if f.Op == audit.OpEq {
				conds = append(conds, col+" = ANY("+arg(f.Times)+"::timestamptz[])")
			} else {
				conds = append(conds, col+" <> ALL("+arg(f.Times)+"::timestamptz[])")
			}
			continue
		}
		values := f.Values
		if f.Field.CaseInsensitive() {
			values = make([]string, len(f.Values))
			for i, v := range f.Values {
				values[i] = strings.ToLower(v)
			}
		}
		switch {
		// One value compares with =, which keeps the filter's index range in time order; = ANY on a column
		// after the first of an index would lose that order and need a sort.
		case f.Op == audit.OpEq && len(values) == 1:
			conds = append(conds, col+" = "+arg(values[0]))
		case f.Op == audit.OpEq:
			conds = append(conds, col+" = ANY("+arg(values)+"::text[])")
		default:
			conds = append(conds, col+" <> ALL("+arg(values)+"::text[])")
		}
	}
	return strings.Join(conds, " AND "), args
}

// auditOrder builds the ORDER BY clause: the query's keys, then the time (newest first) when the keys do not name
// it, then the id, so that pages never overlap. The id runs against the time's direction, as in the indexes
// (occurred_at DESC, id), so both -timestamp and +timestamp are one index scan.
func auditOrder(q audit.Query) string {
	keys := auditOrderKeys(q)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.col + " ASC"
		if k.desc {
			out[i] = k.col + " DESC"
		}
	}
	return strings.Join(out, ", ")
}

// auditOrderKey is one key of auditOrder: a column, its direction, and the value an event has in it.
type auditOrderKey struct {
	col   string
	desc  bool
	cast  string
	value func(ev *audit.Event) any
}

// auditKeyValues gives each ordered column's cast and its value in an event.
var auditKeyValues = map[string]struct {
	cast  string
	value func(ev *audit.Event) any
}{
	"occurred_at": {"timestamptz", func(ev *audit.Event) any { return ev.Timestamp }},
	"action":      {"text", func(ev *audit.Event) any { return ev.Action }},
	"asset_type":  {"text", func(ev *audit.Event) any { return ev.AssetType }},
	"asset_id":    {"text", func(ev *audit.Event) any { return ev.AssetID }},
	"asset_name":  {"text", func(ev *audit.Event) any { return ev.AssetName }},
	"user_id":     {"text", func(ev *audit.Event) any { return ev.User }},
	"status":      {"text", func(ev *audit.Event) any { return ev.Status }},
	"request_id":  {"text", func(ev *audit.Event) any { return ev.RequestID }},
	"id":          {"uuid", func(ev *audit.Event) any { return ev.ID }},
}

// auditOrderKeys are the keys of auditOrder, in order; the last is the id, so together they name one event.
func auditOrderKeys(q audit.Query) []auditOrderKey {
	var keys []auditOrderKey
	add := func(col string, desc bool) {
		kv := auditKeyValues[col]
		keys = append(keys, auditOrderKey{col: col, desc: desc, cast: kv.cast, value: kv.value})
	}
	timeDesc, hasTime := true, false
	for _, o := range q.OrderBy {
		add(auditOrderColumns[o.Field], o.Desc)
		if o.Field == audit.FieldTimestamp {
			timeDesc, hasTime = o.Desc, true
		}
	}
	if !hasTime {
		add("occurred_at", true)
	}
	add("id", !timeDesc)
	return keys
}

// auditAfter builds the keyset condition "after ev in the order of keys", numbering its parameters after those in
// args, which it extends. The columns are all NOT NULL, so the comparisons are exact. The first key's bound comes
// first on its own, so the index on it starts its scan at ev rather than filtering from the beginning.
func auditAfter(keys []auditOrderKey, ev *audit.Event, args []any) (string, []any) {
	params := make([]string, len(keys))
	for i, k := range keys {
		args = append(args, k.value(ev))
		params[i] = "$" + strconv.Itoa(len(args)) + "::" + k.cast
	}
	op := func(k auditOrderKey, strict bool) string {
		switch {
		case k.desc && strict:
			return " < "
		case k.desc:
			return " <= "
		case strict:
			return " > "
		}
		return " >= "
	}
	var ors []string
	for i, k := range keys {
		terms := make([]string, 0, i+1)
		for j := range i {
			terms = append(terms, keys[j].col+" = "+params[j])
		}
		terms = append(terms, k.col+op(k, true)+params[i])
		ors = append(ors, "("+strings.Join(terms, " AND ")+")")
	}
	return keys[0].col + op(keys[0], false) + params[0] + " AND (" + strings.Join(ors, " OR ") + ")", args
}

// maxCountSplit bounds the values of an any-of filter that auditCount splits into one count each.
const maxCountSplit = 8

// auditCount builds the capped count of q's events. When a filter lists several values of an indexed field
// (action==Create,Update), the count adds up one capped count per value, each a range of that field's index: as one
// query with = ANY, the planner tends to a sequential scan that reads every row until it has found enough.
func auditCount(c *catalog.Caller, q audit.Query) (string, []any) {
	split := -1
	for i, f := range q.Filters {
		if f.Op == audit.OpEq && len(f.Values) > 1 && len(f.Values) <= maxCountSplit && f.Field != audit.FieldTimestamp && f.Field != audit.FieldType {
			split = i
			break
		}
	}
	const capped = `(SELECT 1 FROM audit_events WHERE %s LIMIT %d)`
	if split < 0 {
		where, args := auditWhere(c, q)
		return fmt.Sprintf(`SELECT count(*) FROM `+capped+` counted`, where, audit.TotalCap+1), args
	}
	var parts []string
	var args []any
	var seen []string
	for _, v := range q.Filters[split].Values {
		key := v
		if q.Filters[split].Field.CaseInsensitive() {
			key = strings.ToLower(v)
		}
		if slices.Contains(seen, key) {
			continue
		}
		seen = append(seen, key)
		one := q
		one.Filters = slices.Clone(q.Filters)
		one.Filters[split].Values = []string{v}
		var where string
		where, args = auditWhereAfter(c, one, args)
		parts = append(parts, fmt.Sprintf(capped, where, audit.TotalCap+1))
	}
	return `SELECT count(*) FROM (` + strings.Join(parts, " UNION ALL ") + `) counted`, args
}

// errCountOverBudget stops a count that ran out of its time budget.
var errCountOverBudget = errors.New("audit count over budget")

// FindEvents implements audit.Service. It runs in a transaction that forces custom plans: the best index depends
// on the filter's values (status==Failure is rare, status==Success is not), and a generic plan of a cached
// statement would pick one plan for all. The page comes first; when it reaches the end of the results the total is
// known without counting. Otherwise a count follows, stopping at audit.TotalCap, with CountBudget to finish; a
// count that needs longer (a != filter that no index narrows) gives way to the planner's estimate, and the page
// says so.
func (s *AuditService) FindEvents(ctx context.Context, c *catalog.Caller, q audit.Query) (_ *audit.Page, err error) {
	defer outage(&err)
	where, args := auditWhere(c, q)
	n := len(args)
	// The page's ids come first, from an index alone where the index carries every filtered column; only those
	// events are then read whole. A plain scan would read each event before a filter could reject it.
	order := auditOrder(q)
	pageSQL := fmt.Sprintf(`SELECT %s FROM audit_events WHERE id IN (
    SELECT id FROM audit_events WHERE %s ORDER BY %s LIMIT $%d OFFSET $%d
) ORDER BY %s`, auditEventColumns, where, order, n+1, n+2, order)
	countSQL, countArgs := auditCount(c, q)
	budget := s.CountBudget
	if budget <= 0 {
		budget = 25 * time.Millisecond
	}
	var page audit.Page
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
		// Parallel workers take longer to start than a page or a capped count takes to read.
		batch.Queue(`SET LOCAL max_parallel_workers_per_gather = 0`)
		batch.Queue(pageSQL, append(args, q.Limit+1, q.Start)...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				ev, err := scanAuditEvent(rows)
				if err != nil {
					return err
				}
				page.Events = append(page.Events, ev)
			}
			return rows.Err()
		})
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if len(page.Events) <= q.Limit && (len(page.Events) > 0 || q.Start == 0) {
			return nil // the page reaches the end: the total needs no count
		}
		batch = &pgx.Batch{}
		batch.Queue(`SET LOCAL statement_timeout = ` + strconv.FormatInt(budget.Milliseconds(), 10))
		batch.Queue(countSQL, countArgs...).QueryRow(func(row pgx.Row) error { return row.Scan(&page.Total) })
		err := tx.SendBatch(ctx, batch).Close()
		if isQueryCanceled(err) && ctx.Err() == nil {
			return errCountOverBudget
		}
		return err
	})
	overBudget := errors.Is(err, errCountOverBudget)
	if err != nil && !overBudget {
		return nil, fmt.Errorf("find audit events: %w", err)
	}
	if len(page.Events) > q.Limit {
		page.Events, page.More = page.Events[:q.Limit], true
	}
	if !page.More && (len(page.Events) > 0 || q.Start == 0) {
		page.Total = q.Start + len(page.Events)
		return &page, nil
	}
	if overBudget {
		if page.Total, err = s.estimate(ctx, where, args); err != nil {
			return nil, err
		}
		page.TotalEstimated = true
		page.Total = max(page.Total, q.Start+len(page.Events))
	}
	if page.Total > audit.TotalCap {
		page.Total, page.TotalCapped = audit.TotalCap, true
	}
	return &page, nil
}

// estimate returns the planner's estimate of the rows matching where.
func (s *AuditService) estimate(ctx context.Context, where string, args []any) (int, error) {
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	err := s.db.Pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) SELECT 1 FROM audit_events WHERE `+where,
		append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&plan)
	if err != nil {
		return 0, fmt.Errorf("estimate audit events: %w", err)
	}
	if len(plan) == 0 {
		return 0, errors.New("estimate audit events: empty plan")
	}
	return int(plan[0].Plan.Rows), nil
}

func isQueryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014"
}

// exportPageSize is how many events an export reads per query, about 0.5 MB. Each page is read with a pooled
// connection that goes back to the pool before the page is handed on, so a client that stops reading its export
// holds no connection: only this page, in memory.
const exportPageSize = 500

// exportThrough reads the org's newest seq when an export starts. An export is read in pages, one query each;
// bounding every page by the seq the chain had at the start gives the export the contents of that moment, as one
// query did: events appended meanwhile (seq is given under the chain's lock, in commit order) are not in it.
const exportThrough = `SELECT COALESCE(max(seq), 0) FROM audit_events WHERE org_id = $1`

// ExportEvents implements audit.Service. The events are read in pages of exportPageSize by keyset on the query's
// order, each page in a query of its own.
func (s *AuditService) ExportEvents(ctx context.Context, c *catalog.Caller, q audit.Query, fn func([]*audit.Event) error) (err error) {
	defer outage(&err)
	var through int64
	if err := s.db.Pool.QueryRow(ctx, exportThrough, c.Org).Scan(&through); err != nil {
		return fmt.Errorf("export audit events: %w", err)
	}
	where, args := auditWhere(c, q)
	args = append(args, s.db.now().Add(-audit.ExportWindow), through)
	where += fmt.Sprintf(" AND occurred_at >= $%d AND seq <= $%d", len(args)-1, len(args))
	keys, order := auditOrderKeys(q), auditOrder(q)
	var last *audit.Event
	for {
		pageWhere, pageArgs := where, args
		if last != nil {
			var after string
			after, pageArgs = auditAfter(keys, last, slices.Clone(args))
			pageWhere += " AND " + after
		}
		sql := fmt.Sprintf(`SELECT %s FROM audit_events WHERE %s ORDER BY %s LIMIT %d`, auditEventColumns, pageWhere, order, exportPageSize)
		rows, err := s.db.Pool.Query(ctx, sql, pageArgs...)
		if err != nil {
			return fmt.Errorf("export audit events: %w", err)
		}
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*audit.Event, error) { return scanAuditEvent(row) })
		if err != nil {
			return fmt.Errorf("export audit events: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		if err := fn(page); err != nil {
			return err
		}
		if len(page) < exportPageSize {
			return nil
		}
		last = page[len(page)-1]
	}
}

// scanAuditEvent reads one row of auditEventColumns. Details are decoded with json.Number, so numbers keep every
// digit the hash covered.
func scanAuditEvent(rows pgx.Row) (*audit.Event, error) {
	var ev audit.Event
	var details []byte
	if err := rows.Scan(&ev.ID, &ev.Org, &ev.Sandbox, &ev.Timestamp, &ev.RequestID, &ev.AssetType, &ev.AssetID,
		&ev.AssetName, &ev.Action, &ev.Status, &ev.User, &ev.ClientID, &details, &ev.Seq, &ev.PrevHash, &ev.Hash); err != nil {
		return nil, fmt.Errorf("read audit event: %w", err)
	}
	ev.Timestamp = ev.Timestamp.UTC()
	dec := json.NewDecoder(bytes.NewReader(details))
	dec.UseNumber()
	if err := dec.Decode(&ev.Details); err != nil {
		return nil, fmt.Errorf("read details of audit event %s: %w", ev.ID, err)
	}
	return &ev, nil
}

// verifyBatch is how many events a verification reads per query: the walk pages through the chain by seq, so a
// long chain never ties a connection to one huge result.
const verifyBatch = 10_000

// VerifyChain implements audit.Service: it walks the caller's org's chain and reports for the caller's sandbox
// (audit.Verifier.ScopeTo).
func (s *AuditService) VerifyChain(ctx context.Context, c *catalog.Caller) (_ *audit.Verification, err error) {
	defer outage(&err)
	return s.verify(ctx, c.Org, c.Sandbox)
}

// Verify walks the chain of org and reports for the whole org, as only an operator may see it.
func (s *AuditService) Verify(ctx context.Context, org string) (*audit.Verification, error) {
	return s.verify(ctx, org, "")
}

// verify walks org's chain, reporting for sandbox when one is given. It reads the head and the events in one
// repeatable-read snapshot, so events appended during the walk neither show nor break it.
func (s *AuditService) verify(ctx context.Context, org, sandbox string) (*audit.Verification, error) {
	var result *audit.Verification
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var head audit.ChainPoint
		anchor := audit.ChainPoint{Hash: audit.GenesisHash}
		err := tx.QueryRow(ctx, `SELECT seq, head_hash, anchor_seq, anchor_hash FROM audit_chains WHERE org_id = $1`, org).
			Scan(&head.Seq, &head.Hash, &anchor.Seq, &anchor.Hash)
		var w *audit.Verifier
		switch {
		case err == nil:
			w = audit.NewVerifier(org, &head, anchor)
		case errors.Is(err, pgx.ErrNoRows):
			w = audit.NewVerifier(org, nil, anchor)
		default:
			return fmt.Errorf("read audit chain head of %s: %w", org, err)
		}
		if sandbox != "" {
			w.ScopeTo(sandbox)
		}
		after := anchor.Seq
		for {
			rows, err := tx.Query(ctx, `SELECT `+auditEventColumns+` FROM audit_events WHERE org_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
				org, after, verifyBatch)
			if err != nil {
				return fmt.Errorf("read audit chain of %s: %w", org, err)
			}
			n := 0
			for rows.Next() {
				ev, err := scanAuditEvent(rows)
				if err != nil {
					rows.Close()
					return err
				}
				if err := w.Add(ev); err != nil {
					rows.Close()
					return err
				}
				after, n = ev.Seq, n+1
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read audit chain of %s: %w", org, err)
			}
			if n < verifyBatch {
				break
			}
		}
		result = w.Finish()
		return nil
	})
	return result, err
}

// PurgeBefore implements audit.Purger: for each org whose oldest event is older than before, it removes old events
// in batches through audit_purge (which only the audit owner role may delete with) and appends, in the same
// transaction, a Delete event of assetType AuditLog to each sandbox that lost events, so the removal shows in the
// log it shortened.
func (s *AuditService) PurgeBefore(ctx context.Context, before time.Time) (audit.PurgeResult, error) {
	var res audit.PurgeResult
	rows, err := s.db.Pool.Query(ctx, `
SELECT c.org_id FROM audit_chains c
WHERE (SELECT e.occurred_at FROM audit_events e WHERE e.org_id = c.org_id ORDER BY e.seq LIMIT 1) < $1
ORDER BY c.org_id`, before)
	if err != nil {
		return res, fmt.Errorf("find orgs with old audit events: %w", err)
	}
	orgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return res, fmt.Errorf("find orgs with old audit events: %w", err)
	}
	batch := s.PurgeBatch
	if batch <= 0 {
		batch = 50_000
	}
	for _, org := range orgs {
		var removed int64
		for {
			n, err := s.purgeBatch(ctx, org, before, batch)
			if err != nil {
				return res, err
			}
			removed += n
			if n < batch {
				break
			}
		}
		if removed > 0 {
			res.Orgs++
			res.Removed += removed
		}
	}
	return res, nil
}

type purged struct {
	sandbox   string
	removed   int64
	firstKept int64
}

func (s *AuditService) purgeBatch(ctx context.Context, org string, before time.Time, limit int64) (int64, error) {
	now := s.db.now()
	runID := audit.NewID()
	var total int64
	err := s.db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT sandbox_name, removed, first_kept_seq FROM audit_purge($1, $2, $3)`, org, before, limit)
		if err != nil {
			return fmt.Errorf("purge audit events of %s: %w", org, err)
		}
		gone, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (purged, error) {
			var p purged
			return p, r.Scan(&p.sandbox, &p.removed, &p.firstKept)
		})
		if err != nil {
			return fmt.Errorf("purge audit events of %s: %w", org, err)
		}
		for _, p := range gone {
			total += p.removed
			err := writeAuditEvent(ctx, tx, &audit.Event{
				Org: org, Sandbox: p.sandbox, Timestamp: now, RequestID: "audit-retention:" + runID,
				AssetType: audit.AssetAuditLog, AssetID: "audit-log", AssetName: "audit log", Action: audit.ActionDelete,
				Status: audit.StatusSuccess, User: "audit-retention", ClientID: "retentiond",
				Details: map[string]any{
					"removedEvents": p.removed, "before": before.UTC().Format(time.RFC3339Nano), "firstKeptSeq": p.firstKept,
				},
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return total, err
}
