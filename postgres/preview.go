package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// PreviewService implements catalog.PreviewService.
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

var _ catalog.PreviewService = (*PreviewService)(nil)

// Preview counts the rows a run at now would delete from the store of the dataset if its TTL became ttl from now
// (useCurrent: the TTL it has). The count is exact and uses the same rule as a run: rows already expired stay
// expired whatever the new TTL, and the lake's ingestion grace holds new rows back.
//
// It reads rows only where the counters cannot answer: the counters of each (partition, setting) group bound the
// event times of its rows, so a group entirely on one side of the question is counted whole or skipped, and only
// the groups straddling it (about one partition's worth of the dataset) are read. Datasets with override rows,
// whose expiry does not follow their event time, are read whole.
//
// It reads in one snapshot taken after locking the store's parent table against detaching (ACCESS SHARE, which
// only DDL waits for): a run cannot drop a partition between the counters and the rows read here, so the count is
// that of one state of the store, and every partition the counters name is there to be read.
func (s *PreviewService) Preview(ctx context.Context, c *catalog.Caller, datasetID string, store catalog.Store, ttl *retention.Period, useCurrent bool) (_ *catalog.Preview, err error) {
	defer outage(&err)
	p := &catalog.Preview{At: s.db.now()}
	q := previewQuestion{store: store, at: p.At}
	if store == catalog.LakeHouse {
		q.grace = s.LakeGrace
	}
	err = pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// Before the first query, which takes the snapshot.
		if _, err := tx.Exec(ctx, `LOCK TABLE ONLY `+storeTable(store)+` IN ACCESS SHARE MODE`); err != nil {
			return fmt.Errorf("lock %s: %w", storeTable(store), err)
		}
		ds, err := findDataset(ctx, tx, c, datasetID, false)
		if err != nil {
			return err
		}
		if useCurrent {
			ttl = ds.RowExpiration[store].TTL
		} else {
			q.hypothetical = ttl
		}
		p.TTL = ttl
		parts, err := datasetPartitions(ctx, tx, datasetID, store)
		if err != nil {
			return err
		}
		if p.RowsToDelete, p.RowCount, err = q.count(ctx, tx, datasetID, parts, s.db.rows.hooks.afterPreviewCounters); err != nil {
			return fmt.Errorf("count rows to delete: %w", err)
		}
		return s.distribution(ctx, tx, store, datasetID, parts, p)
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

// countedSQL is the preview's rule for one row, the run's rule plus the hypothetical TTL: @at the evaluation time,
// @grace the grace, @hypothetical the hypothetical TTL (NULL: none).
func (q previewQuestion) countedSQL() string {
	return pastGrace + ` AND (` + expiredInDataset(q.store) + `
        OR ` + expiredUnder("@hypothetical::interval") + `)`
}

// args are countedSQL's named arguments for the dataset.
func (q previewQuestion) args(datasetID string) pgx.StrictNamedArgs {
	var hyp *string
	if q.hypothetical != nil {
		v := q.hypothetical.Interval()
		hyp = &v
	}
	return pgx.StrictNamedArgs{"dataset": datasetID, "at": q.at, "grace": q.grace.Interval(), "hypothetical": hyp}
}

// previewGroup is one counter: the rows of the dataset placed in a partition under a setting.
type previewGroup struct {
	partition   partitionSpec
	from, until time.Time // the partition's range of placed expiries, the far one's cut at the end of year 9999
	settingID   int64
	rows        int64
	maxIngested time.Time
	// arrivedUnder: the group's setting was still in force when its latest row arrived, so it judged every row of
	// the group (retention.Expired); a change at or before an ingestion's time leaves it false.
	arrivedUnder bool
}

// count returns the rows the question counts and the rows stored, reading only the partitions that hold the
// dataset's rows (parts). afterCounters, when set, runs once the counters are read (a test hook).
func (q previewQuestion) count(ctx context.Context, tx pgx.Tx, datasetID string, parts partitionFilter, afterCounters func()) (counted, stored int64, err error) {
	overrides, err := hasOverrides(ctx, tx, datasetID, q.store)
	if err != nil {
		return 0, 0, err
	}
	if overrides {
		err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE `+q.countedSQL()+`), count(*) FROM `+storeTable(q.store)+
			` r WHERE r.dataset_id = @dataset AND `+parts.sql(), pgx.QueryExecModeExec, q.args(datasetID)).Scan(&counted, &stored)
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
	if afterCounters != nil {
		afterCounters()
	}
	certain, someCertain, possible, somePossible := q.eventBounds(history)
	for _, g := range groups {
		stored += g.rows
		if g.partition.kind == pastPartition {
			// Placed there because they had expired when they arrived under a setting in force then: they stay
			// expired, and go once past the grace.
			if g.arrivedUnder && !q.grace.AddTo(g.maxIngested).After(q.at) {
				counted += g.rows
				continue
			}
			n, err := q.countGroup(ctx, tx, datasetID, g, farBoundary)
			if err != nil {
				return 0, 0, err
			}
			counted += n
			continue
		}
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
	for _, ttl := range []*retention.Period{retention.CurrentTTL(history), q.hypothetical} {
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

// countGroup reads the group's rows up to the last event time the question can count, through the store's parent
// table with the group's partition as constants.
func (q previewQuestion) countGroup(ctx context.Context, tx pgx.Tx, datasetID string, g previewGroup, possible time.Time) (int64, error) {
	var n int64
	part := partitionFilter{{lower: &g.from, upper: &g.until}}
	switch g.partition.kind {
	case pastPartition:
		part = partitionFilter{{upper: &pastBoundary}}
	case farPartition:
		part = partitionFilter{{lower: &farBoundary}}
	}
	args := q.args(datasetID)
	args["setting"], args["possible"] = g.settingID, possible
	err := tx.QueryRow(ctx, `SELECT count(*) FROM `+storeTable(q.store)+` r
WHERE r.dataset_id = @dataset AND `+part.sql()+` AND r.setting_id = @setting AND r.ts <= @possible AND `+q.countedSQL(),
		pgx.QueryExecModeExec, args).Scan(&n)
	return n, err
}

// selectPreviewGroups reads the dataset's counters in the store, with their partitions' ranges.
const selectPreviewGroups = `
SELECT p.lower_bound, p.upper_bound, st.setting_id, st.row_count, st.max_ingested_at,
  coalesce(` + settingJudgedGroup + `, false)
FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
LEFT JOIN ttl_settings h ON h.dataset_id = st.dataset_id AND h.id = st.setting_id
WHERE st.dataset_id = $1 AND p.store = $2 AND st.row_count > 0`

func previewGroups(ctx context.Context, tx pgx.Tx, datasetID string, store catalog.Store) ([]previewGroup, error) {
	rows, err := tx.Query(ctx, selectPreviewGroups, datasetID, string(store))
	if err != nil {
		return nil, fmt.Errorf("read counters of %s: %w", datasetID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (previewGroup, error) {
		var g previewGroup
		var lower, upper pgtype.Timestamptz
		if err := row.Scan(&lower, &upper, &g.settingID, &g.rows, &g.maxIngested, &g.arrivedUnder); err != nil {
			return g, err
		}
		g.partition = partitionSpec{store: store, lower: lower.Time, upper: upper.Time}
		g.from, g.until = lower.Time, upper.Time
		switch {
		case lower.InfinityModifier == pgtype.NegativeInfinity:
			g.partition.kind = pastPartition
		case upper.InfinityModifier == pgtype.Infinity:
			g.partition.kind = farPartition
			g.until = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
		}
		return g, nil
	})
}

func (s *PreviewService) distribution(ctx context.Context, tx pgx.Tx, store catalog.Store, datasetID string, parts partitionFilter, p *catalog.Preview) error {
	sample, scale := "", 1.0
	if p.RowCount > sampleAbove {
		sample, scale, p.Estimated = " TABLESAMPLE SYSTEM (1)", 100, true
	}
	rows, err := tx.Query(ctx, `SELECT date_trunc('month', r.ts), count(*) FROM `+storeTable(store)+` r`+sample+`
		WHERE r.dataset_id = $1 AND `+parts.sql()+` GROUP BY 1 ORDER BY 1 DESC`, pgx.QueryExecModeExec, datasetID)
	if err != nil {
		return fmt.Errorf("row distribution: %w", err)
	}
	var b catalog.AgeBucket
	_, err = pgx.ForEachRow(rows, []any{&b.Month, &b.Rows}, func() error {
		b.Rows = int64(float64(b.Rows) * scale)
		p.Distribution = append(p.Distribution, b)
		return nil
	})
	return err
}
