package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// ExpirationService implements catalog.ExpirationService: dataset expirations, scoped to the caller's org and
// sandbox, each change with its audit event in the same transaction.
type ExpirationService struct {
	db *DB
	// Quota is how many pending expirations an org may have (catalog.DefaultExpirationQuota when zero).
	Quota int
}

// NewExpirationService returns an ExpirationService on db allowing each org quota pending expirations
// (catalog.DefaultExpirationQuota when zero).
func NewExpirationService(db *DB, quota int) *ExpirationService {
	return &ExpirationService{db: db, Quota: quota}
}

var _ catalog.ExpirationService = (*ExpirationService)(nil)

// serviceUser is who the scheduler's changes are recorded as, the user of the retention runs' events too.
const serviceUser = "retention-service"

const expirationColumns = `e.id, e.org_id, e.sandbox_name, e.dataset_id, d.name, e.display_name, e.description, e.status,
       e.expiry, e.reason, e.created_at, e.created_by, e.updated_at, e.updated_by, e.executing_at, e.completed_at,
       e.cancelled_at`

// expirationFrom joins each expiration to its dataset for the dataset's name, deleted or not.
const expirationFrom = ` FROM dataset_expirations e JOIN datasets d ON d.id = e.dataset_id`

// expirationScope keeps a query inside the caller's org and sandbox.
const expirationScope = `e.org_id = $1 AND e.sandbox_name = $2`

func scanExpiration(row pgx.Row) (*catalog.Expiration, error) {
	var e catalog.Expiration
	var status string
	var reason *string
	err := row.Scan(&e.ID, &e.Org, &e.Sandbox, &e.DatasetID, &e.DatasetName, &e.DisplayName, &e.Description, &status,
		&e.Expiry, &reason, &e.Created, &e.CreatedBy, &e.Updated, &e.UpdatedBy, &e.ExecutingAt, &e.CompletedAt,
		&e.CancelledAt)
	if err != nil {
		return nil, err
	}
	e.Status = catalog.ExpirationStatus(status)
	e.Expiry, e.Created, e.Updated = e.Expiry.UTC(), e.Created.UTC(), e.Updated.UTC()
	for _, t := range []**time.Time{&e.ExecutingAt, &e.CompletedAt, &e.CancelledAt} {
		if *t != nil {
			utc := (*t).UTC()
			*t = &utc
		}
	}
	if reason != nil {
		e.Reason = *reason
	}
	return &e, nil
}

func expirationNotFound(ref string) string {
	return fmt.Sprintf("dataset expiration %s was not found", ref)
}

// findExpiration reads the expiration ref names in the caller's scope: by its id, or a dataset's open one (there is at
// most one), else its newest, locked for the transaction when forUpdate is set.
func findExpiration(ctx context.Context, q querier, c *catalog.Caller, ref string, forUpdate bool) (*catalog.Expiration, error) {
	by := `e.id = $3`
	if !catalog.IsExpirationID(ref) {
		by = `e.dataset_id = $3`
	}
	query := `SELECT ` + expirationColumns + expirationFrom + ` WHERE ` + expirationScope + ` AND ` + by +
		` ORDER BY e.status IN ('pending', 'executing') DESC, e.created_at DESC, e.id DESC LIMIT 1`
	if forUpdate {
		query += ` FOR UPDATE OF e`
	}
	e, err := scanExpiration(q.QueryRow(ctx, query, c.Org, c.Sandbox, ref))
	if err != nil {
		return nil, translate(err, expirationNotFound(ref))
	}
	return e, nil
}

// selectOpenExpiration finds a dataset's pending or executing expiration.
const selectOpenExpiration = `SELECT ` + expirationColumns + expirationFrom + `
WHERE e.dataset_id = $1 AND e.status IN ('pending', 'executing')`

