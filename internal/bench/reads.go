package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// apiReads measures GET /ttl/{id} and GET /dataSets/{id} with APIConns clients in a closed loop, one keep-alive
// connection each, against pgbench -S (a bare primary-key read) with as many clients on the same server.
func (h *harness) apiReads(ctx context.Context) error {
	cfg := h.cfg
	api, err := h.client(orgMain)
	if err != nil {
		return err
	}
	api = api.forLoad()
	pick := func(c, i int) string { return h.mainIDs[(c+i*cfg.APIConns)%len(h.mainIDs)] }
	// Warm up the connections and the service's pool.
	warm := startLoad(ctx, cfg.APIConns, func(ctx context.Context, c, i int) (int, error) { return 0, api.get(ctx, "/ttl/"+pick(c, i)) })
	if err := sleepCtx(ctx, warmUp(cfg.APIDuration)); err != nil {
		_, _ = warm.stop()
		return err
	}
	if _, err := warm.stop(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	type endpoint struct{ name, prefix string }
	stats := map[string]latencyStats{}
	failures := map[string]error{}
	for _, e := range []endpoint{{"GET /ttl/{id}", "/ttl/"}, {"GET /dataSets/{id}", "/dataSets/"}} {
		h.step("API reads: %s, %d connections, %v", e.name, cfg.APIConns, cfg.APIDuration)
		l := startLoad(ctx, cfg.APIConns, func(ctx context.Context, c, i int) (int, error) { return 0, api.get(ctx, e.prefix+pick(c, i)) })
		from := time.Now()
		if err := sleepCtx(ctx, cfg.APIDuration); err != nil {
			_, _ = l.stop()
			return err
		}
		to := time.Now()
		samples, err := l.stop()
		stats[e.name] = latencies(samples, from, to)
		if err != nil {
			// Measured all the same: the failures are part of the figure, and the next endpoint still runs.
			failures[e.name] = err
		}
	}

	h.step("API reads: pgbench -S")
	tps, pgNote, pgErr := h.pgbench(ctx)
	for _, name := range []string{"GET /ttl/{id}", "GET /dataSets/{id}"} {
		st := stats[name]
		failed := ""
		if err := failures[name]; err != nil {
			failed = fmt.Sprintf(" FAILED REQUESTS: %d in the window (each bounded to %v); the first: %v.", st.errors, loadRequestTimeout, err)
		}
		row := Row{Scenario: ScenarioAPIReads, Metric: fmt.Sprintf("%s, %d connections", name, cfg.APIConns),
			Ours: fmt.Sprintf("%s, p99 %s", fmtRate(st.perSec, "req/s"), fmtDur(st.p99)), Goal: "≥ 40% of pgbench; p99 < 20 ms",
			Note: fmt.Sprintf("Go load generator, %d clients in a closed loop for %v, each on its own keep-alive connection, over %d datasets: %s. Baseline: %s",
				cfg.APIConns, cfg.APIDuration, len(h.mainIDs), st, pgNote) + failed}
		if pgErr != nil {
			row.Baseline, row.Holds = "pgbench failed", Errored
			row.Note += fmt.Sprintf(" (%v)", pgErr)
		} else {
			ratio := st.perSec / tps
			row.Baseline, row.Ratio = fmtRate(tps, "TPS (pgbench -S)"), fmtPct(ratio)
			row.Holds = verdict(ratio >= 0.4 && st.p99 < 20*time.Millisecond && st.errors == 0)
		}
		if failures[name] != nil {
			row.Holds = Fails
		}
		h.report.add(row)
	}
	var errs []error
	for _, name := range []string{"GET /ttl/{id}", "GET /dataSets/{id}"} {
		if err := failures[name]; err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(append(errs, pgErr)...)
}

var tpsPattern = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench initializes a pgbench database on the same server and runs the select-only script with the API test's
// number of clients for as long.
func (h *harness) pgbench(ctx context.Context) (float64, string, error) {
	cfg := h.cfg
	bin, err := h.pg.pgbenchPath()
	if err != nil {
		return 0, "", fmt.Errorf("pgbench not found: %w", err)
	}
	if err := h.pg.createDatabase(ctx, dbPgbench); err != nil {
		return 0, "", err
	}
	defer func() { _ = h.pg.dropDatabase(context.WithoutCancel(ctx), dbPgbench) }()
	url := h.pg.url(dbPgbench)
	if out, err := exec.CommandContext(ctx, bin, "-i", "-q", "-s", strconv.Itoa(cfg.PgbenchScale), url).CombinedOutput(); err != nil { //nolint:gosec // pgbench of the server
		return 0, "", fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	args, length := pgbenchArgs(cfg, url)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput() //nolint:gosec // pgbench of the server
	if err != nil {
		return 0, "", fmt.Errorf("pgbench -S: %w\n%s", err, out)
	}
	m := tpsPattern.FindSubmatch(out)
	if m == nil {
		return 0, "", fmt.Errorf("pgbench -S printed no tps:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, "", err
	}
	lat := ""
	if lm := regexp.MustCompile(`latency average = ([0-9.]+ ms)`).FindSubmatch(out); lm != nil {
		lat = ", latency average " + string(lm[1])
	}
	return tps, fmt.Sprintf("pgbench -S -c %d -j %d %s on a scale-%d pgbench database of the same server: %s TPS%s.",
		cfg.APIConns, cfg.PgbenchJobs, length, cfg.PgbenchScale, fmtInt(int64(tps)), lat), nil
}

// pgbenchArgs are the arguments of the select-only run, and how long it runs as they say it: -t N transactions per
// client when the config sets a floor of work, else -T for the API test's duration.
func pgbenchArgs(cfg Config, url string) ([]string, string) {
	length := fmt.Sprintf("-T %d", int(math.Ceil(cfg.APIDuration.Seconds())))
	if cfg.PgbenchTransactions > 0 {
		length = fmt.Sprintf("-t %d", cfg.PgbenchTransactions)
	}
	args := append([]string{"-S", "-n", "-c", strconv.Itoa(cfg.APIConns), "-j", strconv.Itoa(cfg.PgbenchJobs)}, strings.Fields(length)...)
	return append(args, url), length
}
