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

// The expiry rule in SQL: the one twin of retention/expiry.go, which is the reference. Every predicate, bound and
// history query of the rule is written here and nowhere else in the package; reads (rows.go), previews (preview.go)
// and runs (sweep.go) splice these in. Each builder names the Go function it mirrors, term for term, and the
// property test (expiry_test.go) holds the two equal on generated scenarios.
//
// The columns the rule reads:
//   - a row r of lake_rows or profile_rows: ts (the row's clock start, retention.Clock: its event time in a
//     time-series dataset, its write, equal to ingested_at, in a record dataset; a record's write restarts its clock
//     because a write of its _id replaces the row), ingested_at, own_expiry (_expiresAt, or ts + _ttl; NULL: none),
//     never_expires (_ttl: -1), setting_id (the setting in force when it was stored) and placed_expiry, the
//     partition key: retention.Row.Placed under that setting ('infinity' when it keeps the row forever; -infinity
//     in the past partition, for rows expired on arrival: partition.go);
//   - a setting h of ttl_settings: ttl (NULL: expiry disabled), in force from effective_from until effective_until
//     (NULL: the setting in force), and what the settings before it could have expired (retention.Earlier):
//     earlier_ttl_until, the latest end of one with a TTL, and earlier_expired_through, the latest event time of a
//     row without an override that one could have expired by its end. Both are written once, when the setting
//     starts (startSetting); settings from before migration 0005 have no earlier_expired_through, which only costs
//     speed.

// selectCurrentSettings reads the settings in force of each store of dataset $1, under which an ingestion places
// its rows.
const selectCurrentSettings = `
SELECT store, id FROM ttl_settings WHERE dataset_id = $1 AND effective_until IS NULL`

const (
	// endSetting ends the setting in force at $3, or later: after it started, when replicas' clocks differ by a
	// little, and after the latest ingestion stored under it (its counters' max_ingested_at), by at most
	// settingEndSlack. An ingestion whose clock was read after the change's, or at the same instant, but that
	// committed first (the change waits for it on the dataset's row) stored its rows under this setting, and reads
	// judged them by it: ended before them, the setting would no longer apply to them (retention.Expired), and a
	// lengthening would bring back rows that had expired on arrival.
	endSetting = `UPDATE ttl_settings h SET effective_until = GREATEST($3, h.effective_from,
    (SELECT max(LEAST(st.max_ingested_at + interval '1 microsecond', $3::timestamptz + ` + settingEndSlack + `))
     FROM row_stats st WHERE st.dataset_id = h.dataset_id AND st.setting_id = h.id))
WHERE h.dataset_id = $1 AND h.store = $2 AND h.effective_until IS NULL
RETURNING h.effective_until`
	// settingEndSlack bounds how far past its clock a change's start moves for ingestions stored under the setting it
	// ends: the clocks of replicas differ by far less; an import's _ingestedAt in the future does not hold it back.
	settingEndSlack = `interval '1 minute'`
	insertSetting   = `INSERT INTO ttl_settings (dataset_id, store, ttl, effective_from, earlier_ttl_until, earlier_expired_through)
VALUES ($1, $2, $3::interval, $4, $5, $6)`
)

// startSetting ends the store's current TTL setting and starts a new one where it ended (at now, or just after the
// ingestions stored under it: endSetting), recording what the settings now ended could have expired
// (retention.EarlierOf): rows beyond it are judged by the new setting alone. Reads and runs judge expiry by this
// history, which is how a TTL change takes effect at once without rewriting the store's rows.
func startSetting(ctx context.Context, tx pgx.Tx, id string, store catalog.Store, ttl *retention.Period, now time.Time) error {
	from := now
	if err := tx.QueryRow(ctx, endSetting, id, string(store), now).Scan(&from); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("end TTL setting of %s/%s: %w", id, store, err)
	}
	var interval *string
	if ttl != nil {
		v := ttl.Interval()
		interval = &v
	}
	history, err := settingsHistory(ctx, tx, id, store)
	if err != nil {
		return err
	}
	earlier := retention.EarlierOf(history, from)
	if _, err := tx.Exec(ctx, insertSetting, id, string(store), interval, from, earlier.TTLUntil, earlier.ExpiredThrough); err != nil {
		return fmt.Errorf("start TTL setting of %s/%s: %w", id, store, err)
	}
	return nil
}

