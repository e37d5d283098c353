package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/acme/retention/internal/cells"
)

// routingSamples is how many times each of the two ways is measured, alternately, so that a drift of the machine
// (another process, the kernel's caches) weighs on both alike.
const routingSamples = 2

// cellRouting measures what routing through the cells' proxy costs: GET /ttl/{id} with APILatencyConns clients
// (16: the figure) straight to retentiond and through HAProxy on the shipped configuration
// (deploy/cells/haproxy.cfg, the org placed by the map), alternately, routingSamples times each. Both cells of the
// configuration are this one retentiond: what is measured is the proxy's hop and its routing by the org header.
// HAProxy runs on the same two cores as the service, the database and the load generator, so its CPU is taken
// from them: the ratio is that of this machine, not of a proxy on a host of its own.
func (h *harness) cellRouting(ctx context.Context) error {
	dir := filepath.Join(h.work, "cells")
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // the harness's own folder
		return err
	}
	mapFile := filepath.Join(dir, "orgs.map")
	if err := os.WriteFile(mapFile, []byte(orgMain+" a\n"), 0o600); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(h.work, "haproxy.log"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	addr := strings.TrimPrefix(h.svc.base, "http://")
	proxy, err := cells.StartProxy(ctx, cells.ProxyConfig{
		ConfigFile: filepath.Join(h.root, "deploy", "cells", "haproxy.cfg"), Default: "b", MapFile: mapFile, Log: log,
		Cells: map[string]string{"a": addr, "b": addr},
	})
	if err != nil {
		return fmt.Errorf("start haproxy: %w", err)
	}
	defer func() { _ = proxy.Stop() }()
	direct, err := h.client(orgMain)
	if err != nil {
		return err
	}
	routed, err := newAPIClient("http://"+proxy.Addr, h.secret, orgMain)
	if err != nil {
		return err
	}
	direct, routed = direct.forLoad(), routed.forLoad()
	conns := h.cfg.APILatencyConns
	var ways [2][]readMeasure
	for range routingSamples {
		for i, api := range []*apiClient{direct, routed} {
			name := []string{"GET /ttl/{id} direct", "GET /ttl/{id} through HAProxy"}[i]
			m, err := h.measureRead(ctx, api, name, "/ttl/", conns)
			if err != nil {
				return err
			}
			ways[i] = append(ways[i], m)
		}
	}
	row := routingRow(ways[0], ways[1], conns, h.cfg.APIDuration.String())
	h.report.add(row)
	var errs []error
	for _, ms := range ways {
		for _, m := range ms {
			if m.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.endpoint, m.err))
			}
		}
	}
	return errors.Join(errs...)
}

// routingRow judges the routed rate against the direct one, each the mean of its samples: at least 80%, without a
// failed request. Two direct samples more than 1.5 times apart make the baseline invalid: the machine changed
// under the measurement.
func routingRow(direct, routed []readMeasure, conns int, window string) Row {
	mean := func(ms []readMeasure) (rate float64, failed int, p99s []string) {
		for _, m := range ms {
			rate += m.stats.perSec / float64(len(ms))
			failed += m.stats.errors
			if m.err != nil {
				failed++
			}
			p99s = append(p99s, fmtDur(m.stats.p99))
		}
		return rate, failed, p99s
	}
	dRate, dFailed, dP99 := mean(direct)
	rRate, rFailed, rP99 := mean(routed)
	invalid := ""
	lo, hi := direct[0].stats.perSec, direct[0].stats.perSec
	for _, m := range direct {
		lo, hi = min(lo, m.stats.perSec), max(hi, m.stats.perSec)
	}
	if lo <= 0 || hi/lo > 1.5 {
		invalid = fmt.Sprintf("the direct samples are %s and %s, more than 1.5 times apart", fmtRate(lo, "req/s"), fmtRate(hi, "req/s"))
	}
	row := Row{Scenario: ScenarioCellRouting, Metric: fmt.Sprintf("GET /ttl/{id} through HAProxy, %d connections", conns),
		Ours: fmt.Sprintf("%s, p99 %s", fmtRate(rRate, "req/s"), strings.Join(rP99, "/")), Baseline: fmt.Sprintf("%s direct, p99 %s", fmtRate(dRate, "req/s"), strings.Join(dP99, "/")),
		Goal: "≥ 80% of direct",
		Note: fmt.Sprintf("Go load generator, %d clients in a closed loop, each on its own keep-alive connection, %d windows of %s each way, alternately (direct first); "+
			"HAProxy on deploy/cells/haproxy.cfg with both cells this retentiond, on the same cores as the service; %d and %d failed requests.",
			conns, len(direct), window, dFailed, rFailed)}
	if dRate > 0 {
		row.Ratio = fmtPct(rRate / dRate)
	}
	row.Holds = judge(dRate > 0 && rRate/dRate >= 0.8 && dFailed == 0 && rFailed == 0, invalid)
	return row
}
