package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// The expired backlog: rows that have expired but are still stored, per dataset and store (GET /dataSets/{id}) and
// for the whole service (/metrics), read from the counters (row_stats) alone, never from the rows. A counter group
// is counted when every row of it has expired (groupExpiredCondition), so the figures are bucketed by partition: a
// month's rows count from the end of that month, and rows expired in the current month, or under a shorter TTL set
// since they were placed, are not counted until their month ends or a run removes them. Every row counted has
// expired; the rows not counted are the ones the counters cannot vouch for.

// withParam replaces the named parameter @at of a condition with a positional one, for statements that take
// positional arguments.
func withParam(cond, param string) string { return strings.ReplaceAll(cond, "@at", param) }

// datasetCounters is the LATERAL of datasetByIDQuery that reads one dataset's counters once for both its lake shares
// (metricsQuery's: partitions and row_counts, summed per partition) and its expired backlog at $4, per partition
// (bl_stores, bl_rows and the oldest groupExpiredBy in bl_since; backlogOf sums them per store). It probes the
// counters by dataset (row_stats_dataset_idx). A group's setting is read only where its partition's range has ended,
// since no other group can be wholly expired (groupExpiredCondition): the lateral's gate on p.upper_bound is a
// one-time filter, checked before the probe of ttl_settings' key, and the partitions that have ended are few. Read
// apart, with a join to the dataset's settings, the backlog cost the request 10% (docs/benchmarks.md).
var datasetCounters = `CROSS JOIN LATERAL (SELECT array_agg(s.partition_name) FILTER (WHERE s.store = 'adobe_lakeHouse') AS partitions,
    array_agg(s.rows) FILTER (WHERE s.store = 'adobe_lakeHouse') AS row_counts,
    array_agg(s.store) FILTER (WHERE s.expired IS NOT NULL) AS bl_stores,
    array_agg(s.expired) FILTER (WHERE s.expired IS NOT NULL) AS bl_rows,
    array_agg(s.since) FILTER (WHERE s.expired IS NOT NULL) AS bl_since
  FROM (SELECT st.partition_name, p.store, sum(st.row_count)::bigint AS rows,
      sum(st.row_count) FILTER (WHERE ` + withParam(groupExpiredCondition, "$4") + `)::bigint AS expired,
      min(` + withParam(groupExpiredBy, "$4") + `) FILTER (WHERE ` + withParam(groupExpiredCondition, "$4") + `) AS since
    FROM row_stats st JOIN row_partitions p ON p.name = st.partition_name
    LEFT JOIN LATERAL (SELECT h.ttl, h.effective_until FROM ttl_settings h
      WHERE h.dataset_id = st.dataset_id AND h.id = st.setting_id AND p.upper_bound <= $4 LIMIT 1) h ON true
    WHERE st.dataset_id = d.id AND st.row_count > 0
    GROUP BY 1, 2) s) m`

// datasetSharesOnly is datasetCounters without the backlog (bl_ columns empty): the lake shares as the read took them
// before it showed the backlog, for DatasetReadStatements.
var datasetSharesOnly = `CROSS JOIN LATERAL (SELECT array_agg(s.partition_name) AS partitions, array_agg(s.rows) AS row_counts,
    NULL::text[] AS bl_stores, NULL::bigint[] AS bl_rows, NULL::timestamptz[] AS bl_since
  FROM (SELECT st.partition_name, sum(st.row_count)::bigint AS rows ` + lakeShares + `
    AND st.dataset_id = d.id GROUP BY 1) s) m`

// backlogOf returns a dataset's backlog per store from datasetCounters' arrays, a partition each: the expired rows
// summed and the oldest time, with an empty backlog for every store it has no expired group in.
func backlogOf(stores []string, rows []int64, since []time.Time) map[catalog.Store]catalog.Backlog {
	out := map[catalog.Store]catalog.Backlog{}
	for _, store := range catalog.Stores {
		out[store] = catalog.Backlog{}
	}
	for i, store := range stores {
		b := out[catalog.Store(store)]
		b.ExpiredRows += rows[i]
		if t := since[i].UTC(); b.OldestExpiredAt == nil || t.Before(*b.OldestExpiredAt) {
			b.OldestExpiredAt = &t
		}
		out[catalog.Store(store)] = b
	}
	return out
}