// settingsHistory reads every TTL setting a store of a dataset has had, oldest first, as the Go rule's history.
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

// settingsByID returns the TTL of each setting of the store (nil: none).
func settingsByID(ctx context.Context, tx pgx.Tx, datasetID string, store catalog.Store) (map[int64]*retention.Period, error) {
	rows, err := tx.Query(ctx, `SELECT id, ttl FROM ttl_settings WHERE dataset_id = $1 AND store = $2`, datasetID, string(store))
	if err != nil {
		return nil, fmt.Errorf("read TTL settings of %s: %w", datasetID, err)
	}
	out := map[int64]*retention.Period{}
	var id int64
	var ttl pgtype.Interval
	_, err = pgx.ForEachRow(rows, []any{&id, &ttl}, func() error {
		out[id] = periodOf(ttl)
		return nil
	})
	return out, err
}

// periodOf reads a stored TTL back as a period (nil for NULL: expiry disabled). Postgres adds an interval's months,
// then its days, as Period.AddTo adds these, so the two agree on every expiry.
func periodOf(ttl pgtype.Interval) *retention.Period {
	if !ttl.Valid {
		return nil
	}
	return &retention.Period{Months: int64(ttl.Months), Days: int64(ttl.Days)}
}

// expiredPredicate is retention.Expired for a row r of a store's table, with now the evaluation time: reads,
// previews and runs all use it, so they never disagree about which rows have expired. The EXISTS is Expired's loop
// term for term: a setting with a TTL (h.ttl IS NOT NULL), not replaced before the row arrived (effective_until
// after ingested_at), under which the row's expiry (COALESCE(own_expiry, ts + ttl): Row.Expiry) came by the
// setting's end or now, whichever is first.
//
// soleSetting is SQL that is true when the row is stored under the setting still in force and no earlier setting
// can have expired it (soleSettingSQL). Then the rule reduces to the row's placed expiry (retention.Row.Placed), a
// column of the row: no lookup, and the partition key. Only rows that an earlier setting may have expired pay for
// the walk through the history, and not even those when currentTTL, SQL for the store's TTL in force (where a
// statement knows it once for all its rows; NULL::interval where it does not), has expired them: that is the
// walk's own test for the setting in force, tried first because after a TTL is shortened it settles most rows.
//
// The fragments of this file name their parameters (pgx.NamedArgs): @at is the evaluation time, @grace the
// ingestion grace, @dataset the one dataset of a statement about one; a statement that splices them passes those
// names, whatever else it numbers.
func expiredPredicate(store catalog.Store, soleSetting, currentTTL string) string {
	return expiredCase(soleSetting, currentTTL, `EXISTS (
    SELECT 1 FROM ttl_settings h
    WHERE `+settingExpired(store)+`)`)
}

// expiredCase is expiredPredicate's verdict, with earlier SQL that is true when a setting of the history expired
// the row (settingExpired); it is read only for rows the setting in force does not settle.
func expiredCase(soleSetting, currentTTL, earlier string) string {
	return `(CASE WHEN ` + soleSetting + ` THEN r.placed_expiry <= @at::timestamptz ELSE (NOT r.never_expires AND (
    ` + expiredByCurrent(currentTTL) + `
    OR ` + earlier + `)) END)`
}

// expiredByCurrent is the walk's test for the setting in force, whose TTL is currentTTL (SQL).
func expiredByCurrent(currentTTL string) string {
	return `(` + currentTTL + ` IS NOT NULL AND COALESCE(r.own_expiry, r.ts + ` + currentTTL + `) <= @at::timestamptz)`
}

// settingExpired is the history walk's term for a setting h of the row's store: it has a TTL, was not replaced
// before the row arrived, and expired the row by its end or @at, whichever is first.
func settingExpired(store catalog.Store) string {
	return `h.dataset_id = r.dataset_id AND h.store = '` + string(store) + `' AND h.ttl IS NOT NULL
      AND (h.effective_until IS NULL OR h.effective_until > r.ingested_at)
      AND COALESCE(r.own_expiry, r.ts + h.ttl) <= LEAST(COALESCE(h.effective_until, @at::timestamptz), @at::timestamptz)`
}

