package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The scenarios below measure endpoints that may not exist yet in the build under test. Each probes its endpoint
// first: a route the service does not have (404 route-not-found, or 405) makes the row "not run: endpoint missing",
// and the scenario runs as soon as the build has it.

// probe reports whether the route exists; any answer but a missing route counts as present.
func probe(ctx context.Context, api *apiClient, path string) (bool, error) {
	_, err := api.do(ctx, http.MethodGet, path, "", nil)
	if routeMissing(err) {
		return false, nil
	}
	var ae *apiError
	if err != nil && !asAPIError(err, &ae) {
		return false, err
	}
	return true, nil
}

func asAPIError(err error, target **apiError) bool {
	ae, ok := err.(*apiError) //nolint:errorlint // do returns it unwrapped
	if ok {
		*target = ae
	}
	return ok
}

func notRun(scenario, metric, why, note string) Row {
	return Row{Scenario: scenario, Metric: metric, Holds: NotRun, Ours: "not run: " + why, Note: note}
}

// timedCallsBudget bounds the measured calls of a slow endpoint: after it, no further call starts.
const timedCallsBudget = 2 * time.Minute

// timedCalls calls path once to warm up, then n times (fewer when they take longer than timedCallsBudget in all),
// and returns the sorted durations and the last body.
func timedCalls(ctx context.Context, api *apiClient, path string, n int) ([]time.Duration, []byte, error) {
	if _, err := api.do(ctx, http.MethodGet, path, "", nil); err != nil {
		return nil, nil, err
	}
	var durs []time.Duration
	var body []byte
	begin := time.Now()
	for i := 0; i < n && (i == 0 || time.Since(begin) < timedCallsBudget); i++ {
		start := time.Now()
		b, err := api.do(ctx, http.MethodGet, path, "", nil)
		durs = append(durs, time.Since(start))
		if err != nil {
			return nil, nil, err
		}
		body = b
	}
	slices.Sort(durs)
	return durs, body, nil
}

// preview times GET /ttl/{id}/preview?ttlValue=P3M on a dataset of PreviewRows rows.
func (h *harness) preview(ctx context.Context) error {
	cfg := h.cfg
	main, err := h.client(orgMain)
	if err != nil {
		return err
	}
	ok, err := probe(ctx, main, "/ttl/"+h.mainIDs[0]+"/preview?ttlValue=P3M")
	if err != nil {
		return err
	}
	metric := fmt.Sprintf("GET /ttl/{id}/preview on %s rows", fmtInt(int64(cfg.PreviewRows)))
	if !ok {
		h.report.add(notRun(ScenarioPreview, metric, "endpoint missing", "GET /ttl/{id}/preview answers 404 route-not-found in this build"))
		return nil
	}
	dbURL := h.pg.url(dbLoad)
	if err := h.setLakePolicy(ctx, dbURL, orgPreview); err != nil {
		return err
	}
	api, err := h.client(orgPreview)
	if err != nil {
		return err
	}
	id, err := api.createDataset(ctx, "preview-000")
	if err != nil {
		return err
	}
	h.step("preview: loading %s rows into one dataset", fmtInt(int64(cfg.PreviewRows)))
	if _, err := h.loadGenerated(ctx, dbURL, orgPreview, "preview", cfg.PreviewRows, 1, 1, cfg.Seed+3); err != nil {
		return err
	}
	if err := h.vacuum(ctx, dbLoad, "lake_rows"); err != nil {
		return err
	}
	const calls = 5
	durs, body, err := timedCalls(ctx, api, "/ttl/"+id+"/preview?ttlValue=P3M", calls)
	if err != nil {
		return err
	}
	var doc struct {
		RowsToDelete int64 `json:"rowsToDelete"`
		RowCount     int64 `json:"rowCount"`
	}
	_ = json.Unmarshal(body, &doc)
	worst := durs[len(durs)-1]
	h.report.add(Row{Scenario: ScenarioPreview, Metric: metric, Ours: fmtDur(worst), Goal: "< 1 s", Holds: verdict(worst < time.Second),
		Note: fmt.Sprintf("the slowest of %d calls after one warm-up (median %s) of GET /ttl/{id}/preview?ttlValue=P3M on a dataset of %s rows over two years (TTL P10Y); it answered rowsToDelete %s of rowCount %s",
			len(durs), fmtDur(durs[len(durs)/2]), fmtInt(int64(cfg.PreviewRows)), fmtInt(doc.RowsToDelete), fmtInt(doc.RowCount))})
	return nil
}