// BacklogState says why expired rows are still stored, for the service-wide backlog: a run may delete them now,
// they are within the store's ingestion grace, or their dataset is under a legal hold.
type BacklogState string

// The states of expired rows, the values of the state label of /metrics' backlog series.
const (
	BacklogDeletable BacklogState = "deletable"
	BacklogGrace     BacklogState = "grace"
	BacklogHeld      BacklogState = "held"
)

// backlogStates are the states in the order /metrics lists them.
var backlogStates = []BacklogState{BacklogDeletable, BacklogGrace, BacklogHeld}

// StoreBacklog is the service's expired backlog of one store in one state: the rows, and the oldest time since which
// a group of them has been expired (for deletable rows: deletable, past the grace as well), nil when there are none.
type StoreBacklog struct {
	Store  catalog.Store
	State  BacklogState
	Rows   int64
	Oldest *time.Time
}

// serviceBacklogQuery reads the expired backlog of every store, by state, from the counters of the partitions whose
// range has ended (an index range of row_stats' key per partition: a store has a few hundred partitions at most) and
// of the deleted datasets (row_stats_dataset_idx), whose rows a run removes whatever their expiry, as expired since
// their deletion. Its cost follows the backlog's counter groups, not the rows, nor the live datasets' future
// partitions. @held are the datasets under an active hold, @lakeGrace the lake's ingestion grace (the profile store
// has none).
const serviceBacklogQuery = `
WITH grp AS (
  SELECT p.store, st.dataset_id, st.row_count, st.max_ingested_at, ` + groupExpiredBy + ` AS since
  FROM row_partitions p JOIN row_stats st ON st.partition_name = p.name
  JOIN datasets d ON d.id = st.dataset_id AND d.deleted_at IS NULL
  JOIN ttl_settings h ON h.dataset_id = st.dataset_id AND h.id = st.setting_id
  WHERE p.upper_bound <= @at AND st.row_count > 0 AND ` + groupExpiredCondition + `
  UNION ALL
  SELECT p.store, st.dataset_id, st.row_count, '-infinity'::timestamptz, d.deleted_at
  FROM datasets d JOIN row_stats st ON st.dataset_id = d.id
  JOIN row_partitions p ON p.name = st.partition_name
  WHERE d.deleted_at IS NOT NULL AND d.deleted_at <= @at AND st.row_count > 0),
judged AS (
  SELECT store, row_count, since,
    CASE WHEN dataset_id = ANY(@held::text[]) THEN 'held'
         WHEN max_ingested_at + CASE WHEN store = 'adobe_lakeHouse' THEN @lakeGrace::interval ELSE '0'::interval END <= @at
           THEN 'deletable' ELSE 'grace' END AS state,
    GREATEST(since, max_ingested_at + CASE WHEN store = 'adobe_lakeHouse' THEN @lakeGrace::interval ELSE '0'::interval END) AS deletable_since
  FROM grp)
SELECT store, state, sum(row_count)::bigint,
  CASE WHEN state = 'deletable' THEN min(deletable_since) ELSE min(since) END
FROM judged GROUP BY store, state`

