// Package jobs orchestrates retention runs: it turns cron slots into runs keyed by their slot, does each run's own
// part and splits the rest into per-dataset parts that the job queue spreads across replicas, and releases what the
// runs detached. It sees its adapters through ports: RunRepository and Sweeper (package postgres) and Queue
// (package riverjobs, which calls it back with each job); it imports neither River nor pgx.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/acme/retention/catalog"
)

// Schedule is a parsed cron schedule, evaluated in UTC.
type Schedule struct {
	Spec  string
	sched cron.Schedule
}

// ParseSchedule parses a standard 5-field cron expression (or a descriptor such as @daily). Every time is evaluated
// in UTC, so daylight-saving transitions never skip or repeat a slot.
func ParseSchedule(spec string) (Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("cron expression %q: %w", spec, err)
	}
	return Schedule{Spec: spec, sched: s}, nil
}

// Next returns the first slot strictly after t.
func (s Schedule) Next(t time.Time) time.Time { return s.sched.Next(t.UTC()) }

// maxCatchUp bounds how many missed slots DueSlot walks over; beyond it the latest due slot is found by stepping
// from further back.
const maxCatchUp = 100_000

// DueSlot returns the latest slot after last that is due at now (at or before it), and whether there is one. Slots
// missed while nothing ran collapse into this one, so a long outage is caught up by a single run.
func (s Schedule) DueSlot(last, now time.Time) (time.Time, bool) {
	var due time.Time
	for i, t := 0, s.Next(last); !t.After(now) && i < maxCatchUp; i, t = i+1, s.Next(t) {
		due = t
	}
	return due, !due.IsZero()
}

// Period estimates how far apart two slots are, from the next two after t; OverdueCutoff uses it.
func (s Schedule) Period(t time.Time) time.Duration {
	a := s.Next(t)
	return s.Next(a).Sub(a)
}

// Schedules holds the schedule of each store.
type Schedules map[catalog.Store]Schedule

// NextRun returns when the store's next scheduled run is due after now; nil for a store without a schedule.
func (s Schedules) NextRun(store catalog.Store, now time.Time) *time.Time {
	sched, ok := s[store]
	if !ok {
		return nil
	}
	t := sched.Next(now)
	return &t
}

// Specs returns the cron expression of each store's schedule, as configured.
func (s Schedules) Specs() map[catalog.Store]string {
	specs := make(map[catalog.Store]string, len(s))
	for store, sched := range s {
		specs[store] = sched.Spec
	}
	return specs
}

// OverdueCutoff is the rule of the overdue gauge: a dataset of the store is overdue at now when its last successful
// run finished before the cutoff, two periods of the store's schedule ago. One period late is a run that is still
// in progress, or a slot skipped while the previous run finished; two is a schedule that is not being kept.
func (s Schedule) OverdueCutoff(now time.Time) time.Time { return now.Add(-2 * s.Period(now)) }

// OverdueCounter counts the datasets of a store with rows whose last successful run finished before cutoff
// (postgres.RunRepository.Overdue).
type OverdueCounter func(ctx context.Context, store catalog.Store, cutoff time.Time) (int, error)

// OverdueGauge returns the function the retention_datasets_overdue gauge reads at every scrape (NewMetrics): the
// store's overdue datasets under its schedule's OverdueCutoff at now(). A scrape waits at most 5 s; an error is
// logged and counts 0.
func OverdueGauge(store catalog.Store, sched Schedule, count OverdueCounter, now func() time.Time, logger *slog.Logger) func() float64 {
	return func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := count(ctx, store, sched.OverdueCutoff(now()))
		if err != nil {
			logger.Warn("overdue gauge", slog.Any("error", err))
		}
		return float64(n)
	}
}