// checkNoOpenExpiration returns the refusal naming a dataset's open expiration, if it has one other than except.
func checkNoOpenExpiration(ctx context.Context, tx pgx.Tx, datasetID, except string) error {
	open, err := scanExpiration(tx.QueryRow(ctx, selectOpenExpiration, datasetID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read open expiration of %s: %w", datasetID, err)
	}
	if open.ID == except {
		return nil
	}
	return catalog.ErrOpenExpiration(datasetID, open)
}

// lockOpenExpiration locks the open expiration of the caller's dataset, if it has one, and returns it (nil for none).
func lockOpenExpiration(ctx context.Context, tx pgx.Tx, c *catalog.Caller, datasetID string) (*catalog.Expiration, error) {
	e, err := scanExpiration(tx.QueryRow(ctx, `SELECT `+expirationColumns+expirationFrom+` WHERE `+expirationScope+
		` AND e.dataset_id = $3 AND e.status IN ('pending', 'executing') FOR UPDATE OF e`, c.Org, c.Sandbox, datasetID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock open expiration of %s: %w", datasetID, err)
	}
	return e, nil
}

// cancelOpenExpiration ends the open expiration of a dataset being deleted by other means cancelled, with that
// reason and its Cancel event, and returns its id ("" when it had none). The caller holds the dataset's row lock, so
// no expiration is created or reopened meanwhile; one created since the caller's lockOpenExpiration is not due, so
// no runner holds its lock while it waits for the dataset's.
func cancelOpenExpiration(ctx context.Context, tx pgx.Tx, c *catalog.Caller, datasetID string, now time.Time) (string, error) {
	e, err := lockOpenExpiration(ctx, tx, c, datasetID)
	if err != nil || e == nil {
		return "", err
	}
	reason := fmt.Sprintf("dataset %s was deleted by other means at %s, before the expiration ran", datasetID, now.UTC().Format(time.RFC3339))
	next := e.CancelledBecause(reason, c.User, now)
	if err := saveExpiration(ctx, tx, next); err != nil {
		return "", err
	}
	return e.ID, writeAuditEvent(ctx, tx, expirationEvent(c, next, audit.ActionCancel, now, next.AuditDetails(e)))
}

// lockQuota serializes the org's changes that add a pending expiration, so that two at once cannot both take the
// last unit of the quota.
const lockQuota = `SELECT pg_advisory_xact_lock(hashtextextended('dataset-expiration-quota:' || $1, 0))`

const countPending = `SELECT count(*) FROM dataset_expirations WHERE org_id = $1 AND status = 'pending'`

// checkQuota takes the org's quota lock and refuses one more pending expiration past the quota.
func (s *ExpirationService) checkQuota(ctx context.Context, tx pgx.Tx, org string) error {
	if _, err := tx.Exec(ctx, lockQuota, org); err != nil {
		return fmt.Errorf("lock expiration quota of %s: %w", org, err)
	}
	q, err := s.quota(ctx, tx, org)
	if err != nil {
		return err
	}
	if q.Consumed >= q.Quota {
		return catalog.ErrQuotaExceeded(q)
	}
	return nil
}

func (s *ExpirationService) quota(ctx context.Context, q querier, org string) (catalog.Quota, error) {
	out := catalog.Quota{Name: catalog.QuotaDatasetExpiration, Quota: s.Quota}
	if out.Quota <= 0 {
		out.Quota = catalog.DefaultExpirationQuota
	}
	if err := q.QueryRow(ctx, countPending, org).Scan(&out.Consumed); err != nil {
		return out, fmt.Errorf("count pending expirations of %s: %w", org, err)
	}
	return out, nil
}

const insertExpiration = `
INSERT INTO dataset_expirations (id, org_id, sandbox_name, dataset_id, display_name, description, status, expiry,
                                 created_at, created_by, updated_at, updated_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// selectNewestExpirations reads a dataset's expirations, the newest first: how many it has, and the one its bound's
// refusal names.
const selectNewestExpirations = `SELECT e.id, e.status FROM dataset_expirations e WHERE e.dataset_id = $1
ORDER BY e.created_at DESC, e.id DESC LIMIT ` + "$2"

// checkExpirationBound refuses one more expiration for a dataset that has catalog.MaxExpirationsPerDataset (open or
// cancelled: a completed one deleted it). The caller holds the dataset's row lock, which every create takes.
func checkExpirationBound(ctx context.Context, tx pgx.Tx, datasetID string) error {
	rows, err := tx.Query(ctx, selectNewestExpirations, datasetID, catalog.MaxExpirationsPerDataset)
	if err != nil {
		return fmt.Errorf("count expirations of %s: %w", datasetID, err)
	}
	existing, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Expiration, error) {
		var e catalog.Expiration
		err := row.Scan(&e.ID, &e.Status)
		return &e, err
	})
	if err != nil {
		return fmt.Errorf("count expirations of %s: %w", datasetID, err)
	}
	if len(existing) < catalog.MaxExpirationsPerDataset {
		return nil
	}
	for _, e := range existing {
		if e.Status == catalog.ExpirationCancelled {
			return catalog.ErrTooManyExpirations(datasetID, e)
		}
	}
	return catalog.ErrTooManyExpirations(datasetID, existing[0])
}

// CreateExpiration implements catalog.ExpirationService. The dataset row is locked, so that two creates for one
// dataset run one after the other and the second finds the first.
func (s *ExpirationService) CreateExpiration(ctx context.Context, c *catalog.Caller, create catalog.ExpirationCreate) (_ *catalog.Expiration, err error) {
	defer outage(&err)
	now := s.db.now()
	var e *catalog.Expiration
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, create.DatasetID, true)
		if err != nil {
			return err
		}
		if err := catalog.CanSchedule(ds); err != nil {
			return err
		}
		if err := checkNoOpenExpiration(ctx, tx, ds.ID, ""); err != nil {
			return err
		}
		if err := checkExpirationBound(ctx, tx, ds.ID); err != nil {
			return err
		}
		if err := s.checkQuota(ctx, tx, c.Org); err != nil {
			return err
		}
		if e, err = catalog.NewExpiration(create, ds, c, catalog.NewExpirationID(), now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insertExpiration, e.ID, e.Org, e.Sandbox, e.DatasetID, e.DisplayName, e.Description,
			string(e.Status), e.Expiry, e.Created, e.CreatedBy, e.Updated, e.UpdatedBy); err != nil {
			return fmt.Errorf("insert expiration of %s: %w", ds.ID, err)
		}
		if err := appendHistory(ctx, tx, e); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, expirationEvent(c, e, audit.ActionCreate, now, e.AuditDetails(nil)))
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// expirationEvent is the audit event of a change to e, under the asset type of expirations.
func expirationEvent(c *catalog.Caller, e *catalog.Expiration, action string, now time.Time, details map[string]any) *audit.Event {
	return &audit.Event{
		Org: e.Org, Sandbox: e.Sandbox, Timestamp: now, RequestID: c.RequestID, AssetType: audit.AssetDatasetExpiration,
		AssetID: e.ID, AssetName: e.DisplayName, Action: action, Status: audit.StatusSuccess, User: c.User,
		ClientID: c.ClientID, Details: details,
	}
}

// FindExpiration implements catalog.ExpirationService, in one read-only snapshot.
func (s *ExpirationService) FindExpiration(ctx context.Context, c *catalog.Caller, ref string, withHistory bool) (_ *catalog.Expiration, err error) {
	defer outage(&err)
	now := s.db.now()
	var e *catalog.Expiration
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if e, err = findExpiration(ctx, tx, c, ref, false); err != nil {
			return err
		}
		return completeExpirations(ctx, tx, []*catalog.Expiration{e}, withHistory, now)
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// completeExpirations fills what a read shows beside the expirations' rows: each one's reason to wait (the oldest
// active hold of a due pending one's dataset) and, when asked, its history.
func completeExpirations(ctx context.Context, q querier, exps []*catalog.Expiration, withHistory bool, now time.Time) error {
	if err := attachWaitReasons(ctx, q, exps, now); err != nil {
		return err
	}
	if !withHistory {
		return nil
	}
	return attachHistory(ctx, q, exps)
}

// selectOldestHolds reads the oldest active hold of each dataset (dataset_holds_active_idx).
const selectOldestHolds = `SELECT DISTINCT ON (h.dataset_id) ` + holdColumns + ` FROM dataset_holds h
WHERE h.dataset_id = ANY($1) AND h.released_at IS NULL ORDER BY h.dataset_id, h.placed_at, h.id`

// attachWaitReasons sets each expiration's Reason as of now (catalog.Expiration.WaitsFor): only a due pending one
// waits, for its dataset's oldest active hold, so the reason is never older than the read.
func attachWaitReasons(ctx context.Context, q querier, exps []*catalog.Expiration, now time.Time) error {
	var due []string
	for _, e := range exps {
		if e.Status == catalog.ExpirationPending && !e.Expiry.After(now) {
			due = append(due, e.DatasetID)
		}
	}
	holds := map[string]*catalog.Hold{}
	if len(due) > 0 {
		rows, err := q.Query(ctx, selectOldestHolds, due)
		if err != nil {
			return fmt.Errorf("read holds of due expirations: %w", err)
		}
		found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Hold, error) { return scanHold(row) })
		if err != nil {
			return fmt.Errorf("read holds of due expirations: %w", err)
		}
		for _, h := range found {
			holds[h.DatasetID] = h
		}
	}
	for _, e := range exps {
		e.WaitsFor(holds[e.DatasetID], now)
	}
	return nil
}

// selectHistory reads the kept history of expirations, each one's oldest first.
const selectHistory = `SELECT expiration_id, status, expiry, updated_at, updated_by, reason FROM dataset_expiration_history
WHERE expiration_id = ANY($1) ORDER BY expiration_id, seq`

// attachHistory fills each expiration's History in one query: at most catalog.MaxExpirationHistory rows each.
func attachHistory(ctx context.Context, q querier, exps []*catalog.Expiration) error {
	byID := make(map[string]*catalog.Expiration, len(exps))
	ids := make([]string, 0, len(exps))
	for _, e := range exps {
		byID[e.ID], e.History = e, []catalog.ExpirationEvent{}
		ids = append(ids, e.ID)
	}
	rows, err := q.Query(ctx, selectHistory, ids)
	if err != nil {
		return fmt.Errorf("read expiration history: %w", err)
	}
	var id string
	var h catalog.ExpirationEvent
	var reason *string
	_, err = pgx.ForEachRow(rows, []any{&id, &h.Status, &h.Expiry, &h.UpdatedAt, &h.UpdatedBy, &reason}, func() error {
		entry := catalog.ExpirationEvent{Status: h.Status, Expiry: h.Expiry.UTC(), UpdatedAt: h.UpdatedAt.UTC(), UpdatedBy: h.UpdatedBy}
		if reason != nil {
			entry.Reason = *reason
		}
		byID[id].History = append(byID[id].History, entry)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read expiration history: %w", err)
	}
	return nil
}

// appendHistory appends e.Change to e's history, numbered after the last entry (the caller holds e's row lock, so
// no other change numbers it meanwhile), and lets the entries past catalog.MaxExpirationHistory go: two index
// probes and at most one row removed, whatever e's history held before.
func appendHistory(ctx context.Context, tx pgx.Tx, e *catalog.Expiration) error {
	h := e.Change
	if h == nil {
		return nil
	}
	var reason *string
	if h.Reason != "" {
		reason = &h.Reason
	}
	var seq int64
	if err := tx.QueryRow(ctx, `INSERT INTO dataset_expiration_history (expiration_id, seq, status, expiry, updated_at, updated_by, reason)
		SELECT $1, COALESCE(max(seq), 0) + 1, $2, $3, $4, $5, $6 FROM dataset_expiration_history WHERE expiration_id = $1
		RETURNING seq`, e.ID, h.Status, h.Expiry, h.UpdatedAt, h.UpdatedBy, reason).Scan(&seq); err != nil {
		return fmt.Errorf("append history of expiration %s: %w", e.ID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM dataset_expiration_history WHERE expiration_id = $1 AND seq <= $2`,
		e.ID, seq-catalog.MaxExpirationHistory); err != nil {
		return fmt.Errorf("trim history of expiration %s: %w", e.ID, err)
	}
	return nil
}

