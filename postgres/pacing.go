package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file is the run's pacing: while ingestion is busy, each sweep worker rests after each batch, so that a run
// leaves ingestion most of a small server (docs/storage.md, "Pacing a run beside ingestion"). The signal is shared
// through Postgres alone, so that a run on one replica paces for ingestion on any other: each ingestion chunk's
// transaction tags its session (tagIngestion), and the sweep looks for tagged sessions of its database in
// pg_stat_activity after each batch.

// ingestionAppName is the application_name an ingestion chunk's session carries for the length of its transaction.
const ingestionAppName = "retentiond ingest"

// tagIngestionSQL tags the session for the transaction only: SET LOCAL goes back to the pool's own name at the
// commit or rollback, so an idle pooled connection never looks busy.
const tagIngestionSQL = `SET LOCAL application_name = '` + ingestionAppName + `'`

// ingestionBusySQL asks whether a session of this database is writing an ingestion chunk now. pg_stat_activity
// reads the server's backend slots, at most max_connections of them, from shared memory: a bounded cost, small
// beside a batch's. Sessions of other databases of the cluster do not count.
const ingestionBusySQL = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
    WHERE datname = current_database() AND application_name = '` + ingestionAppName + `')`

// busyHold is how long ingestion counts as busy after a look saw it. A busy client's session is tagged only inside
// its chunk transactions; between them the service parses the next body, and a single look can miss it.
const busyHold = time.Second

// tagIngestion marks tx's session as an ingestion's until tx ends.
func tagIngestion(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, tagIngestionSQL); err != nil {
		return fmt.Errorf("tag the ingestion's session: %w", err)
	}
	return nil
}

// pacer rests the sweep's workers while ingestion is busy: after a batch that took d, a worker rests
// d×(100−share)/share, so that it works share percent of the time. With share 100 it never looks.
type pacer struct {
	db     *DB
	share  int
	logger *slog.Logger
	// now and sleep are the clock: tests replace them, so that they neither wait nor depend on how long a batch
	// took.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu       sync.Mutex
	seenBusy time.Time // when a look last saw ingestion; zero: never
	pacing   bool      // what the last look decided, so that the log tells only the changes
}

func newPacer(db *DB, share int, logger *slog.Logger) *pacer {
	return &pacer{db: db, share: share, logger: logger, now: time.Now, sleep: sleepCtx}
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// start returns when a batch starts, for after.
func (p *pacer) start() time.Time { return p.now() }

// after is called by a worker when a batch that began at started has committed: while ingestion is busy, it rests
// in proportion to the batch's time. The batch is done whatever after returns; an error ends only the worker's
// rest.
func (p *pacer) after(ctx context.Context, started time.Time) error {
	if p.share >= 100 {
		return nil
	}
	end := p.now()
	busy, err := p.busy(ctx, end)
	if err != nil || !busy {
		return err
	}
	return p.restFor(ctx, end.Sub(started))
}

// rest rests in proportion to the time since started, busy or not: for a caller that has just looked.
func (p *pacer) rest(ctx context.Context, started time.Time) error {
	return p.restFor(ctx, p.now().Sub(started))
}

func (p *pacer) restFor(ctx context.Context, took time.Duration) error {
	return p.sleep(ctx, took*time.Duration(100-p.share)/time.Duration(p.share))
}

// busy looks for ingestion now, and says whether a look saw it within busyHold.
func (p *pacer) busy(ctx context.Context, now time.Time) (bool, error) {
	var seen bool
	if err := p.db.Pool.QueryRow(ctx, ingestionBusySQL).Scan(&seen); err != nil {
		return false, fmt.Errorf("look for busy ingestion: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if seen {
		p.seenBusy = now
	}
	busy := !p.seenBusy.IsZero() && now.Sub(p.seenBusy) < busyHold
	if busy != p.pacing {
		p.pacing = busy
		p.logger.InfoContext(ctx, "retention: pacing beside ingestion", slog.Bool("ingestion_busy", busy),
			slog.Int("busy_share_percent", p.share))
	}
	return busy, nil
}