// soleSettingSQL is retention.SettingAlone for a row r under the current setting whose columns are given (its TTL,
// earlier_ttl_until and earlier_expired_through), term for term: it never expires; it was ingested once every
// earlier setting with a TTL had ended; it has no override and an event time later than any an earlier setting
// could expire; or it has its own expiry and the current setting a TTL.
func soleSettingSQL(ttl, ttlUntil, expiredThrough string) string {
	return `(r.never_expires OR r.ingested_at >= coalesce(` + ttlUntil + `, '-infinity')
        OR (r.own_expiry IS NULL AND r.ts > ` + expiredThrough + `)
        OR (r.own_expiry IS NOT NULL AND ` + ttl + ` IS NOT NULL))`
}

// currentOf is SQL for a column of the setting in force of dataset @dataset's store, looked up once per statement
// (an InitPlan), not per row.
func currentOf(store catalog.Store, col string) string {
	return `(SELECT c.` + col + ` FROM ttl_settings c WHERE c.dataset_id = @dataset AND c.store = '` + string(store) + `' AND c.effective_until IS NULL)`
}

// expiredInDataset is expiredPredicate (retention.Expired) at @at for queries about one dataset, @dataset: the
// shortcut applies to rows stored under the setting in force.
func expiredInDataset(store catalog.Store) string {
	sole := `r.setting_id = ` + currentOf(store, "id") + ` AND ` +
		soleSettingSQL(currentOf(store, "ttl"), currentOf(store, "earlier_ttl_until"), currentOf(store, "earlier_expired_through"))
	return expiredPredicate(store, sole, currentOf(store, "ttl"))
}

// expiredJoined is expiredInDataset for the select list of a page that shows the expired rows as well, marked,
// written with joins rather than subqueries, which a store distributed by dataset cannot run in a select list
// (docs/scaling.md): the setting in force is the page's join cur (joinCurrentSetting), and the history walk is the
// lateral join it returns, hist, which probes the history only for a row that the setting in force does not settle,
// as the predicate's EXISTS is evaluated only for those.
func expiredJoined(store catalog.Store) (join, flag string) {
	sole := `(r.setting_id = cur.id AND ` + soleSettingSQL("cur.ttl", "cur.earlier_ttl_until", "cur.earlier_expired_through") + `)`
	join = `LEFT JOIN LATERAL (SELECT true AS expired FROM ttl_settings h
    WHERE ` + sole + ` IS NOT TRUE AND NOT r.never_expires AND ` + expiredByCurrent("cur.ttl") + ` IS NOT TRUE
      AND ` + settingExpired(store) + ` LIMIT 1) hist ON true`
	return join, expiredCase(sole, "cur.ttl", "hist.expired IS NOT NULL")
}

// expiredUnderRowSetting is expiredPredicate (retention.Expired) at @at for a statement that joins each row's own
// setting as h (h.id = r.setting_id), across datasets: the shortcut applies when that setting is still in force.
func expiredUnderRowSetting(store catalog.Store) string {
	return expiredPredicate(store, "h.effective_until IS NULL AND "+soleSettingSQL("h.ttl", "h.earlier_ttl_until", "h.earlier_expired_through"),
		"(CASE WHEN h.effective_until IS NULL THEN h.ttl END)")
}

// pastGrace is the grace term of retention.Deletable for a row r: it was ingested at least @grace before @at.
const pastGrace = `r.ingested_at + @grace::interval <= @at`

// deletableInDataset is retention.Deletable for queries about one dataset, @dataset, at @at with grace @grace.
func deletableInDataset(store catalog.Store) string {
	return pastGrace + ` AND ` + expiredInDataset(store)
}

// expiredUnder is retention.Row.ExpiredUnder at @at for a row r and a TTL in force since before it arrived (SQL;
// NULL: none, so never): unless the row never expires, its expiry has come by then.
func expiredUnder(ttl string) string {
	return `(` + ttl + ` IS NOT NULL AND NOT r.never_expires AND COALESCE(r.own_expiry, r.ts + ` + ttl + `) <= @at)`
}

// currentExpiry is the expiry a read shows for a row r, retention.Row.Placed under the TTL in force (the setting
// joined as cur, joinCurrentSetting): NULL when the row never expires or the TTL is null.
const currentExpiry = `CASE WHEN r.never_expires OR cur.ttl IS NULL THEN NULL ELSE COALESCE(r.own_expiry, r.ts + cur.ttl) END`