const updateExpiration = `
UPDATE dataset_expirations
SET display_name = $2, description = $3, status = $4, expiry = $5, reason = $6, updated_at = $7, updated_by = $8,
    executing_at = $9, completed_at = $10, cancelled_at = $11
WHERE id = $1`

// saveExpiration writes e's changeable columns and appends its change to its history. Only a cancelled expiration's
// reason is stored: a pending one's is derived when it is read (attachWaitReasons), so it cannot go stale.
func saveExpiration(ctx context.Context, tx pgx.Tx, e *catalog.Expiration) error {
	var reason *string
	if e.Status == catalog.ExpirationCancelled && e.Reason != "" {
		reason = &e.Reason
	}
	if _, err := tx.Exec(ctx, updateExpiration, e.ID, e.DisplayName, e.Description, string(e.Status), e.Expiry, reason,
		e.Updated, e.UpdatedBy, e.ExecutingAt, e.CompletedAt, e.CancelledAt); err != nil {
		return fmt.Errorf("update expiration %s: %w", e.ID, err)
	}
	return appendHistory(ctx, tx, e)
}

// UpdateExpiration implements catalog.ExpirationService. Reopening a cancelled expiration checks again what a
// create checks: the dataset still exists, has no other open expiration, and the org has quota left.
func (s *ExpirationService) UpdateExpiration(ctx context.Context, c *catalog.Caller, ref string, u catalog.ExpirationUpdate) (_ *catalog.Expiration, err error) {
	defer outage(&err)
	now := s.db.now()
	var next *catalog.Expiration
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		e, err := findExpiration(ctx, tx, c, ref, true)
		if err != nil {
			return err
		}
		var reopened bool
		if next, reopened, err = e.Apply(u, c, now); err != nil {
			return err
		}
		if reopened {
			if err := s.checkReopen(ctx, tx, c, e); err != nil {
				return err
			}
		}
		if err := saveExpiration(ctx, tx, next); err != nil {
			return err
		}
		if err := attachWaitReasons(ctx, tx, []*catalog.Expiration{next}, now); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, expirationEvent(c, next, audit.ActionUpdate, now, next.AuditDetails(e)))
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

