package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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
func (s *PreviewService) Preview(ctx context.Context, c *catalog.Caller, datasetID string, store catalog.Store, ttl *retention.Period, useCurrent bool) (*jobs.Preview, error) {
	p := &jobs.Preview{At: s.db.now()}
	grace := retention.Period{}
	if store == catalog.LakeHouse {
		grace = s.LakeGrace
	}
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		ds, err := findDataset(ctx, tx, c, datasetID, false)
		if err != nil {
			return err
		}
		if !ds.IsTimeSeries() {
			return catalog.ErrNotTimeSeries(ds)
		}
		if useCurrent {
			ttl = ds.RowExpiration[store].TTL
		}
		p.TTL = ttl
		var hyp *string
		if ttl != nil && !useCurrent {
			v := ttl.Interval()
			hyp = &v
		}
		query := `SELECT count(*) FILTER (WHERE r.ingested_at + $3::interval <= $2 AND (` + expiredPredicate(store, "$2::timestamptz") + `
        OR ($4::interval IS NOT NULL AND NOT r.never_expires AND COALESCE(r.own_expiry, r.ts + $4::interval) <= $2))),
       count(*)
FROM ` + storeTable(store) + ` r WHERE r.dataset_id = $1`
		if err := tx.QueryRow(ctx, query, datasetID, p.At, grace.Interval(), hyp).Scan(&p.RowsToDelete, &p.RowCount); err != nil {
			return fmt.Errorf("count rows to delete: %w", err)
		}
		return s.distribution(ctx, tx, store, datasetID, p)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
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
