package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/acme/retention/catalog"
)

// WorkOrderRepository carries out record-delete work orders (package postgres implements it). Each step locks the
// order and acts only from the state it expects, so any replica may repeat any step: each part's rows are removed
// once, with its Delete event.
type WorkOrderRepository interface {
	// DueWorkOrders returns up to limit open orders.
	DueWorkOrders(ctx context.Context, limit int) ([]string, error)
	// ValidateWorkOrder resolves a received order's datasets into parts, and returns the order's status after it.
	ValidateWorkOrder(ctx context.Context, id string) (catalog.WorkOrderStatus, error)
	// SubmitWorkOrder marks a validated order submitted.
	SubmitWorkOrder(ctx context.Context, id string) error
	// WaitingParts returns the datasets of the order's parts still to do.
	WaitingParts(ctx context.Context, id string) ([]string, error)
	// RunWorkOrderPass runs the order's next pass not yet done (an order of many identities), and reports whether
	// there was one.
	RunWorkOrderPass(ctx context.Context, id string) (ran bool, err error)
	// SettleWorkOrder completes the parts of an order removed in passes once every pass is done; more reports that
	// it planned passes first.
	SettleWorkOrder(ctx context.Context, id string) (more bool, err error)
	// RunWorkOrderPart removes the order's rows from one dataset; held reports a held dataset, left as it is.
	RunWorkOrderPart(ctx context.Context, id, datasetID string) (held bool, err error)
	// FinishWorkOrder completes an order whose parts are done, or marks it ingested while a held one waits.
	FinishWorkOrder(ctx context.Context, id string) (catalog.WorkOrderStatus, error)
}

// WorkOrderQueue puts one job per order on the job queue, at most one queued or running per order (package
// riverjobs implements it).
type WorkOrderQueue interface {
	EnqueueWorkOrders(ctx context.Context, ids []string) error
}

// StartingWorkOrders is the work-order service of the API: catalog.WorkOrderService, which also queues each order's
// job as soon as the order is stored, so that it starts at once rather than at the next tick
// (RETENTION_WORKORDER_INTERVAL, 10 s by default: most of a small order's time). The tick stays the safety net: an
// order whose queueing failed (logged, the order stored all the same) is queued by the next one, and the queue keeps
// one job per order whoever inserts it.
type StartingWorkOrders struct {
	catalog.WorkOrderService
	Queue  WorkOrderQueue
	Logger *slog.Logger // nil: discarded
}

// CreateWorkOrder stores the order (catalog.WorkOrderService.CreateWorkOrder), then queues its job.
func (s *StartingWorkOrders) CreateWorkOrder(ctx context.Context, c *catalog.Caller, create catalog.WorkOrderCreate) (*catalog.WorkOrder, error) {
	w, err := s.WorkOrderService.CreateWorkOrder(ctx, c, create)
	if err != nil {
		return nil, err
	}
	if err := s.Queue.EnqueueWorkOrders(ctx, []string{w.ID}); err != nil && s.Logger != nil {
		s.Logger.Warn("work order stored but not queued; the next tick queues it", slog.String("workorder_id", w.ID), slog.Any("error", err))
	}
	return w, nil
}

// WorkOrders orchestrates work orders: a periodic tick queues the open ones, and each one's job carries it forward.
type WorkOrders struct {
	repo   WorkOrderRepository
	logger *slog.Logger
}

// NewWorkOrders returns the orchestration of the orders kept in repo; logger may be nil.
func NewWorkOrders(repo WorkOrderRepository, logger *slog.Logger) *WorkOrders {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &WorkOrders{repo: repo, logger: logger}
}

// Tick queues a job for every open order. Every replica may call it: the queue keeps one job per order.
func (w *WorkOrders) Tick(ctx context.Context, queue WorkOrderQueue) error {
	ids, err := w.repo.DueWorkOrders(ctx, dueBatch)
	if err != nil || len(ids) == 0 {
		return err
	}
	return queue.EnqueueWorkOrders(ctx, ids)
}

// Execute carries an order forward, each step its own transaction so that its status shows it: validated, submitted,
// then one transaction per pass and the settlement (an order of many identities), then one per dataset left, then
// completed (or ingested while a held dataset waits, for the next tick).
// When ctx has less than half its time left after a pass or a part it returns ErrResume, so the job goes on in a new one: a
// replica killed anywhere leaves the order at a step the next Execute resumes from.
func (w *WorkOrders) Execute(ctx context.Context, id string) error {
	status, err := w.repo.ValidateWorkOrder(ctx, id)
	if err != nil || !status.Open() {
		return leftToTick(err)
	}
	if err := w.repo.SubmitWorkOrder(ctx, id); err != nil {
		return leftToTick(err)
	}
	start := time.Now()
	if err := w.runPasses(ctx, id, start); err != nil {
		return err
	}
	parts, err := w.repo.WaitingParts(ctx, id)
	if err != nil {
		return err
	}
	for _, ds := range parts {
		if _, err := w.repo.RunWorkOrderPart(ctx, id, ds); err != nil {
			return leftToTick(err)
		}
		if outOfTime(ctx, start) {
			return ErrResume
		}
	}
	status, err = w.repo.FinishWorkOrder(ctx, id)
	if err != nil {
		return leftToTick(err)
	}
	w.logger.InfoContext(ctx, "work order carried forward", slog.String("workorder_id", id), slog.String("status", string(status)))
	return nil
}

// runPasses runs the order's passes and settles it, until it is settled or ctx has less than half its time left
// (ErrResume).
func (w *WorkOrders) runPasses(ctx context.Context, id string, start time.Time) error {
	for {
		ran, err := w.repo.RunWorkOrderPass(ctx, id)
		if err != nil {
			return leftToTick(err)
		}
		if !ran {
			more, err := w.repo.SettleWorkOrder(ctx, id)
			if err != nil {
				return leftToTick(err)
			}
			if !more {
				return nil
			}
		}
		if outOfTime(ctx, start) {
			return ErrResume
		}
	}
}

// outOfTime reports whether ctx has less than half the time left it had at start.
func outOfTime(ctx context.Context, start time.Time) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < deadline.Sub(start)/2
}