func (s *ExpirationService) checkReopen(ctx context.Context, tx pgx.Tx, c *catalog.Caller, e *catalog.Expiration) error {
	if _, err := findDataset(ctx, tx, c, e.DatasetID, true); err != nil {
		if catalog.ErrorCode(err) == catalog.ENOTFOUND {
			return catalog.Invalid("dataset-deleted", "expiry", "expiration %s cannot reopen: its dataset %s was deleted", e.ID, e.DatasetID)
		}
		return err
	}
	if err := checkNoOpenExpiration(ctx, tx, e.DatasetID, e.ID); err != nil {
		return err
	}
	return s.checkQuota(ctx, tx, c.Org)
}

// CancelExpiration implements catalog.ExpirationService.
func (s *ExpirationService) CancelExpiration(ctx context.Context, c *catalog.Caller, ref string) (_ *catalog.Expiration, err error) {
	defer outage(&err)
	now := s.db.now()
	var next *catalog.Expiration
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		e, err := findExpiration(ctx, tx, c, ref, true)
		if err != nil {
			return err
		}
		if next, err = e.Cancel(c, now); err != nil {
			return err
		}
		if err := saveExpiration(ctx, tx, next); err != nil {
			return err
		}
		return writeAuditEvent(ctx, tx, expirationEvent(c, next, audit.ActionCancel, now, next.AuditDetails(e)))
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

// ExpirationQuota implements catalog.ExpirationService.
func (s *ExpirationService) ExpirationQuota(ctx context.Context, c *catalog.Caller) (_ catalog.Quota, err error) {
	defer outage(&err)
	return s.quota(ctx, s.db.Pool, c.Org)
}

// expirationOrderColumns maps the orderable fields of the API to columns; nothing else reaches ORDER BY.
var expirationOrderColumns = map[string]string{
	"datasetName": "d.name", "description": "e.description", "displayName": "e.display_name", "expiry": "e.expiry",
	"id": "e.id", "status": "e.status", "updatedAt": "e.updated_at", "updatedBy": "e.updated_by",
}

// FindExpirations implements catalog.ExpirationService: one query for the page and one for the total.
func (s *ExpirationService) FindExpirations(ctx context.Context, c *catalog.Caller, f catalog.ExpirationFilter) (_ *catalog.ExpirationPage, err error) {
	defer outage(&err)
	where, args := expirationWhere(c, f)
	now := s.db.now()
	page := &catalog.ExpirationPage{}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*)`+expirationFrom+` WHERE `+where, args...).Scan(&page.Total); err != nil {
			return fmt.Errorf("count expirations: %w", err)
		}
		order := make([]string, 0, len(f.OrderBy)+2)
		for _, o := range f.OrderBy {
			dir := " ASC NULLS FIRST"
			if o.Desc {
				dir = " DESC NULLS LAST"
			}
			order = append(order, expirationOrderColumns[o.Field]+dir)
		}
		order = append(order, "e.updated_at DESC", "e.id")
		n := len(args)
		query := `SELECT ` + expirationColumns + expirationFrom + ` WHERE ` + where + ` ORDER BY ` + strings.Join(order, ", ") +
			` LIMIT $` + strconv.Itoa(n+1) + ` OFFSET $` + strconv.Itoa(n+2)
		rows, err := tx.Query(ctx, query, append(args, f.Limit, int64(f.Page)*int64(f.Limit))...)
		if err != nil {
			return fmt.Errorf("list expirations: %w", err)
		}
		page.Results, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.Expiration, error) { return scanExpiration(row) })
		if err != nil {
			return fmt.Errorf("list expirations: %w", err)
		}
		return completeExpirations(ctx, tx, page.Results, f.WithHistory, now)
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// likeEscaper escapes a user's text for a LIKE pattern that matches it literally.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// expirationWhere builds the listing's conditions; every value is a parameter.
func expirationWhere(c *catalog.Caller, f catalog.ExpirationFilter) (string, []any) {
	args := []any{c.Org, c.Sandbox}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	contains := func(s string) string { return arg("%" + likeEscaper.Replace(s) + "%") }
	where := []string{expirationScope}
	add := func(cond string) { where = append(where, cond) }
	if f.DatasetID != "" {
		add("e.dataset_id = " + arg(f.DatasetID))
	}
	if f.DatasetName != "" {
		add("d.name ILIKE " + contains(f.DatasetName))
	}
	if f.DisplayName != "" {
		add("e.display_name ILIKE " + contains(f.DisplayName))
	}
	if f.Description != "" {
		add("e.description ILIKE " + contains(f.Description))
	}
	if f.Author != "" {
		add(authorCondition(f.Author, arg))
	}
	if f.Search != "" {
		p := contains(f.Search)
		add("(e.updated_by ILIKE " + p + " OR e.display_name ILIKE " + p + " OR e.description ILIKE " + p +
			" OR d.name ILIKE " + p + " OR e.id = " + arg(f.Search) + ")")
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		add("e.status = ANY(" + arg(statuses) + ")")
	}
	timeBound := func(col, op string, t *time.Time) {
		if t != nil {
			add(col + " " + op + " " + arg(*t))
		}
	}
	timeBound("e.expiry", ">=", f.ExpiryFrom)
	timeBound("e.expiry", "<", f.ExpiryTo)
	timeBound("e.updated_at", ">=", f.UpdatedFrom)
	timeBound("e.updated_at", "<", f.UpdatedTo)
	return strings.Join(where, " AND "), args
}

// authorCondition matches who last updated the expiration: exactly, or as Adobe's author parameter allows, by a
// pattern after LIKE or NOT LIKE.
func authorCondition(author string, arg func(any) string) string {
	if rest, ok := strings.CutPrefix(author, "NOT LIKE "); ok {
		return "e.updated_by NOT LIKE " + arg(rest)
	}
	if rest, ok := strings.CutPrefix(author, "LIKE "); ok {
		return "e.updated_by LIKE " + arg(rest)
	}
	return "e.updated_by = " + arg(author)
}

// selectPendingExpiries reads the expiry of each dataset's pending expiration.
const selectPendingExpiries = `SELECT dataset_id, expiry FROM dataset_expirations WHERE dataset_id = ANY($1) AND status = 'pending'`

// attachPendingExpiries sets PendingExpiry on the datasets that have a pending expiration, which the Catalog shows
// as the tag adobe/hygiene/ttl.
func attachPendingExpiries(ctx context.Context, q querier, datasets []*catalog.Dataset) error {
	if len(datasets) == 0 {
		return nil
	}
	byID, ids := indexByID(datasets)
	rows, err := q.Query(ctx, selectPendingExpiries, ids)
	if err != nil {
		return fmt.Errorf("read pending expirations: %w", err)
	}
	var id string
	var expiry time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &expiry}, func() error {
		t := expiry.UTC()
		byID[id].PendingExpiry = &t
		return nil
	})
	if err != nil {
		return fmt.Errorf("read pending expirations: %w", err)
	}
	return nil
}

// expirationTagCondition filters a dataset listing by catalog.ExpirationTag as reads show it: the dataset has a
// pending expiration (value "*"), whose expiry in epoch milliseconds matches value, "*" a wildcard. One probe of the
// open expirations' index per dataset.
func expirationTagCondition(value string, arg func(any) string) string {
	cond := "EXISTS (SELECT 1 FROM dataset_expirations e WHERE e.dataset_id = d.id AND e.status = 'pending'"
	if value == "*" {
		return cond + ")"
	}
	pattern := strings.ReplaceAll(likeEscaper.Replace(value), "*", "%")
	return cond + " AND floor(extract(epoch FROM e.expiry) * 1000)::bigint::text LIKE " + arg(pattern) + ")"
}
