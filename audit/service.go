package audit

import (
	"context"
	"log/slog"
	"time"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// Page is one page of a query's events, with the total it belongs to.
type Page struct {
	Events []*Event
	// Total counts the events matching the query, up to TotalCap; TotalCapped says there are more than that, and
	// TotalEstimated that Total is the database's estimate rather than a count (counting would have taken too long).
	Total          int
	TotalCapped    bool
	TotalEstimated bool
	// More says events follow this page.
	More bool
}

// Service reads the audit log. Every method works in the caller's org; the event reads also only in the caller's
// sandbox.
type Service interface {
	// FindEvents returns the page of q's events at q.Start.
	FindEvents(ctx context.Context, c *catalog.Caller, q Query) (*Page, error)
	// ExportEvents calls fn with the events of q from the last ExportWindow, page after page in q's order, ignoring
	// q.Start and q.Limit; together the pages are the events as they were when the export started. A page is read
	// whole and its database connection released before fn is called, so a slow fn (a client that reads slowly or
	// not at all) holds no connection, and only one page is held at a time. An error from fn stops the export and is
	// returned.
	ExportEvents(ctx context.Context, c *catalog.Caller, q Query, fn func([]*Event) error) error
	// VerifyChain walks the caller's org's chain (all its sandboxes: the chain is per org) and reports whether it is
	// intact and, if not, where it first breaks, as the caller's sandbox may see it: its own events counted, and
	// nothing of another sandbox's events but the seq and reason of a break (Verifier.ScopeTo).
	VerifyChain(ctx context.Context, c *catalog.Caller) (*Verification, error)
}

// PurgeResult is what one pass of the audit retention removed.
type PurgeResult struct {
	Orgs    int   // orgs that lost events
	Removed int64 // events removed
}

// Purger removes audit events older than a cutoff, moving each org's chain anchor to its first kept event and
// recording the removal, so the chain stays verifiable and the removal visible.
type Purger interface {
	PurgeBefore(ctx context.Context, before time.Time) (PurgeResult, error)
}

// DefaultKeep is how long audit events are kept, as Adobe keeps them: 365 days.
var DefaultKeep = retention.Period{Days: 365}

// Retention is the audit log's own retention: each pass removes the events older than Keep. A periodic job runs
// Purge (riverjobs), so one replica purges per period; a pass that runs beside another is harmless too, since each
// is idempotent and orgs are purged under their chain lock.
type Retention struct {
	Purger Purger
	Keep   retention.Period
	Now    func() time.Time
	Logger *slog.Logger
}

// Purge is one pass of the periodic job: PurgeOnce, with a failure logged as well as returned for the job's retry.
func (r *Retention) Purge(ctx context.Context) error {
	if _, err := r.PurgeOnce(ctx); err != nil {
		if ctx.Err() == nil {
			r.logger().ErrorContext(ctx, "audit retention failed", slog.Any("error", err))
		}
		return err
	}
	return nil
}

// PurgeOnce removes the events older than Keep, as of now.
func (r *Retention) PurgeOnce(ctx context.Context) (PurgeResult, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	keep := r.Keep
	if keep.IsZero() {
		keep = DefaultKeep
	}
	before := keep.SubtractFrom(now().UTC())
	res, err := r.Purger.PurgeBefore(ctx, before)
	if err != nil {
		return res, err
	}
	if res.Removed > 0 {
		r.logger().InfoContext(ctx, "audit retention removed old events", slog.Int64("events", res.Removed),
			slog.Int("orgs", res.Orgs), slog.Time("before", before))
	}
	return res, nil
}

func (r *Retention) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}
