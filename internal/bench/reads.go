package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// readEndpoints are the endpoints apiReads measures, by name and path prefix.
var readEndpoints = []struct{ name, prefix string }{{"GET /ttl/{id}", "/ttl/"}, {"GET /dataSets/{id}", "/dataSets/"}}

// readMeasure is one endpoint measured at one number of connections.
type readMeasure struct {
	endpoint string
	conns    int
	stats    latencyStats
	err      error // the first failed request, if any: measured all the same
}

// apiReads measures GET /ttl/{id} and GET /dataSets/{id} with clients in a closed loop, one keep-alive connection
// each: with APILatencyConns clients for the latency goal (p99 < 20 ms), and with APIConns for the throughput goal
// (at least 40% of pgbench -S, a bare primary-key read, with as many clients on the same server).
func (h *harness) apiReads(ctx context.Context) error {
	cfg := h.cfg
	api, err := h.client(orgMain)
	if err != nil {
		return err
	}
	api = api.forLoad()
	// Warm up the connections and the service's pool.
	warm := startLoad(ctx, cfg.APIConns, func(ctx context.Context, c, i int) (int, error) {
		return 0, api.get(ctx, "/ttl/"+h.pickRead(c, i, cfg.APIConns))
	})
	if err := sleepCtx(ctx, warmUp(cfg.APIDuration)); err != nil {
		_, _ = warm.stop()
		return err
	}
	if _, err := warm.stop(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	var measures []readMeasure
	for _, conns := range []int{cfg.APILatencyConns, cfg.APIConns} {
		for _, e := range readEndpoints {
			m, err := h.measureRead(ctx, api, e.name, e.prefix, conns)
			if err != nil {
				return err
			}
			measures = append(measures, m)
		}
	}

	h.step("API reads: pgbench -S")
	samples, pgNote, pgErr := h.pgbench(ctx)
	var errs []error
	for _, m := range measures {
		if m.conns == cfg.APIConns {
			h.report.add(h.throughputRow(m, samples, pgNote, pgErr))
		} else {
			h.report.add(h.latencyRow(m))
		}
		if m.err != nil {
			errs = append(errs, fmt.Errorf("%s, %d connections: %w", m.endpoint, m.conns, m.err))
		}
	}
	return errors.Join(append(errs, pgErr)...)
}

// pickRead spreads the clients' requests over the datasets.
func (h *harness) pickRead(c, i, conns int) string { return h.mainIDs[(c+i*conns)%len(h.mainIDs)] }

// measureRead reads the endpoint with conns clients for APIDuration. Failed requests do not end the measurement:
// they are part of its figure, and the next measurement still runs.
func (h *harness) measureRead(ctx context.Context, api *apiClient, name, prefix string, conns int) (readMeasure, error) {
	h.step("API reads: %s, %d connections, %v", name, conns, h.cfg.APIDuration)
	l := startLoad(ctx, conns, func(ctx context.Context, c, i int) (int, error) {
		return 0, api.get(ctx, prefix+h.pickRead(c, i, conns))
	})
	from := time.Now()
	// A second short of the window, so that the profile ends before the load does.
	profiled := h.profile(ctx, fmt.Sprintf("%s-%d.pprof", strings.Trim(prefix, "/"), conns), conns == h.cfg.APIConns, h.cfg.APIDuration-time.Second)
	if err := sleepCtx(ctx, h.cfg.APIDuration); err != nil {
		_, _ = l.stop()
		return readMeasure{}, err
	}
	to := time.Now()
	samples, err := l.stop()
	if perr := <-profiled; perr != nil {
		return readMeasure{}, perr
	}
	return readMeasure{endpoint: name, conns: conns, stats: latencies(samples, from, to), err: err}, nil
}

// profile takes retentiond's CPU profile of the next d into CPUProfileDir/name when asked for and want holds; the
// channel answers when it is written.
func (h *harness) profile(ctx context.Context, name string, want bool, d time.Duration) <-chan error {
	done := make(chan error, 1)
	if h.cfg.CPUProfileDir == "" || !want {
		done <- nil
		return done
	}
	go func() {
		if err := os.MkdirAll(h.cfg.CPUProfileDir, 0o755); err != nil { //nolint:gosec // the folder the caller named
			done <- err
			return
		}
		done <- h.svc.cpuProfile(ctx, d, filepath.Join(h.cfg.CPUProfileDir, name))
	}()
	return done
}

// readNote says how a read was measured, and its failures if any.
func (h *harness) readNote(m readMeasure) string {
	note := fmt.Sprintf("Go load generator, %d clients in a closed loop for %v, each on its own keep-alive connection, over %d datasets: %s.",
		m.conns, h.cfg.APIDuration, len(h.mainIDs), m.stats)
	if m.err != nil {
		note += fmt.Sprintf(" FAILED REQUESTS: %d in the window (each bounded to %v); the first: %v.", m.stats.errors, loadRequestTimeout, m.err)
	}
	return note
}

// latencyRow reports a read at the latency goal's connections: p99 under 20 ms, without a failed request. The p99
// comes last, as in every row a cost curve reads its latency from.
func (h *harness) latencyRow(m readMeasure) Row {
	return Row{Scenario: ScenarioAPIReads, Metric: fmt.Sprintf("%s, %d connections", m.endpoint, m.conns),
		Ours: fmt.Sprintf("%s, p50 %s, p99 %s", fmtRate(m.stats.perSec, "req/s"), fmtDur(m.stats.p50), fmtDur(m.stats.p99)), Goal: "p99 < 20 ms",
		Holds: verdict(m.stats.p99 < 20*time.Millisecond && m.stats.errors == 0 && m.err == nil), Note: h.readNote(m)}
}

// throughputRow reports a read at the throughput goal's connections against pgbench -S with as many clients: at
// least 40% of its rate, without a failed request. The p99 is shown, not judged: on 2 cores, 64 closed-loop clients
// queue whatever each request costs. pgbench's samples must pass checkPgbench, else the row says why instead of
// judging.
func (h *harness) throughputRow(m readMeasure, samples []pgbenchSample, pgNote string, pgErr error) Row {
	row := Row{Scenario: ScenarioAPIReads, Metric: fmt.Sprintf("%s, %d connections", m.endpoint, m.conns),
		Ours: fmt.Sprintf("%s, p99 %s", fmtRate(m.stats.perSec, "req/s"), fmtDur(m.stats.p99)), Goal: "≥ 40% of pgbench -S",
		Note: h.readNote(m) + " Baseline: " + pgNote}
	if pgErr != nil {
		row.Baseline, row.Holds = "pgbench failed", Errored
		row.Note += fmt.Sprintf(" (%v)", pgErr)
		return row
	}
	tps := fastest(samples).TPS
	ratio := m.stats.perSec / tps
	row.Baseline, row.Ratio = fmtRate(tps, "TPS (pgbench -S)"), fmtPct(ratio)
	row.Holds = judge(ratio >= 0.4 && m.stats.errors == 0 && m.err == nil, checkPgbench(samples))
	return row
}

var (
	tpsPattern      = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	latencyPattern  = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	progressPattern = regexp.MustCompile(`(?m)^progress: [0-9.]+ s, ([0-9.]+) tps, lat ([0-9.]+) ms`)
)

// pgbenchSamples is how many times pgbench -S is measured, after a warm-up: its checks need two samples.
const pgbenchSamples = 2

// pgbench initializes a pgbench database on the same server, warms it up with one unmeasured pgbench -S, then runs
// the select-only script pgbenchSamples times with the API test's throughput clients (APIConns) for as long. The
// warm-up matters: pgbench -i writes its tables through COPY's and VACUUM's small ring buffers, so right after it
// the tables are not in shared_buffers, and a first run reads them from the kernel's cache, or from the disk when
// the kernel has evicted them (docs/benchmarks.md, "Why pgbench was slow").
func (h *harness) pgbench(ctx context.Context) ([]pgbenchSample, string, error) {
	cfg := h.cfg
	bin, err := h.pg.pgbenchPath()
	if err != nil {
		return nil, "", fmt.Errorf("pgbench not found: %w", err)
	}
	if err := h.pg.createDatabase(ctx, dbPgbench); err != nil {
		return nil, "", err
	}
	defer func() { _ = h.pg.dropDatabase(context.WithoutCancel(ctx), dbPgbench) }()
	url := h.pg.url(dbPgbench)
	if out, err := exec.CommandContext(ctx, bin, "-i", "-q", "-s", strconv.Itoa(cfg.PgbenchScale), url).CombinedOutput(); err != nil { //nolint:gosec // pgbench of the server
		return nil, "", fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	args, length := pgbenchArgs(cfg, url)
	var samples []pgbenchSample
	for i := 0; i <= pgbenchSamples; i++ {
		from := time.Now()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput() //nolint:gosec // pgbench of the server
		if err != nil {
			return nil, "", fmt.Errorf("pgbench -S: %w\n%s", err, out)
		}
		s, err := parsePgbench(out, cfg.APIConns)
		if err != nil {
			return nil, "", err
		}
		if i == 0 {
			h.step("API reads: pgbench -S warm-up: %s", s)
			continue
		}
		s.OtherCPU = h.noise.share(from, time.Now())
		h.step("API reads: pgbench -S sample %d: %s", i, s)
		samples = append(samples, s)
	}
	each := make([]string, len(samples))
	for i, s := range samples {
		each[i] = fmt.Sprintf("%d: %s (other processes %s of the CPU)", i+1, s, fmtPct(s.OtherCPU))
	}
	return samples, fmt.Sprintf("pgbench -S -c %d -j %d %s -P 1 on a scale-%d pgbench database of the same server, after one unmeasured run as a warm-up; "+
		"the faster of %d samples, %s.", cfg.APIConns, cfg.PgbenchJobs, length, cfg.PgbenchScale, len(samples), strings.Join(each, "; ")), nil
}

// parsePgbench reads a pgbench run's rate, its measured average latency and its progress lines.
func parsePgbench(out []byte, clients int) (pgbenchSample, error) {
	s := pgbenchSample{Clients: clients}
	m := tpsPattern.FindSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("pgbench -S printed no tps:\n%s", out)
	}
	var err error
	if s.TPS, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return s, err
	}
	if lm := latencyPattern.FindSubmatch(out); lm != nil {
		ms, err := strconv.ParseFloat(string(lm[1]), 64)
		if err != nil {
			return s, err
		}
		s.LatencyAvg = time.Duration(ms * float64(time.Millisecond))
	}
	for _, pm := range progressPattern.FindAllSubmatch(out, -1) {
		tps, err := strconv.ParseFloat(string(pm[1]), 64)
		if err != nil {
			return s, err
		}
		s.PerSecond = append(s.PerSecond, tps)
	}
	return s, nil
}

// fastest is the sample with the highest rate: the baseline a row is judged against, the strictest of them.
func fastest(samples []pgbenchSample) pgbenchSample {
	best := samples[0]
	for _, s := range samples[1:] {
		if s.TPS > best.TPS {
			best = s
		}
	}
	return best
}

// pgbenchArgs are the arguments of the select-only run, and how long it runs as they say it: -t N transactions per
// client when the config sets a floor of work, else -T for the API test's duration. -P 1 makes pgbench measure each
// transaction's latency (without it, its "latency average" is clients / TPS, which no check could catch) and print
// each second's rate.
func pgbenchArgs(cfg Config, url string) ([]string, string) {
	length := fmt.Sprintf("-T %d", int(math.Ceil(cfg.APIDuration.Seconds())))
	if cfg.PgbenchTransactions > 0 {
		length = fmt.Sprintf("-t %d", cfg.PgbenchTransactions)
	}
	args := append([]string{"-S", "-n", "-P", "1", "-c", strconv.Itoa(cfg.APIConns), "-j", strconv.Itoa(cfg.PgbenchJobs)}, strings.Fields(length)...)
	return append(args, url), length
}
