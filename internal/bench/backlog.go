package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// backlogRounds is how many times the expired-backlog scenario measures each of its figures, interleaved.
func (h *harness) backlogRounds() int {
	if h.cfg.Smoke {
		return 20
	}
	return 400
}

// backlogWarmUp is how many times each statement runs before the rounds measure it.
const backlogWarmUp = 10

// backlogScrapeEvery is how often a replica runs the backlog's statement at most (postgres.BacklogCollector reuses
// a reading for 10 s, whatever the scrape rate).
const backlogScrapeEvery = 10 * time.Second

// expiredBacklog measures, in one run and interleaved round by round on the service's database, what the expired
// backlog costs (README, "How far behind deletion is"):
//   - the API: GET /dataSets/{id}'s statement with its backlog and without (postgres.DatasetReadStatements), their
//     difference set against the whole request, timed over HTTP in the same rounds;
//   - a run: the service-wide statement of /metrics (ServiceBacklog), at most one per 10 s on a replica, as a share
//     of one connection's time. It reads counters only and takes no lock a run's statements wait for (runs update
//     the counters beside it under MVCC, and drop partitions of the stores' tables, which it never reads).
func (h *harness) expiredBacklog(ctx context.Context) error {
	api, err := h.client(orgMain)
	if err != nil {
		return err
	}
	// The service's own session settings (postgres.Open: jit off), on one connection for both statements.
	db, err := postgres.Open(ctx, h.pg.url(dbLoad), nil)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	with, without := postgres.DatasetReadStatements()
	// Warm both as the service's connections are warm: past Postgres' five custom plans of a prepared statement,
	// which would otherwise make the rounds measure planning (tens of milliseconds for these statements on a loaded
	// machine) rather than the work.
	for i := range 2 * backlogWarmUp {
		stmt := with
		if i%2 == 1 {
			stmt = without
		}
		if _, err := conn.Exec(ctx, stmt, orgMain, "prod", h.mainIDs[i%len(h.mainIDs)], time.Now().UTC()); err != nil {
			return err
		}
	}
	var withDur, withoutDur, request, service []time.Duration
	var expired int64
	for i := range h.backlogRounds() {
		id := h.mainIDs[i%len(h.mainIDs)]
		now := time.Now().UTC()
		run := func(stmt string, into *[]time.Duration) error {
			d, err := timed(func() error {
				_, err := conn.Exec(ctx, stmt, orgMain, "prod", id, now)
				return err
			})
			*into = append(*into, d)
			return err
		}
		// Alternate the order, so that neither statement always finds the other's pages warm.
		first, second := func() error { return run(with, &withDur) }, func() error { return run(without, &withoutDur) }
		if i%2 == 1 {
			first, second = second, first
		}
		d, getErr := timed(func() error { return api.get(ctx, "/dataSets/"+id) })
		request = append(request, d)
		var backlog []postgres.StoreBacklog
		s, svcErr := timed(func() error {
			var err error
			backlog, err = db.ServiceBacklog(ctx, now, retention.Period{Days: 30})
			return err
		})
		service = append(service, s)
		if err := errors.Join(first(), second(), getErr, svcErr); err != nil {
			return err
		}
		expired = 0
		for _, b := range backlog {
			expired += b.Rows
		}
	}
	added := median(withDur) - median(withoutDur)
	share := float64(max(added, 0)) / float64(median(request))
	h.report.add(Row{Scenario: ScenarioBacklog, Metric: "GET /dataSets/{id}: the backlog's part of the request",
		Ours:     fmt.Sprintf("+%s (statement %s with, %s without)", fmtDur(max(added, 0)), fmtDur(median(withDur)), fmtDur(median(withoutDur))),
		Baseline: "request p50 " + fmtDur(median(request)), Ratio: fmtPct(share), Goal: "< 5% of the request", Holds: verdict(share < 0.05),
		Note: fmt.Sprintf("medians of %d interleaved rounds, one dataset each, on the run-under-load database", len(request))})
	runShare := float64(median(service)) / float64(backlogScrapeEvery)
	h.report.add(Row{Scenario: ScenarioBacklog, Metric: "/metrics: the service's backlog statement, at most once in 10 s",
		Ours: fmtDur(median(service)), Baseline: "10 s of one connection", Ratio: fmtPct(runShare), Goal: "< 1% of a connection", Holds: verdict(runShare < 0.01),
		Note: fmt.Sprintf("median of %d rounds; %s expired rows counted; it reads counters only and no run's statement waits for it", len(service), fmtInt(expired))})
	return nil
}

// median returns the middle of the durations (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
