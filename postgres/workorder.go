package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
)

// WorkOrderService implements catalog.WorkOrderService: record-delete work orders, scoped to the caller's org and
// sandbox, each change with its audit event in the same transaction.
type WorkOrderService struct {
	db     *DB
	limits WorkOrderLimits
}

// WorkOrderLimits are the configured bounds of work orders; zero fields get catalog's defaults.
type WorkOrderLimits struct {
	DailyQuota   int // identities an org's accepted orders may name in a UTC day
	MonthlyQuota int // identities in a UTC month
	InFlight     int // open orders an org may have
	// PreviewBudget is the longest a preview counts (catalog.WorkOrderPreviewBudget when zero).
	PreviewBudget time.Duration
}

func (l WorkOrderLimits) withDefaults() WorkOrderLimits {
	if l.DailyQuota <= 0 {
		l.DailyQuota = catalog.DefaultDailyIdentityQuota
	}
	if l.MonthlyQuota <= 0 {
		l.MonthlyQuota = catalog.DefaultMonthlyIdentityQuota
	}
	if l.InFlight <= 0 {
		l.InFlight = catalog.DefaultWorkOrdersInFlight
	}
	if l.PreviewBudget <= 0 {
		l.PreviewBudget = catalog.WorkOrderPreviewBudget
	}
	return l
}

// NewWorkOrderService returns a WorkOrderService on db under limits.
func NewWorkOrderService(db *DB, limits WorkOrderLimits) *WorkOrderService {
	return &WorkOrderService{db: db, limits: limits.withDefaults()}
}

var _ catalog.WorkOrderService = (*WorkOrderService)(nil)

const workOrderColumns = `w.id, w.org_id, w.sandbox_name, w.dataset_id, coalesce(d.name, ''), w.display_name, w.description,
       w.status, coalesce(w.reason, ''), w.identity_count, w.rows_deleted, w.created_at, w.created_by, w.updated_at,
       w.updated_by, w.completed_at`

// workOrderFrom joins an order to its dataset for the dataset's name (none for ALL).
const workOrderFrom = ` FROM workorders w LEFT JOIN datasets d ON d.id = w.dataset_id`

// workOrderScope keeps a query inside the caller's org and sandbox.
const workOrderScope = `w.org_id = $1 AND w.sandbox_name = $2`

func scanWorkOrder(row pgx.Row) (*catalog.WorkOrder, error) {
	var w catalog.WorkOrder
	var status string
	err := row.Scan(&w.ID, &w.Org, &w.Sandbox, &w.DatasetID, &w.DatasetName, &w.DisplayName, &w.Description, &status,
		&w.Reason, &w.IdentityCount, &w.RowsDeleted, &w.Created, &w.CreatedBy, &w.Updated, &w.UpdatedBy, &w.CompletedAt)
	if err != nil {
		return nil, err
	}
	w.Status = catalog.WorkOrderStatus(status)
	w.Created, w.Updated = w.Created.UTC(), w.Updated.UTC()
	if w.CompletedAt != nil {
		utc := w.CompletedAt.UTC()
		w.CompletedAt = &utc
	}
	return &w, nil
}

func workOrderNotFound(id string) string { return fmt.Sprintf("work order %s was not found", id) }

func findWorkOrder(ctx context.Context, q querier, c *catalog.Caller, id string, forUpdate bool) (*catalog.WorkOrder, error) {
	query := `SELECT ` + workOrderColumns + workOrderFrom + ` WHERE ` + workOrderScope + ` AND w.id = $3`
	if forUpdate {
		query += ` FOR UPDATE OF w`
	}
	w, err := scanWorkOrder(q.QueryRow(ctx, query, c.Org, c.Sandbox, id))
	if err != nil {
		return nil, translate(err, workOrderNotFound(id))
	}
	return w, nil
}

// lockWorkOrderQuota serializes an org's creates, so that two at once cannot both pass a quota or the bound in flight.
const lockWorkOrderQuota = `SELECT pg_advisory_xact_lock(hashtextextended('workorder-quota:' || $1, 0))`

