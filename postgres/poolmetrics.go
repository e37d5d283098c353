package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolMetric is one series of a pool's statistics: its name, help, type and how to read it from pgxpool.Stat.
type poolMetric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(*pgxpool.Stat) float64
}

// poolMetrics are pgxpool.Stat's figures under names that follow Prometheus' conventions, as `promtool check
// metrics` checks them: counters end in _total, durations are in seconds. They replace IBM/pgxpoolprometheus,
// whose 13 series per pool (pgxpool_acquire_count, pgxpool_acquire_duration_ns, …) break those rules.
var poolMetrics = []poolMetric{
	{"pgxpool_acquires_total", "Successful acquires of a connection from the pool.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }},
	{"pgxpool_acquire_seconds_total", "Time spent in successful acquires from the pool.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }},
	{"pgxpool_canceled_acquires_total", "Acquires from the pool cancelled by their context.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }},
	{"pgxpool_empty_acquires_total", "Successful acquires that waited because the pool had no idle connection.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }},
	{"pgxpool_empty_acquire_wait_seconds_total", "Time successful acquires waited because the pool had no idle connection.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return s.EmptyAcquireWaitTime().Seconds() }},
	{"pgxpool_new_conns_total", "Connections opened.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return float64(s.NewConnsCount()) }},
	{"pgxpool_max_lifetime_destroys_total", "Connections closed because they outlived MaxConnLifetime.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return float64(s.MaxLifetimeDestroyCount()) }},
	{"pgxpool_max_idle_destroys_total", "Connections closed because they were idle longer than MaxConnIdleTime.", prometheus.CounterValue,
		func(s *pgxpool.Stat) float64 { return float64(s.MaxIdleDestroyCount()) }},
	{"pgxpool_acquired_conns", "Connections acquired now.", prometheus.GaugeValue,
		func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }},
	{"pgxpool_constructing_conns", "Connections being opened now.", prometheus.GaugeValue,
		func(s *pgxpool.Stat) float64 { return float64(s.ConstructingConns()) }},
	{"pgxpool_idle_conns", "Idle connections now.", prometheus.GaugeValue,
		func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }},
	{"pgxpool_max_conns", "The most connections the pool opens.", prometheus.GaugeValue,
		func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }},
	{"pgxpool_conns", "Connections in the pool now: acquired, idle and being opened.", prometheus.GaugeValue,
		func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }},
}

// poolCollector exports one pool's statistics, read at each scrape.
type poolCollector struct {
	pool  *pgxpool.Pool
	descs []*prometheus.Desc
}

// PoolCollector returns a Prometheus collector of the pool's statistics (poolMetrics), each series with labels.
func (db *DB) PoolCollector(labels prometheus.Labels) prometheus.Collector {
	c := &poolCollector{pool: db.Pool}
	for _, m := range poolMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, labels))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	stat := c.pool.Stat()
	for i, m := range poolMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(stat))
	}
}
