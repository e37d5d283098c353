package bench

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The smoke run gives pgbench a floor of work, not of time: with -T 1 and 16 clients, a busy machine could end the
// second before any client completed a transaction, and pgbench then prints no rate. The full run keeps its time.
func TestPgbenchArgs(t *testing.T) {
	t.Parallel()
	t.Run("SmokeRunsTransactions", func(t *testing.T) {
		t.Parallel()
		args, length := pgbenchArgs(SmokeConfig(), "postgres://x/pgbench")
		require.Equal(t, []string{"-S", "-n", "-P", "1", "-c", "16", "-j", "2", "-t", "50", "postgres://x/pgbench"}, args)
		require.Equal(t, "-t 50", length)
		require.NotContains(t, args, "-T")
	})
	t.Run("FullRunsForTheAPIDuration", func(t *testing.T) {
		t.Parallel()
		cfg := DefaultConfig()
		args, length := pgbenchArgs(cfg, "u")
		require.Equal(t, "-T 10", length)
		require.False(t, slices.Contains(args, "-t"))
		cfg.APIDuration = 1500 * time.Millisecond
		_, length = pgbenchArgs(cfg, "u")
		require.Equal(t, "-T 2", length, "whole seconds, rounded up")
	})
	t.Run("FlagSetsTheFloor", func(t *testing.T) {
		t.Parallel()
		cfg, err := ParseFlags([]string{"-pgbench-transactions", "7"}, nil)
		require.NoError(t, err)
		_, length := pgbenchArgs(cfg, "u")
		require.Equal(t, "-t 7", length)
		_, err = ParseFlags([]string{"-pgbench-transactions", "-1"}, nil)
		require.ErrorContains(t, err, "-pgbench-transactions")
	})
}

// The latency rows judge the p99 alone; the throughput rows judge the share of pgbench -S alone, their p99 shown but
// not judged; a failed request fails either.
func TestReadRows(t *testing.T) {
	t.Parallel()
	h := &harness{cfg: DefaultConfig(), mainIDs: []string{"a", "b"}}
	at := func(conns int, rate float64, p99 time.Duration, failed int) readMeasure {
		return readMeasure{endpoint: "GET /ttl/{id}", conns: conns, stats: latencyStats{n: 100, errors: failed, perSec: rate, p50: p99 / 2, p99: p99, max: p99}}
	}
	t.Run("LatencyJudgesTheP99", func(t *testing.T) {
		t.Parallel()
		row := h.latencyRow(at(16, 100, 19*time.Millisecond, 0))
		require.Equal(t, Holds, row.Holds)
		require.Equal(t, "p99 < 20 ms", row.Goal)
		require.Equal(t, "GET /ttl/{id}, 16 connections", row.Metric)
		require.Equal(t, "100 req/s, p50 9.5 ms, p99 19 ms", row.Ours)
		require.Equal(t, Fails, h.latencyRow(at(16, 10_000, 20*time.Millisecond, 0)).Holds)
		require.Equal(t, Fails, h.latencyRow(at(16, 100, time.Millisecond, 1)).Holds)
	})
	t.Run("ThroughputJudgesTheShareOfPgbench", func(t *testing.T) {
		t.Parallel()
		pg := []pgbenchSample{steadyPgbench(900), steadyPgbench(1000)}
		row := h.throughputRow(at(64, 400, 900*time.Millisecond, 0), pg, "pgbench -S", nil)
		require.Equal(t, Holds, row.Holds, "a p99 of 900 ms does not fail the throughput goal")
		require.Equal(t, "≥ 40% of pgbench -S", row.Goal)
		require.Equal(t, "40%", row.Ratio, "against the faster sample")
		require.Equal(t, "1,000 TPS (pgbench -S)", row.Baseline)
		require.Equal(t, Fails, h.throughputRow(at(64, 399, time.Millisecond, 0), pg, "pgbench -S", nil).Holds)
		require.Equal(t, Fails, h.throughputRow(at(64, 900, time.Millisecond, 1), pg, "pgbench -S", nil).Holds)
		require.Equal(t, Errored, h.throughputRow(at(64, 900, time.Millisecond, 0), nil, "", errors.New("no pgbench")).Holds)
	})
	t.Run("InvalidBaselineIsNotJudged", func(t *testing.T) {
		t.Parallel()
		// Issue #29's run: 2,322 TPS beside a second sample at 30,578.
		pg := []pgbenchSample{steadyPgbench(2322), steadyPgbench(30578)}
		row := h.throughputRow(at(64, 3541, 42*time.Millisecond, 0), pg, "pgbench -S", nil)
		require.True(t, row.Holds.Invalid(), row.Holds)
		require.Contains(t, string(row.Holds), "samples disagree")
		row = h.throughputRow(at(64, 100, 42*time.Millisecond, 0), pg, "pgbench -S", nil)
		require.True(t, row.Holds.Invalid(), "a goal missed is not judged either: %s", row.Holds)
	})
	t.Run("FlagSetsTheLatencyConnections", func(t *testing.T) {
		t.Parallel()
		cfg, err := ParseFlags([]string{"-api-latency-conns", "8"}, nil)
		require.NoError(t, err)
		require.Equal(t, 8, cfg.APILatencyConns)
		require.Equal(t, 64, cfg.APIConns)
		_, err = ParseFlags([]string{"-api-latency-conns", "0"}, nil)
		require.ErrorContains(t, err, "-api-latency-conns")
	})
}
