package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/retention"
)

// PreviewService implements jobs.PreviewService.
type PreviewService struct {
	db *DB
	// LakeGrace is the ingestion grace of the lake store, as the runs apply it.
	LakeGrace retention.Period
}

// NewPreviewService returns a PreviewService on db.
func NewPreviewService(db *DB, lakeGrace retention.Period) *PreviewService {
	return &PreviewService{db: db, LakeGrace: lakeGrace}
}

// sampleAbove is the row count above which the distribution is estimated from a 1% sample instead of counted.
const sampleAbove = 200_000

var _ jobs.PreviewService = (*PreviewService)(nil)

// Preview counts the rows a run at now would delete from the store of the dataset if its TTL became ttl from now
// (useCurrent: the TTL it has). The count is exact and uses the same rule as a run: rows already expired stay
// expired whatever the new TTL, and the lake's ingestion grace holds new rows back.
//
// It reads rows only where the counters cannot answer: the counters of each (partition, setting) group bound the
// event times of its rows, so a group entirely on one side of the question is counted whole or skipped, and only
// the groups straddling it (about one partition's worth of the dataset) are read. Datasets with override rows,
// whose expiry does not follow their event time, are read whole.
func (s *PreviewService) Preview(ctx context.Context, c *catalog.Caller, datasetID string, store catalog.Store, ttl *retention.Period, useCurrent bool) (_ *jobs.Preview, err error) {
	defer outage(&err)
	p := &jobs.Preview{At: s.db.now()}
	q := previewQuestion{store: store, at: p.At}
	if store == catalog.LakeHouse {
		q.grace = s.LakeGrace
	}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, false)
		if err != nil {
			return err
		}
		if !ds.IsTimeSeries() {
			return catalog.ErrNotTimeSeries(ds)
		}
		if useCurrent {
			ttl = ds.RowExpiration[store].TTL
		} else {
			q.hypothetical = ttl
		}
		p.TTL = ttl
		if p.RowsToDelete, p.RowCount, err = q.count(ctx, tx, datasetID); err != nil {
			return fmt.Errorf("count rows to delete: %w", err)
		}
		return s.distribution(ctx, tx, store, datasetID, p)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// previewQuestion is what a preview asks of one store: which rows would a run at `at`, with this grace, delete if
// the TTL became hypothetical (nil: stays as it is).
type previewQuestion struct {
	store        catalog.Store
	at           time.Time
	grace        retention.Period
	hypothetical *retention.Period
}

// countedSQL is the preview's rule for one row, the run's rule plus the hypothetical TTL: $2 the evaluation time,
// $3 the grace, $4 the hypothetical TTL (NULL: none).
func (q previewQuestion) countedSQL() string {
	return `r.ingested_at + $3::interval <= $2 AND (` + expiredInDataset(q.store, "$2::timestamptz") + `
        OR ($4::interval IS NOT NULL AND NOT r.never_expires AND COALESCE(r.own_expiry, r.ts + $4::interval) <= $2))`
}

func (q previewQuestion) args(datasetID string) []any {
	var hyp *string
	if q.hypothetical != nil {
		v := q.hypothetical.Interval()
		hyp = &v
	}
	return []any{datasetID, q.at, q.grace.Interval(), hyp}
}

// previewGroup is one counter: the rows of the dataset placed in a partition under a setting.
type previewGroup struct {
	partition   string
	from, until time.Time // the partition's range of placed expiries
	settingID   int64
	rows        int64
	maxIngested time.Time
}