// selectIdentityQuotas sums the identities of the org's accepted orders since the start of the UTC day and month of $2.
const selectIdentityQuotas = `
SELECT coalesce(sum(identity_count) FILTER (WHERE created_at >= date_trunc('day', $2::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'), 0)::bigint,
       coalesce(sum(identity_count), 0)::bigint
FROM workorders WHERE org_id = $1 AND created_at >= date_trunc('month', $2::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`

func (s *WorkOrderService) quotas(ctx context.Context, q querier, org string, now time.Time) ([]catalog.Quota, error) {
	var day, month int64
	if err := q.QueryRow(ctx, selectIdentityQuotas, org, now).Scan(&day, &month); err != nil {
		return nil, fmt.Errorf("sum identities of %s: %w", org, err)
	}
	return []catalog.Quota{
		{Name: catalog.QuotaDailyIdentities, Consumed: int(day), Quota: min(s.limits.DailyQuota, s.limits.MonthlyQuota-int(month)+int(day))},
		{Name: catalog.QuotaMonthlyIdentities, Consumed: int(month), Quota: s.limits.MonthlyQuota},
	}, nil
}

// IdentityQuotas implements catalog.WorkOrderService. The daily quota is capped by what is left of the month, as
// Adobe's guide says.
func (s *WorkOrderService) IdentityQuotas(ctx context.Context, c *catalog.Caller) (_ []catalog.Quota, err error) {
	defer outage(&err)
	return s.quotas(ctx, s.db.Pool, c.Org, s.db.now())
}

const countOpenWorkOrders = `SELECT count(*) FROM workorders WHERE org_id = $1 AND status NOT IN ('completed', 'failed')`

// checkWorkOrderBounds takes the org's lock and refuses an order past the orders in flight or a quota.
func (s *WorkOrderService) checkWorkOrderBounds(ctx context.Context, tx pgx.Tx, org string, identities int, now time.Time) error {
	if _, err := tx.Exec(ctx, lockWorkOrderQuota, org); err != nil {
		return fmt.Errorf("lock work orders of %s: %w", org, err)
	}
	return s.room(ctx, tx, org, identities, now)
}

// room refuses an order of identities past the org's orders in flight or a quota; identities 0 is an order not
// read yet, refused only by a quota with nothing left.
func (s *WorkOrderService) room(ctx context.Context, q querier, org string, identities int, now time.Time) error {
	var open int
	if err := q.QueryRow(ctx, countOpenWorkOrders, org).Scan(&open); err != nil {
		return fmt.Errorf("count open work orders of %s: %w", org, err)
	}
	if open >= s.limits.InFlight {
		return catalog.ErrTooManyWorkOrders(open, s.limits.InFlight)
	}
	quotas, err := s.quotas(ctx, q, org, now)
	if err != nil {
		return err
	}
	for _, quota := range quotas {
		if identities == 0 && quota.Consumed >= quota.Quota {
			return catalog.ErrIdentityQuotaUsedUp(quota)
		}
		if identities > 0 && quota.Consumed+identities > quota.Quota {
			return catalog.ErrIdentityQuota(quota, identities)
		}
	}
	return nil
}

// CheckWorkOrderRoom implements catalog.WorkOrderService: two reads of the org's indexes (workorders_open_idx,
// workorders_quota_idx), without its lock, so that an order refused at a bound costs them and not its body.
func (s *WorkOrderService) CheckWorkOrderRoom(ctx context.Context, c *catalog.Caller) (err error) {
	defer outage(&err)
	return s.room(ctx, s.db.Pool, c.Org, 0, s.db.now())
}

const insertWorkOrder = `
INSERT INTO workorders (id, org_id, sandbox_name, dataset_id, display_name, description, status, identity_count,
                        identities, created_at, created_by, updated_at, updated_by)
VALUES ($1, $2, $3, $4, $5, $6, 'received', $7, $8, $9, $10, $9, $10)`

