// Package jobs runs retention on a schedule: it turns cron slots into runs keyed by their slot, splits each run into
// per-dataset work that River spreads across replicas, and keeps the history and progress of runs.
package jobs

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/acme/retention/catalog"
)

// Default schedules: the data lake weekly (Sunday 03:00 UTC, as the seed's "evaluated and processed weekly"), the
// profile store daily, since its expiry is prompt.
const (
	DefaultLakeSchedule    = "0 3 * * 0"
	DefaultProfileSchedule = "0 4 * * *"
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

// Period estimates how far apart two slots are, from the next two after t; the overdue gauge uses it.
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