// count returns the rows the question counts and the rows stored.
func (q previewQuestion) count(ctx context.Context, tx pgx.Tx, datasetID string) (counted, stored int64, err error) {
	overrides, err := hasOverrides(ctx, tx, datasetID, q.store)
	if err != nil {
		return 0, 0, err
	}
	if overrides {
		err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE `+q.countedSQL()+`), count(*) FROM `+storeTable(q.store)+
			` r WHERE r.dataset_id = $1`, q.args(datasetID)...).Scan(&counted, &stored)
		return counted, stored, err
	}
	history, err := settingsHistory(ctx, tx, datasetID, q.store)
	if err != nil {
		return 0, 0, err
	}
	groups, err := previewGroups(ctx, tx, datasetID, q.store)
	if err != nil {
		return 0, 0, err
	}
	settings, err := settingsByID(ctx, tx, datasetID, q.store)
	if err != nil {
		return 0, 0, err
	}
	certain, someCertain, possible, somePossible := q.eventBounds(history)
	for _, g := range groups {
		stored += g.rows
		if !somePossible {
			continue
		}
		after, through := time.Time{}, time.Time{}
		placedByTS := false
		if ttl := settings[g.settingID]; ttl != nil {
			after, through = retention.PlacedEvents(*ttl, g.from, g.until)
			placedByTS = true
		}
		switch {
		case placedByTS && !after.Before(possible):
			// Every row is newer than anything the question can count.
		case placedByTS && someCertain && !through.After(certain) && !q.grace.AddTo(g.maxIngested).After(q.at):
			counted += g.rows
		default:
			n, err := q.countGroup(ctx, tx, datasetID, g, possible)
			if err != nil {
				return 0, 0, err
			}
			counted += n
		}
	}
	return counted, stored, nil
}

// eventBounds returns, for a dataset without override rows, the event time at or before which every row is
// expired under the current TTL or the hypothetical one (someCertain false: no such time), and the one after which
// no row is expired under any setting of the history or the hypothetical TTL (somePossible false: no row can be).
func (q previewQuestion) eventBounds(history []retention.Setting) (certain time.Time, someCertain bool, possible time.Time, somePossible bool) {
	for _, ttl := range []*retention.Period{currentTTL(history), q.hypothetical} {
		if ttl == nil {
			continue
		}
		if b := retention.ExpiredThrough(*ttl, q.at); !someCertain || b.After(certain) {
			certain, someCertain = b, true
		}
	}
	possible, somePossible = retention.LastExpiredEvent(history, q.at)
	if q.hypothetical != nil {
		if b := retention.LiveAfter(*q.hypothetical, q.at); !somePossible || b.After(possible) {
			possible, somePossible = b, true
		}
	}
	return certain, someCertain, possible, somePossible
}

// currentTTL is the TTL of the setting in force, which applies to every row of the store.
func currentTTL(history []retention.Setting) *retention.Period {
	for _, s := range history {
		if s.Until == nil {
			return s.TTL
		}
	}
	return nil
}

// countGroup reads the group's rows up to the last event time the question can count.
func (q previewQuestion) countGroup(ctx context.Context, tx pgx.Tx, datasetID string, g previewGroup, possible time.Time) (int64, error) {
	var n int64
	err := tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{g.partition}.Sanitize()+` r
WHERE r.dataset_id = $1 AND r.setting_id = $5 AND r.ts <= $6 AND `+q.countedSQL(),
		append(q.args(datasetID), g.settingID, possible)...).Scan(&n)
	if isUndefinedTable(err) {
		return 0, nil // dropped by a run since the counters were read
	}
	return n, err
}

func previewGroups(ctx context.Context, tx pgx.Tx, datasetID string, store catalog.Store) ([]previewGroup, error) {
	rows, err := tx.Query(ctx, `
SELECT st.partition_name, p.lower_bound, LEAST(p.upper_bound, '9999-12-31'), st.setting_id, st.row_count, st.max_ingested_at
FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
WHERE st.dataset_id = $1 AND p.store = $2 AND st.row_count > 0`, datasetID, string(store))
	if err != nil {
		return nil, fmt.Errorf("read counters of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (previewGroup, error) {
		var g previewGroup
		err := row.Scan(&g.partition, &g.from, &g.until, &g.settingID, &g.rows, &g.maxIngested)
		return g, err
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

func (s *PreviewService) distribution(ctx context.Context, tx pgx.Tx, store catalog.Store, datasetID string, p *jobs.Preview) error {
	sample, scale := "", 1.0
	if p.RowCount > sampleAbove {
		sample, scale, p.Estimated = " TABLESAMPLE SYSTEM (1)", 100, true
	}
	rows, err := tx.Query(ctx, `SELECT date_trunc('month', r.ts), count(*) FROM `+storeTable(store)+` r`+sample+`
		WHERE r.dataset_id = $1 GROUP BY 1 ORDER BY 1 DESC`, datasetID)
	if err != nil {
		return fmt.Errorf("row distribution: %w", err)
	}
	var b jobs.AgeBucket
	_, err = pgx.ForEachRow(rows, []any{&b.Month, &b.Rows}, func() error {
		b.Rows = int64(float64(b.Rows) * scale)
		p.Distribution = append(p.Distribution, b)
		return nil
	})
	return err
}