// joinCurrentSetting joins the store's setting in force of each row's dataset as cur, for currentExpiry.
func joinCurrentSetting(store catalog.Store) string {
	return `LEFT JOIN ttl_settings cur ON cur.dataset_id = r.dataset_id AND cur.store = '` + string(store) + `' AND cur.effective_until IS NULL`
}

// groupDeletable is true for a counter group st (one dataset d's rows placed in partition p under setting h) every
// row of which is deletable at @at with grace @grace, from the counters alone: its dataset was deleted by then, or its
// rows were placed under a TTL with placed expiries before the partition's end, which has come, under a setting
// still in force at that end (a later, longer TTL may keep some rows) and all ingested at least the grace ago.
// retention.Deletable holds for each such row: its expiry under h came before h ended, after it arrived.
const groupDeletable = `(d.deleted_at IS NOT NULL AND d.deleted_at <= @at)
    OR (` + groupExpiredCondition + ` AND st.max_ingested_at + @grace::interval <= @at)`

// groupExpiredCondition is true for a counter group st (as in groupDeletable) every row of which has expired by @at,
// from the counters alone: its rows were placed under a TTL with placed expiries before the partition's end, which
// has come, under a setting still in force at that end and when the group's latest row arrived. retention.Expired
// holds for each such row: its expiry under h came before h ended, after it arrived. It is groupDeletable without
// the grace, and what the expired backlog counts (backlog.go): a group of the current month, or of a setting
// replaced before its month ended, is not counted until a run removes it, since the counters cannot tell which of
// its rows have expired. A row stored under a setting that ended at or before its ingestion time was never judged
// by that setting, so its group is left to the rule, row by row: a change ends its setting after the ingestions
// stored under it (endSetting), but by at most a minute past its clock (an import's _ingestedAt may be later), and
// histories written before it did may hold such rows.
const groupExpiredCondition = `(h.ttl IS NOT NULL AND p.upper_bound <= @at
        AND (h.effective_until IS NULL OR h.effective_until >= p.upper_bound) AND ` + settingJudgedGroup + `)`

// settingJudgedGroup is true for a counter group st whose setting h was still in force when the group's latest row
// arrived, so that retention.Expired judged every row of it by h: a setting that ended at or before a row's ingestion
// never applied to that row. The counters' shortcuts (groupExpiredCondition, a preview's past partition) hold only
// for such groups.
const settingJudgedGroup = `(h.effective_until IS NULL OR h.effective_until > st.max_ingested_at)`

// groupExpiredBy is, for a group for which groupExpiredCondition holds, a time by which every row of it had
// expired, from the counters: the end of its partition's range, before which every placed expiry in it lies. In the
// past partition (rows placed at -infinity, each expired at least a day before it arrived) it is the group's latest
// ingestion, or, when later, its earliest event time plus its TTL (an import's ingestion time can be older than
// its arrival); never later than @at. Both counters only move that time later as rows leave, never earlier.
const groupExpiredBy = `(CASE WHEN p.lower_bound = '-infinity'
    THEN LEAST(GREATEST(st.max_ingested_at, st.min_ts + h.ttl), @at) ELSE p.upper_bound END)`

// laterGroupMayExpire is true for a counter group (as in groupDeletable) placed after an evaluation time that may
// still hold rows expired by then: a deleted dataset's, or those of a setting that has ended (a shorter TTL since,
// or one where there was none), or rows that an earlier setting expired. Under a setting still in force, a row's
// placed expiry is its expiry, and it lies after the evaluation time, so such a row has expired only if an earlier
// setting expired it, which retention.SettingAlone rules out, term for term, for every row of the group when its
// earliest row does (the counters' lower bounds st.min_ingested_at and st.min_ts; NULL: unknown, so "may"): it
// was ingested once every earlier setting with a TTL had ended, or its event time is later than any an earlier
// setting could expire. The last holds only for rows without an override; under a TTL, SettingAlone also holds for
// those, and under a null TTL the group is kept by the ingestion term alone. So only groups that hold imports with
// an _ingestedAt from before an earlier TTL's end, and event times it could have expired, are read.
const laterGroupMayExpire = `(d.deleted_at IS NOT NULL OR h.effective_until IS NOT NULL
    OR (h.earlier_ttl_until IS NOT NULL AND coalesce(st.min_ingested_at, '-infinity') < h.earlier_ttl_until
        AND (h.ttl IS NULL OR h.earlier_expired_through IS NULL
             OR coalesce(st.min_ts, '-infinity') <= h.earlier_expired_through)))`