// orgAudit holds the synthetic audit log of the audit-query scenario.
const orgAudit = "BENCHAUDIT00000000000001@AdobeOrg"

// auditQuery times a filtered page of GET /audit/events on an org whose log holds AuditEvents events.
func (h *harness) auditQuery(ctx context.Context) error {
	cfg := h.cfg
	api, err := h.client(orgAudit)
	if err != nil {
		return err
	}
	metric := fmt.Sprintf("filtered page of GET /audit/events, %s-event log", fmtInt(int64(cfg.AuditEvents)))
	ok, err := probe(ctx, api, "/audit/events?limit=1")
	if err != nil {
		return err
	}
	if !ok {
		h.report.add(notRun(ScenarioAuditQuery, metric, "endpoint missing", "GET /audit/events answers 404 route-not-found in this build"))
		return nil
	}
	h.step("audit query: generating %s audit events", fmtInt(int64(cfg.AuditEvents)))
	conn, err := h.pg.connect(ctx, dbLoad)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := generateAuditLog(ctx, conn, cfg.AuditEvents); err != nil {
		h.report.add(notRun(ScenarioAuditQuery, metric, "could not generate the log", err.Error()))
		return nil
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE audit_events`); err != nil {
		return err
	}
	q := url.Values{}
	q.Add("property", "action==update")
	q.Add("property", "assetId=="+fmt.Sprintf("%024x", 4242))
	q.Set("limit", "50")
	path := "/audit/events?" + q.Encode()
	const calls = 10
	durs, body, err := timedCalls(ctx, api, path, calls)
	if err != nil {
		return err
	}
	var page struct {
		Embedded struct {
			Events []json.RawMessage `json:"events"`
		} `json:"_embedded"`
		Page struct {
			TotalElements int `json:"totalElements"`
		} `json:"page"`
	}
	_ = json.Unmarshal(body, &page)
	worst := durs[len(durs)-1]
	h.report.add(Row{Scenario: ScenarioAuditQuery, Metric: metric, Ours: fmtDur(worst), Goal: "< 50 ms", Holds: verdict(worst < 50*time.Millisecond),
		Note: fmt.Sprintf("the slowest of %d calls after one warm-up (median %s) of GET %s: %d events on the page, totalElements %d",
			len(durs), fmtDur(durs[len(durs)/2]), path, len(page.Embedded.Events), page.Page.TotalElements)})
	return nil
}

// generateAuditLog inserts n events of orgAudit over the last 80 days: 10,000 datasets, the four actions, one event
// a dataset about every 1,000 events. They are inserted as events written before chaining (no hashes), which the
// schema allows, since hashing 10M events one by one through the API would take hours; the query path reads them
// like any other. They come in time order with time-ordered ids, as a log grows. The non-unique indexes are dropped
// for the insert and rebuilt after it with their own definitions, as a bulk load does: maintaining ten indexes row
// by row made this step take a quarter of an hour. (Rebuilt indexes are packed tighter than grown ones; a page of
// 50 events reads a handful of index pages either way.)
func generateAuditLog(ctx context.Context, conn *pgx.Conn, n int) error {
	rows, err := conn.Query(ctx, `SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index
		WHERE indrelid = 'audit_events'::regclass AND NOT indisunique`)
	if err != nil {
		return err
	}
	type index struct{ name, def string }
	var indexes []index
	var ix index
	if _, err := pgx.ForEachRow(rows, []any{&ix.name, &ix.def}, func() error {
		indexes = append(indexes, ix)
		return nil
	}); err != nil {
		return err
	}
	for _, ix := range indexes {
		if _, err := conn.Exec(ctx, `DROP INDEX `+ix.name); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, `
INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name, action, status,
                          user_id, client_id, details, seq)
SELECT (lpad(to_hex(g), 16, '0') || substr(md5(g::text), 1, 16))::uuid, $1, 'prod', now() - interval '80 days' * (1 - g::float8 / $2),
       'bench-' || lpad(g::text, 12, '0'), 'Dataset',
       lpad(to_hex(g % 10000), 24, '0'), 'dataset-' || (g % 10000), (ARRAY['Create','Update','Delete','Expire'])[1 + (g / 10000) % 4],
       'Success', 'user-' || (g % 50) || '@acme.example', 'retentionbench', '{}'::jsonb, g
FROM generate_series(1, $2::bigint) g`, orgAudit, n)
	for _, ix := range indexes { // rebuilt whether or not the insert worked: the service needs them
		if _, cerr := conn.Exec(ctx, ix.def); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// auditChain compares ingestion throughput and PATCH latency with the audit hash chain and without it: retentiond
// against retentiond-nochain (the same code linked with noChainFlag, which writes events unchained), each
// started fresh on the same database. The regular retentiond is running again afterwards.
func (h *harness) auditChain(ctx context.Context) (err error) {
	if err := h.useBinary(ctx, h.bins.retentiond, dbLoad, "retentiond-chain-on.log"); err != nil {
		return err
	}
	defer func() {
		if restartErr := h.useService(ctx, dbLoad, "retentiond-load.log"); restartErr != nil {
			err = errors.Join(err, restartErr)
		}
	}()
	on, err := h.chainFigures(ctx, "chain-on")
	if err != nil {
		return err
	}
	if err := h.useBinary(ctx, h.bins.retentiondNoChain, dbLoad, "retentiond-chain-off.log"); err != nil {
		return err
	}
	off, err := h.chainFigures(ctx, "chain-off")
	if err != nil {
		return err
	}
	ing := on.rate / off.rate
	h.report.add(Row{Scenario: ScenarioAuditChain, Metric: "HTTP ingestion", Ours: fmtRate(on.rate, "rows/s"), Baseline: fmtRate(off.rate, "rows/s") + " (no chain)",
		Ratio: fmtPct(ing), Goal: "≥ 90%", Holds: verdict(ing >= 0.9),
		Note: "chain off: retentiond linked with " + noChainFlag + " (benchmark build only), on the same database"})
	lat := float64(off.patch.p99) / float64(on.patch.p99)
	h.report.add(Row{Scenario: ScenarioAuditChain, Metric: "PATCH p99", Ours: fmtDur(on.patch.p99), Baseline: fmtDur(off.patch.p99) + " (no chain)",
		Ratio: fmtPct(lat), Goal: "≥ 90%", Holds: verdict(lat >= 0.9),
		Note: fmt.Sprintf("sequential PATCHes of a dataset's TTL. Chain on: %s. Chain off: %s", on.patch, off.patch)})
	return nil
}

// useBinary stops the running retentiond, if any, and starts bin, a build of it, fresh on the database.
func (h *harness) useBinary(ctx context.Context, bin, db, logName string) error {
	if err := h.stopService(); err != nil {
		return err
	}
	svc, err := startService(ctx, bin, h.pg.url(db), h.secret, filepath.Join(h.work, logName), nil)
	if err != nil {
		return err
	}
	h.svc = svc
	return nil
}

type chainFigures struct {
	rate  float64
	patch latencyStats
}

func (h *harness) chainFigures(ctx context.Context, prefix string) (chainFigures, error) {
	var f chainFigures
	api, err := h.client(orgHTTP)
	if err != nil {
		return f, err
	}
	rows := max(h.cfg.HTTPRows/10, 1)
	b, err := h.prepareHTTP(ctx, api, prefix, true, 0, false, rows, h.cfg.HTTPStreams)
	if err != nil {
		return f, err
	}
	elapsed, err := h.post(ctx, api, b)
	if err != nil {
		return f, err
	}
	f.rate = float64(rows) / elapsed.Seconds()
	var samples []sample
	from := time.Now()
	for i := range 200 {
		start := time.Now()
		err := api.setTTL(ctx, b.ids[0], []string{"P6M", "P12M"}[i%2])
		samples = append(samples, sample{start: start, dur: time.Since(start), err: err != nil})
	}
	f.patch = latencies(samples, from, time.Now())
	return f, nil
}