// CreateWorkOrder implements catalog.WorkOrderService. A dataset named must be live in the caller's sandbox; ALL is
// resolved when the order runs (the datasets live then).
func (s *WorkOrderService) CreateWorkOrder(ctx context.Context, c *catalog.Caller, create catalog.WorkOrderCreate) (_ *catalog.WorkOrder, err error) {
	defer outage(&err)
	now := s.db.now()
	var id string
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		name := ""
		if create.DatasetID != catalog.AllDatasets {
			ds, err := findDataset(ctx, tx, c, create.DatasetID, false)
			if err != nil {
				return err
			}
			name = ds.Name
		}
		if err := s.checkWorkOrderBounds(ctx, tx, c.Org, len(create.Identities), now); err != nil {
			return err
		}
		id = catalog.NewWorkOrderID()
		if _, err := tx.Exec(ctx, insertWorkOrder, id, c.Org, c.Sandbox, create.DatasetID, create.DisplayName,
			create.Description, len(create.Identities), create.Keys(), now, c.User); err != nil {
			return fmt.Errorf("insert work order: %w", err)
		}
		return writeAuditEvent(ctx, tx, workOrderEvent(c, c.Org, c.Sandbox, id, create.DisplayName, audit.ActionCreate, now,
			map[string]any{"datasetId": create.DatasetID, "datasetName": name, "identities": len(create.Identities)}))
	})
	if err != nil {
		return nil, err
	}
	return s.FindWorkOrder(ctx, c, id)
}

// workOrderEvent is the audit event of a change to a work order, under its own asset type. Identities are never in
// it: only their count (and, in each dataset's Delete event, the keyed hashes of those that matched rows).
func workOrderEvent(c *catalog.Caller, org, sandbox, id, name, action string, now time.Time, details map[string]any) *audit.Event {
	return &audit.Event{
		Org: org, Sandbox: sandbox, Timestamp: now, RequestID: c.RequestID, AssetType: audit.AssetWorkOrder,
		AssetID: id, AssetName: name, Action: action, Status: audit.StatusSuccess, User: c.User,
		ClientID: c.ClientID, Details: details,
	}
}

// FindWorkOrder implements catalog.WorkOrderService, in one read-only snapshot.
func (s *WorkOrderService) FindWorkOrder(ctx context.Context, c *catalog.Caller, id string) (_ *catalog.WorkOrder, err error) {
	defer outage(&err)
	var w *catalog.WorkOrder
	err = pgx.BeginTxFunc(ctx, s.db.Pool, readSnapshot, func(tx pgx.Tx) error {
		if w, err = findWorkOrder(ctx, tx, c, id, false); err != nil {
			return err
		}
		w.Parts, err = workOrderParts(ctx, tx, id)
		return err
	})
	return w, err
}

const selectWorkOrderParts = `SELECT dataset_id, dataset_name, status, lake_rows, profile_rows, completed_at
FROM workorder_parts WHERE workorder_id = $1 ORDER BY dataset_id`