// deletableRows returns the condition on a partition's rows r that selects those of the dataset a sweep of the
// store at at with grace may delete, with its named arguments (@dataset and those it uses; the caller adds its own
// names), and none=true when no row can be deletable. Every row of a dataset deleted by the sweep's time goes;
// otherwise the rows retention.Deletable keeps (deletableInDataset), and, when the history gives one, only those
// with an event time at or before the last one any setting can have expired (retention.LastExpiredEvent; no bound
// where rows have overrides, whose expiry does not follow their event time). The bound is a conjunct of its own so
// that it narrows the index scan on (dataset_id, ts): behind an OR, the planner read all the dataset's rows in the
// partition for every batch.
func deletableRows(ctx context.Context, q querier, store catalog.Store, at time.Time, grace retention.Period, datasetID string) (cond string, args pgx.NamedArgs, none bool, err error) {
	r, err := deletableRule(ctx, q, store, at, grace, datasetID)
	return r.cond, r.args, r.none, err
}

// deletableSet is what deletableRule answers: deletableRows' condition, arguments and none, and beside them
// whether the dataset was deleted and whether its store keeps a deletion manifest (listed).
type deletableSet struct {
	cond            string
	args            pgx.NamedArgs
	none            bool
	deleted, listed bool
}

// deletableRule is deletableRows, which also reads, in the same statement, the store's deletionManifest switch: a
// batch learns whether to list its rows at no cost of its own (manifest.go).
func deletableRule(ctx context.Context, q querier, store catalog.Store, at time.Time, grace retention.Period, datasetID string) (deletableSet, error) {
	var r deletableSet
	cond, args, none, err := deletableRowsOf(ctx, q, store, at, grace, datasetID, &r)
	r.cond, r.args, r.none = cond, args, none
	return r, err
}

func deletableRowsOf(ctx context.Context, q querier, store catalog.Store, at time.Time, grace retention.Period, datasetID string, r *deletableSet) (cond string, args pgx.NamedArgs, none bool, err error) {
	var deleted, overrides bool
	err = q.QueryRow(ctx, `SELECT
    EXISTS (SELECT 1 FROM datasets WHERE id = $1 AND deleted_at IS NOT NULL AND deleted_at <= $3),
    EXISTS (SELECT 1 FROM row_overrides WHERE dataset_id = $1 AND store = $2),
    EXISTS (SELECT 1 FROM row_expirations WHERE dataset_id = $1 AND store = $2 AND deletion_manifest)`,
		datasetID, store, at).Scan(&deleted, &overrides, &r.listed)
	if err != nil {
		return "", nil, false, err
	}
	r.deleted = deleted
	if deleted {
		return `r.dataset_id = @dataset`, pgx.NamedArgs{"dataset": datasetID}, false, nil
	}
	cond = `r.dataset_id = @dataset AND ` + deletableInDataset(store)
	args = pgx.NamedArgs{"dataset": datasetID, "at": at, "grace": grace.Interval()}
	if overrides {
		return cond, args, false, nil
	}
	history, err := settingsHistory(ctx, q, datasetID, store)
	if err != nil {
		return "", nil, false, err
	}
	last, ok := retention.LastExpiredEvent(history, at)
	if !ok {
		return "", nil, true, nil
	}
	args["last"] = last
	return `r.ts <= @last AND ` + cond, args, false, nil
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

// readBound returns an event time at or before which every row of the store is hidden at now, or nil when there is
// none to give: under the current TTL every row without an override whose event time is that old has expired
// (retention.ExpiredThrough), so a page starts its index scan after it instead of stepping over the hidden rows one
// by one (after a TTL is shortened, they can be most of the dataset). Stores with override rows get no bound.
func readBound(ctx context.Context, tx pgx.Tx, ds *catalog.Dataset, store catalog.Store, now time.Time) (*time.Time, error) {
	ttl := ds.RowExpiration[store].TTL
	if ttl == nil {
		return nil, nil
	}
	overrides, err := hasOverrides(ctx, tx, ds.ID, store)
	if err != nil {
		return nil, err
	}
	if overrides {
		return nil, nil
	}
	b := retention.ExpiredThrough(*ttl, now)
	return &b, nil
}
