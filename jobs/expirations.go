package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/acme/retention/catalog"
)

// ExpirationRepository carries out dataset expirations (package postgres implements it). Each step acts only from
// the status it expects, under a lock, so any replica may repeat any step: the dataset is deleted once.
type ExpirationRepository interface {
	// DueExpirations returns up to limit expirations to act on now: pending ones come due, and executing ones a
	// stopped replica left.
	DueExpirations(ctx context.Context, limit int) ([]string, error)
	// StartExpiration marks a due expiration executing and reports true (true also for one already executing);
	// false when there is nothing to do, or the expiration must wait (its dataset held) or ended cancelled (its
	// dataset deleted first).
	StartExpiration(ctx context.Context, id string) (bool, error)
	// FinishExpiration deletes an executing expiration's dataset and marks it completed; a dataset held since the
	// first step puts it back pending instead, without error.
	FinishExpiration(ctx context.Context, id string) error
}

// ExpirationQueue puts one job per expiration on the job queue, at most one queued or running per expiration
// (package riverjobs implements it).
type ExpirationQueue interface {
	EnqueueExpirations(ctx context.Context, ids []string) error
}

// ErrLeftToTick wraps the refusal of an expiration's step by a rule of the domain (the state of the expiration or its
// dataset forbids it now), which a retry on a backoff would not change: the job ends, and while the expiration is
// due the next tick queues it again. An error of the database is returned as it is, for the queue to retry.
var ErrLeftToTick = errors.New("dataset expiration refused for now; the next tick looks again")

// dueBatch bounds the expirations one tick queues; the next tick queues the rest.
const dueBatch = 1000

// Expirations orchestrates dataset expirations: a periodic tick queues the due ones, and each one's job executes it.
type Expirations struct {
	repo   ExpirationRepository
	logger *slog.Logger
}

// NewExpirations returns the orchestration of expirations kept in repo; logger may be nil.
func NewExpirations(repo ExpirationRepository, logger *slog.Logger) *Expirations {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Expirations{repo: repo, logger: logger}
}

// Tick queues a job for every due expiration. Every replica may call it: the queue keeps one job per expiration.
func (e *Expirations) Tick(ctx context.Context, queue ExpirationQueue) error {
	ids, err := e.repo.DueExpirations(ctx, dueBatch)
	if err != nil || len(ids) == 0 {
		return err
	}
	return queue.EnqueueExpirations(ctx, ids)
}

// Execute carries out one expiration: it marks it executing, then deletes its dataset and marks it completed, in two
// transactions, so that the status shows the deletion under way. A replica stopped between them leaves it
// executing, and the next Execute (the job's retry, or the job the next tick queues) finishes it.
func (e *Expirations) Execute(ctx context.Context, id string) error {
	started, err := e.repo.StartExpiration(ctx, id)
	if err != nil || !started {
		return leftToTick(err)
	}
	if err := e.repo.FinishExpiration(ctx, id); err != nil {
		return leftToTick(err)
	}
	e.logger.InfoContext(ctx, "dataset expiration executed", slog.String("expiration_id", id))
	return nil
}

// leftToTick marks a refusal of the domain with ErrLeftToTick.
func leftToTick(err error) error {
	switch catalog.ErrorCode(err) {
	case "", catalog.EINTERNAL, catalog.EUNAVAILABLE:
		return err
	}
	return fmt.Errorf("%w: %w", ErrLeftToTick, err)
}