func workOrderParts(ctx context.Context, q querier, id string) ([]catalog.WorkOrderPart, error) {
	rows, err := q.Query(ctx, selectWorkOrderParts, id)
	if err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", id, err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.WorkOrderPart, error) {
		var p catalog.WorkOrderPart
		var status string
		var lake, profile int64
		err := row.Scan(&p.DatasetID, &p.DatasetName, &status, &lake, &profile, &p.CompletedAt)
		p.Status, p.RowsDeleted = catalog.WorkOrderPartStatus(status), lake+profile
		p.Stores = map[catalog.Store]int64{catalog.LakeHouse: lake, catalog.Profile: profile}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read parts of %s: %w", id, err)
	}
	for i := range parts {
		if parts[i].Status != catalog.PartWaiting {
			continue
		}
		if parts[i].Reason, err = heldReasonRead(ctx, q, parts[i].DatasetID); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// heldReasonRead names the hold a waiting part waits for, derived at each read as an expiration's reason is.
func heldReasonRead(ctx context.Context, q querier, datasetID string) (string, error) {
	h, err := firstActiveHold(ctx, q, datasetID)
	if err != nil || h == nil {
		return "", err
	}
	return catalog.ErrDatasetHeld(datasetID, h, "the work order's part").Message, nil
}

// FindWorkOrders implements catalog.WorkOrderService.
func (s *WorkOrderService) FindWorkOrders(ctx context.Context, c *catalog.Caller, f catalog.WorkOrderFilter) (_ *catalog.WorkOrderPage, err error) {
	defer outage(&err)
	where, args := workOrderConditions(c, f)
	page := &catalog.WorkOrderPage{}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, readSnapshot, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*)`+workOrderFrom+` WHERE `+where, args...).Scan(&page.Total); err != nil {
			return fmt.Errorf("count work orders: %w", err)
		}
		dir := "ASC"
		if f.Desc {
			dir = "DESC"
		}
		if !slices.Contains(slices.Collect(maps.Values(catalog.WorkOrderOrders)), f.OrderBy) {
			// The column is spliced: only WorkOrderOrders' are; a filter without one is sorted as the API's default.
			f.OrderBy, dir = "created_at", "DESC"
		}
		args = append(args, f.Limit, f.Page*f.Limit)
		query := `SELECT ` + workOrderColumns + workOrderFrom + ` WHERE ` + where + ` ORDER BY w.` + f.OrderBy + ` ` + dir +
			`, w.id ` + dir + ` LIMIT $` + strconv.Itoa(len(args)-1) + ` OFFSET $` + strconv.Itoa(len(args))
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("list work orders: %w", err)
		}
		page.Results, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*catalog.WorkOrder, error) { return scanWorkOrder(row) })
		return err
	})
	return page, err
}

// workOrderConditions builds the WHERE of a listing; every value is a parameter.
func workOrderConditions(c *catalog.Caller, f catalog.WorkOrderFilter) (string, []any) {
	conds, args := []string{workOrderScope}, []any{c.Org, c.Sandbox}
	add := func(format string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(format, len(args)))
	}
	if len(f.Statuses) > 0 {
		st := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			st[i] = string(s)
		}
		add(`w.status = ANY($%d)`, st)
	}
	contains := func(col, v string) {
		if v != "" {
			add(`strpos(lower(`+col+`), lower($%d)) > 0`, v)
		}
	}
	contains("w.display_name", f.DisplayName)
	contains("w.description", f.Description)
	if f.Author != "" {
		pattern := f.Author
		op := "="
		if rest, ok := strings.CutPrefix(pattern, "NOT LIKE "); ok {
			pattern, op = rest, "NOT LIKE"
		} else if rest, ok := strings.CutPrefix(pattern, "LIKE "); ok {
			pattern, op = rest, "LIKE"
		}
		add(`w.created_by `+op+` $%d`, pattern)
	}
	if f.WorkOrderID != "" {
		add(`w.id = $%d`, f.WorkOrderID)
	}
	if f.Search != "" {
		add(`(w.id = $%[1]d OR strpos(lower(w.display_name || ' ' || w.description || ' ' || w.created_by || ' ' || coalesce(d.name, '')), lower($%[1]d)) > 0)`, f.Search)
	}
	if f.From != nil {
		add(`w.created_at >= $%d`, *f.From)
	}
	if f.To != nil {
		add(`w.created_at < $%d`, *f.To)
	}
	return strings.Join(conds, " AND "), args
}

// UpdateWorkOrder implements catalog.WorkOrderService: name and description only, with an Update event.
func (s *WorkOrderService) UpdateWorkOrder(ctx context.Context, c *catalog.Caller, id string, u catalog.WorkOrderUpdate) (_ *catalog.WorkOrder, err error) {
	defer outage(&err)
	now := s.db.now()
	err = s.db.inTx(ctx, func(tx pgx.Tx) error {
		w, err := findWorkOrder(ctx, tx, c, id, true)
		if err != nil {
			return err
		}
		changes := map[string]any{}
		if u.DisplayName != nil && *u.DisplayName != w.DisplayName {
			changes["displayName"] = map[string]any{"before": w.DisplayName, "after": *u.DisplayName}
			w.DisplayName = *u.DisplayName
		}
		if u.Description != nil && *u.Description != w.Description {
			changes["description"] = map[string]any{"before": w.Description, "after": *u.Description}
			w.Description = *u.Description
		}
		if len(changes) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE workorders SET display_name = $2, description = $3, updated_at = $4, updated_by = $5 WHERE id = $1`,
			id, w.DisplayName, w.Description, now, c.User); err != nil {
			return fmt.Errorf("update work order %s: %w", id, err)
		}
		return writeAuditEvent(ctx, tx, workOrderEvent(c, w.Org, w.Sandbox, id, w.DisplayName, audit.ActionUpdate, now, changes))
	})
	if err != nil {
		return nil, err
	}
	return s.FindWorkOrder(ctx, c, id)
}

// readSnapshot is a read-only transaction that sees one snapshot: a count and its page, an order and its parts.
var readSnapshot = pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}