// ServiceBacklog reads the expired backlog of every store and state at now (serviceBacklogQuery), with every
// (store, state) pair present, zero when it has no rows.
func (db *DB) ServiceBacklog(ctx context.Context, now time.Time, lakeGrace retention.Period) ([]StoreBacklog, error) {
	held, err := activeHoldDatasets(ctx, db.Pool)
	if err != nil {
		return nil, err
	}
	rows, err := db.Pool.Query(ctx, serviceBacklogQuery, pgx.StrictNamedArgs{"at": now, "held": held, "lakeGrace": lakeGrace.Interval()})
	if err != nil {
		return nil, fmt.Errorf("read expired backlog: %w", err)
	}
	found := map[[2]string]StoreBacklog{}
	var b StoreBacklog
	var store, state string
	var oldest time.Time
	if _, err := pgx.ForEachRow(rows, []any{&store, &state, &b.Rows, &oldest}, func() error {
		t := oldest.UTC()
		found[[2]string{store, state}] = StoreBacklog{Store: catalog.Store(store), State: BacklogState(state), Rows: b.Rows, Oldest: &t}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read expired backlog: %w", err)
	}
	var out []StoreBacklog
	for _, s := range catalog.Stores {
		for _, st := range backlogStates {
			got, ok := found[[2]string{string(s), string(st)}]
			if !ok {
				got = StoreBacklog{Store: s, State: st}
			}
			out = append(out, got)
		}
	}
	return out, nil
}

// backlogReuse is how long a reading of the service's backlog serves scrapes: /metrics needs no token, so however
// often it is asked for, the backlog's statement runs at most once in this time on a replica.
const backlogReuse = 10 * time.Second

// backlogCollector exports the service's expired backlog (ServiceBacklog) at scrape time, by store and state, with
// no tenant in any label.
type backlogCollector struct {
	db     *DB
	grace  retention.Period
	logger *slog.Logger
	rows   *prometheus.Desc
	age    *prometheus.Desc

	mu     sync.Mutex
	readAt time.Time
	last   []StoreBacklog
}

// BacklogCollector returns a Prometheus collector of the service's expired backlog, read at scrape time from the
// counters with one statement, whose reading serves the scrapes of the next 10 seconds: retention_expired_rows and
// retention_oldest_expired_age_seconds, labelled by store and state (deletable, grace, held). lakeGrace is the lake's
// ingestion grace (RETENTION_INGESTION_GRACE). A failed reading is logged and exports nothing.
func (db *DB) BacklogCollector(lakeGrace retention.Period, logger *slog.Logger) prometheus.Collector {
	labels := []string{"store", "state"}
	return &backlogCollector{db: db, grace: lakeGrace, logger: logger,
		rows: prometheus.NewDesc("retention_expired_rows",
			"Rows expired but still stored, from the counters: every row of a partition's month that has ended, or that arrived expired, or of a deleted dataset; by store and state (deletable: a run may delete them now; grace: within the ingestion grace; held: under a legal hold).", labels, nil),
		age: prometheus.NewDesc("retention_oldest_expired_age_seconds",
			"Seconds since the oldest rows of retention_expired_rows became expired (state deletable: deletable, past the grace too), 0 without rows; by store and state.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rows
	ch <- c.age
}

// Collect implements prometheus.Collector.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.db.now()
	backlog, err := c.reading(now)
	if err != nil {
		c.logger.Warn("expired backlog metrics", slog.Any("error", err))
		return
	}
	for _, b := range backlog {
		age := 0.0
		if b.Oldest != nil && b.Oldest.Before(now) {
			age = now.Sub(*b.Oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(b.Rows), string(b.Store), string(b.State))
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, string(b.Store), string(b.State))
	}
}

// reading returns the last reading while it is fresh, else reads again; scrapes that come together wait for one
// reading.
func (c *backlogCollector) reading(now time.Time) ([]StoreBacklog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && now.Sub(c.readAt) < backlogReuse && !now.Before(c.readAt) {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	backlog, err := c.db.ServiceBacklog(ctx, now, c.grace)
	if err != nil {
		return nil, err
	}
	c.last, c.readAt = backlog, now
	return backlog, nil
}

// DatasetReadStatements returns the statement of GET /dataSets/{id} (FindDatasetByID) and the same statement with
// its expired backlog left out (the same columns, the backlog's empty, the lake shares read as before the backlog
// shared their probe), both taking org, sandbox, dataset id and the evaluation time: the benchmark (internal/bench)
// runs them side by side to measure what the backlog adds to the read.
func DatasetReadStatements() (withBacklog, without string) {
	// $4 is still read, so that both take the same arguments.
	none := datasetSharesOnly + `
CROSS JOIN (SELECT $4::timestamptz AS at) unused`
	return datasetByIDQuery, strings.Replace(datasetByIDQuery, datasetCounters, none, 1)
}
