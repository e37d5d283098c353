package jobs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/acme/retention/catalog"
)

// Metrics are the Prometheus metrics of retention runs.
type Metrics struct {
	rowsDeleted       *prometheus.CounterVec
	partitionsDropped *prometheus.CounterVec
	lastSuccess       *prometheus.GaugeVec
	datasetsDone      *prometheus.CounterVec
	runs              *prometheus.CounterVec
	runDuration       *prometheus.HistogramVec
}

// NewMetrics registers the retention metrics with reg (nil: not registered, as in tests). overdue, when set, is
// read at every scrape: the number of datasets whose last successful run is older than their schedule allows.
func NewMetrics(reg prometheus.Registerer, overdue func() float64) *Metrics {
	m := &Metrics{
		rowsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_rows_deleted_total", Help: "Rows removed by retention runs, by store.",
		}, []string{"store"}),
		partitionsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_partitions_dropped_total", Help: "Partitions dropped whole by retention runs, by store.",
		}, []string{"store"}),
		// By store only: /metrics is served without authentication, so no label may name a tenant's dataset. A
		// dataset's own last success is its rowExpiration.lastCompleted, which its org reads through the API.
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retention_last_success_timestamp_seconds", Help: "When a run last finished a dataset's part of the store successfully, on this replica.",
		}, []string{"store"}),
		datasetsDone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_run_datasets_total", Help: "Datasets' parts of runs finished, by store and status.",
		}, []string{"store", "status"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_runs_total", Help: "Retention runs ended, by store and final status.",
		}, []string{"store", "status"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "retention_run_duration_seconds", Help: "Wall time of retention runs, from start to their last dataset.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16),
		}, []string{"store"}),
	}
	if reg != nil {
		reg.MustRegister(m.rowsDeleted, m.partitionsDropped, m.lastSuccess, m.datasetsDone, m.runs, m.runDuration)
		if overdue != nil {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "retention_datasets_overdue", Help: "Datasets whose last successful run is older than their schedule allows.",
			}, overdue))
		}
	}
	return m
}

func (m *Metrics) removed(store catalog.Store, rows int64, partitions int) {
	if m == nil {
		return
	}
	m.rowsDeleted.WithLabelValues(string(store)).Add(float64(rows))
	m.partitionsDropped.WithLabelValues(string(store)).Add(float64(partitions))
}

func (m *Metrics) datasetDone(store catalog.Store, ok bool, now time.Time) {
	if m == nil {
		return
	}
	status := catalog.StatusSucceeded
	if !ok {
		status = catalog.StatusFailed
	}
	m.datasetsDone.WithLabelValues(string(store), status).Inc()
	if ok {
		m.lastSuccess.WithLabelValues(string(store)).Set(float64(now.Unix()))
	}
}

// runEnded counts a finished run; end is nil while the run still has parts to do.
func (m *Metrics) runEnded(store catalog.Store, end *catalog.RunEnd) {
	if m == nil || end == nil {
		return
	}
	m.runs.WithLabelValues(string(store), end.Status).Inc()
	m.runDuration.WithLabelValues(string(store)).Observe(end.Duration.Seconds())
}
