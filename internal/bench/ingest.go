package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// httpBatch is the bodies of one HTTP ingestion, generated before the clock starts so that the client's work is
// not counted against the service.
type httpBatch struct {
	ids    []string   // the datasets
	bodies [][][]byte // per dataset, its bodies in order
	rows   int
}

// copySamplesNote lists a raw COPY's two samples: their rates, what each was, and the CPU others took meanwhile.
func copySamplesNote(samples []workSample, what ...string) string {
	each := make([]string, len(samples))
	for i, s := range samples {
		label := ""
		if i < len(what) {
			label = " (" + what[i] + ")"
		}
		each[i] = fmt.Sprintf("%d: %s%s, other processes %s of the CPU", i+1, fmtRate(float64(s.Done)/s.Took.Seconds(), "rows/s"), label, fmtPct(s.OtherCPU))
	}
	return strings.Join(each, "; ")
}

// ingestProfile is the window of retentiond's CPU profile of each ingestion variant (-cpuprofile): its first
// seconds, shorter than a variant's post at any size the harness runs (12 s and more for 1,000,000 rows).
const ingestProfile = 8 * time.Second

// prepareHTTP creates the datasets of one variant and generates their events: HTTPRows in all, the same events
// for every variant but for the _id field and, with people, the identityMap of one of that many people.
func (h *harness) prepareHTTP(ctx context.Context, api *apiClient, prefix string, clientIDs bool, people int, unread bool, rows, datasets int) (*httpBatch, error) {
	cfg := h.cfg
	b := &httpBatch{rows: rows}
	for d := range datasets {
		id, err := api.createDataset(ctx, fmt.Sprintf("%s-%03d", prefix, d))
		if err != nil {
			return nil, err
		}
		n := rows / datasets
		if d < rows%datasets {
			n++
		}
		gen := newEventGen(cfg.Seed+2, uint64(d), n, h.from, h.to, clientIDs)
		if people > 0 {
			gen.withPeople(people, cfg.Seed+2, uint64(d))
			gen.unread = unread
		}
		var bodies [][]byte
		for left := n; left > 0; left -= cfg.HTTPBodyRows {
			var buf bytes.Buffer
			gen.body(&buf, min(left, cfg.HTTPBodyRows))
			bodies = append(bodies, buf.Bytes())
		}
		b.ids = append(b.ids, id)
		b.bodies = append(b.bodies, bodies)
	}
	return b, nil
}

// post sends the batch with HTTPStreams clients at once, each taking whole datasets in turn (as retentionctl's
// workers do), and returns the wall time.
func (h *harness) post(ctx context.Context, api *apiClient, b *httpBatch) (time.Duration, error) {
	streams := h.cfg.HTTPStreams
	var mu sync.Mutex
	var accepted int
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for s := range streams {
		wg.Go(func() {
			for d := s; d < len(b.ids); d += streams {
				for _, body := range b.bodies[d] {
					n, err := api.postRows(ctx, b.ids[d], body)
					mu.Lock()
					accepted += n
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return elapsed, err
	}
	if accepted != b.rows {
		return elapsed, fmt.Errorf("the service accepted %d of %d rows", accepted, b.rows)
	}
	return elapsed, nil
}

// ingestion reports the CLI load of the setup against its raw COPY, then posts HTTPRows rows through
// POST /dataSets/{id}/rows in each variant (events with a client _id, as XDM events carry, and without; then issue
// #31's events with identities, between two samples with the identityMap unread, and the _id variant again) and
// copies the _id variant's rows into the baseline table with the same indexes.
func (h *harness) ingestion(ctx context.Context) (err error) {
	cfg := h.cfg
	cli := h.cliRate / h.rawCopyRate
	h.report.add(Row{Scenario: ScenarioIngestion, Metric: "retentionctl load", Ours: fmtRate(h.cliRate, "rows/s"), Baseline: fmtRate(h.rawCopyRate, "rows/s") + " (raw COPY)",
		Ratio: fmtPct(cli), Goal: "≥ 50% of raw COPY", Holds: judge(cli >= 0.5, checkWork(h.rawCopySamples, "copied", "the service's")),
		Note: h.cliNote + fmt.Sprintf(". Baseline: the same rows, exported from the service's store, COPY … FROM STDIN (binary, from files) in %d streams into an empty plain table with the service's two row indexes; "+
			"samples: %s", cfg.LoadWorkers, copySamplesNote(h.rawCopySamples, "the baseline table", "an empty scratch table like it"))})

	if err := h.setLakePolicy(ctx, h.pg.url(dbLoad), orgHTTP); err != nil {
		return err
	}
	api, err := h.client(orgHTTP)
	if err != nil {
		return err
	}
	// Each variant's goal is a share of raw COPY: issue #20 asks half for events with _id (as XDM events carry) and
	// keeps the quarter of the earlier goal for events without.
	// Issue #31 asks events with identities at 80% of the same events without: the _id variant, with an identityMap
	// each (cfg.people()'s), posted after the two variants of issue #20 and before a second sample of the _id
	// variant, its baseline. (The two of issue #20 keep their order and their store.) Around it, the same events with
	// their identityMap under a name the service does not read, before and after: what reading the identities costs,
	// apart from what the member's bytes cost as any field's would.
	type variant struct {
		metric, prefix string
		clientIDs      bool
		people         int
		unread         bool
		goal           float64 // of raw COPY (issue #20's rows); 0: no row against raw COPY
	}
	var withIDs *httpBatch
	results := map[string]time.Duration{}
	posted := map[string]workSample{}
	var postsOnly []string
	people := cfg.people()
	variants := []variant{{"POST rows, events with _id", "http-id", true, 0, false, 0.5}, {"POST rows, events without _id", "http-noid", false, 0, false, 0.25},
		{identityUnreadBefore, "http-unread", true, people, true, 0}, {identityIngestMetric, "http-ident", true, people, false, 0},
		{identityUnreadAfter, "http-unread2", true, people, true, 0}, {identityIngestBaseline, "http-id2", true, 0, false, 0}}
	// Each variant starts with the store vacuumed and its rows are vacuumed after it, timed, autovacuum off for the
	// store's partitions meanwhile: issue #31's rows are judged on the post and that VACUUM, the work its rows leave
	// (an index's pending entries merged, the pages' visibility set), which autovacuum would otherwise do at a time of
	// its own choosing, inside a later variant or not.
	resume, err := h.pauseRowAutovacuum(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, resume(context.WithoutCancel(ctx))) }()
	if _, err := h.settleRows(ctx); err != nil {
		return err
	}
	for _, v := range variants {
		b, err := h.prepareHTTP(ctx, api, v.prefix, v.clientIDs, v.people, v.unread, cfg.HTTPRows, cfg.HTTPDatasets)
		if err != nil {
			return err
		}
		if err := h.pg.checkpoint(ctx); err != nil {
			return err
		}
		h.step("ingestion: %s, %s rows", v.metric, fmtInt(int64(cfg.HTTPRows)))
		profiled := h.profile(ctx, "ingest-"+v.prefix+".pprof", true, ingestProfile)
		from := time.Now()
		elapsed, err := h.post(ctx, api, b)
		if err := errors.Join(err, <-profiled); err != nil {
			return fmt.Errorf("%s: %w", v.metric, err)
		}
		settled, err := h.settleRows(ctx)
		if err != nil {
			return err
		}
		results[v.metric] = elapsed
		// post fails unless the service stored every row posted.
		posted[v.metric] = workSample{Done: int64(b.rows), Want: int64(b.rows), Took: elapsed + settled, OtherCPU: h.noise.share(from, time.Now())}
		postsOnly = append(postsOnly, fmt.Sprintf("%s %s (VACUUM %s)", v.prefix, fmtRate(float64(b.rows)/elapsed.Seconds(), "rows/s"), fmtDur(settled)))
		b.bodies = nil // posted: let the memory go before the next variant
		if v.prefix == "http-id" {
			withIDs = b
		}
	}

	h.step("ingestion: raw COPY of the same rows into the baseline")
	files, err := h.exportRows(ctx, dbLoad, withIDs.ids, cfg.HTTPStreams, "http")
	if err != nil {
		return err
	}
	defer removeFiles(files)
	// The baseline table still holds the rows its DELETE left, as the service's store does after its run.
	if err := h.vacuum(ctx, dbBaseline, "rows"); err != nil {
		return err
	}
	if err := h.pg.checkpoint(ctx); err != nil {
		return err
	}
	from := time.Now()
	copied, elapsed, err := h.copyFiles(ctx, "rows", files, false)
	if err != nil {
		return err
	}
	if copied != int64(cfg.HTTPRows) {
		return fmt.Errorf("copied %d rows into the baseline, posted %d", copied, cfg.HTTPRows)
	}
	samples := []workSample{{Done: copied, Want: int64(cfg.HTTPRows), Took: elapsed, OtherCPU: h.noise.share(from, time.Now())}}
	// The second sample copies the same rows again, in transactions rolled back, so that no row is there twice.
	h.step("ingestion: the raw COPY's second sample (rolled back)")
	if err := h.pg.checkpoint(ctx); err != nil {
		return err
	}
	from = time.Now()
	copied2, elapsed2, err := h.copyFiles(ctx, "rows", files, true)
	if err != nil {
		return err
	}
	samples = append(samples, workSample{Done: copied2, Want: int64(cfg.HTTPRows), Took: elapsed2, OtherCPU: h.noise.share(from, time.Now())})
	invalid := checkWork(samples, "copied", "the service's")
	raw := float64(copied) / elapsed.Seconds()
	for _, v := range variants {
		if v.goal == 0 {
			continue // issue #31's variants and the samples of its baselines, reported below
		}
		rate := float64(cfg.HTTPRows) / results[v.metric].Seconds()
		h.report.add(Row{Scenario: ScenarioIngestion, Metric: v.metric, Ours: fmtRate(rate, "rows/s"), Baseline: fmtRate(raw, "rows/s") + " (raw COPY)",
			Ratio: fmtPct(rate / raw), Goal: fmt.Sprintf("≥ %s of raw COPY", fmtPct(v.goal)), Holds: judge(rate/raw >= v.goal, invalid),
			Note: fmt.Sprintf("%s rows as NDJSON, %s events a request, %d clients at once over %d datasets, into the store the earlier scenarios left (%s wall time). "+
				"Baseline: the same rows, exported from the service, COPY in %d streams into the baseline table as its DELETE left it (vacuumed), with the same indexes; samples: %s",
				fmtInt(int64(cfg.HTTPRows)), fmtInt(int64(cfg.HTTPBodyRows)), cfg.HTTPStreams, cfg.HTTPDatasets, fmtDur(results[v.metric]), cfg.HTTPStreams,
				copySamplesNote(samples, "committed", "the same again, rolled back"))})
	}
	h.reportIdentityIngestion(posted[identityIngestMetric], []workSample{posted[variants[0].metric], posted[identityIngestBaseline]},
		[]workSample{posted[identityUnreadBefore], posted[identityUnreadAfter]}, strings.Join(postsOnly, ", "))
	return nil
}

// pauseRowAutovacuum turns autovacuum off for the partitions of the ingestion org's store (lake_rows of dbLoad),
// whose rows settleRows vacuums after each variant, and returns what turns it on again. Left on, autovacuum visits a
// database once a minute and ran inside one variant or another by chance: at full size, 4 s of its CPU fell inside
// the identities variant's 22 s, and none inside the unread variants' around it.
func (h *harness) pauseRowAutovacuum(ctx context.Context) (func(context.Context) error, error) {
	set := func(ctx context.Context, option string) error {
		conn, err := h.pg.connect(ctx, dbLoad)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, fmt.Sprintf(`DO $$ DECLARE p regclass; BEGIN
  FOR p IN SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'lake_rows'::regclass AND c.relkind = 'r' LOOP
    EXECUTE format('ALTER TABLE %%s %s', p);
  END LOOP;
END $$`, option))
		if err != nil {
			return fmt.Errorf("autovacuum of the ingested rows (%s): %w", option, err)
		}
		return nil
	}
	if err := set(ctx, "SET (autovacuum_enabled = off)"); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return set(ctx, "RESET (autovacuum_enabled)") }, nil
}

// settleRows vacuums the store's rows of the ingestion's org (lake_rows of dbLoad) and returns how long it took.
func (h *harness) settleRows(ctx context.Context) (time.Duration, error) {
	conn, err := h.pg.connect(ctx, dbLoad)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	start := time.Now()
	if _, err := conn.Exec(ctx, `VACUUM lake_rows`); err != nil {
		return 0, fmt.Errorf("vacuum the ingested rows: %w", err)
	}
	return time.Since(start), nil
}

// Metrics of the identities variant of the HTTP ingestion, of the second sample of its baseline, and of the samples
// of the same events with their identityMap unread.
const (
	identityIngestMetric   = "POST rows, events with _id and identityMap"
	identityIngestBaseline = "POST rows, events with _id (second sample)"
	identityUnreadBefore   = "POST rows, events with _id and identityMap unread"
	identityUnreadAfter    = "POST rows, events with _id and identityMap unread (second sample)"
	identityUnreadMetric   = "POST rows, identityMap read against unread"
)

// reportIdentityIngestion reports the events with identities twice. Issue #31's goal, at least 80% of "the same
// rows without identities", is judged in the second row: against the same events with their identityMap under a name
// the service does not read (unread, posted before and after), the same bytes through every step, no identity
// extracted, stored or indexed; so it measures what reading the identities costs. The first row, shown and not
// judged, sets them against the events without any identityMap (the _id variant, before and after): those are about
// 130 bytes shorter (about 140 against 270 bytes), and its gap also holds what those bytes cost as any other field's
// would, which the unread samples measure on their own (the note gives it). Each row's baseline is the faster of its
// two samples, the stricter, which must agree.
//
// Each sample's time is its post's and the VACUUM of the rows after it (ingestion); postsOnly gives every variant's
// rate over its post alone, for the note.
func (h *harness) reportIdentityIngestion(ours workSample, base, unread []workSample, postsOnly string) {
	cfg := h.cfg
	rate := func(s workSample) float64 { return float64(s.Done) / s.Took.Seconds() }
	best := max(rate(base[0]), rate(base[1]))
	ratio := rate(ours) / best
	cli := ""
	if h.identLoad > 0 && h.cliRate > 0 {
		cli = fmt.Sprintf(" Beside it, retentionctl load of the retention-run rows in this run: %s without identities, %s with (the identities store).",
			fmtRate(h.cliRate, "rows/s"), fmtRate(float64(cfg.Rows)/h.identLoad.Seconds(), "rows/s"))
	}
	bestUnread := max(rate(unread[0]), rate(unread[1]))
	holds := NoGoal
	if invalid := checkWork(base, "stored", "the posted"); invalid != "" {
		holds = judge(false, invalid)
	}
	h.report.add(Row{Scenario: ScenarioIngestion, Metric: identityIngestMetric, Ours: fmtRate(rate(ours), "rows/s"), Baseline: fmtRate(best, "rows/s") + " (without identityMap)",
		Ratio: fmtPct(ratio), Goal: "shown: the identityMap's bytes count too", Holds: holds,
		Note: fmt.Sprintf("the _id variant's %s rows again, each event also carrying the identityMap of one of %s people (its e-mail primary, and an ECID: "+
			"one identity key extracted into the identities column and its GIN index), %s events a request, %d clients at once over %d new datasets (%s wall time, "+
			"other processes %s of the CPU). Baseline: the same events without identityMap, the _id variant, posted before it and again after it into "+
			"%d new datasets; the faster of the two: %s. Each sample is timed from its first request to the end of a VACUUM of the store's rows after its "+
			"last (the work its rows leave: its indexes' pending entries merged, its pages' visibility set), each variant starting on a store so vacuumed; over the posts "+
			"alone: %s. The same events with their identityMap unread, against these without it: %s, what the member's bytes cost alone; the next row "+
			"judges the goal without them.%s",
			fmtInt(int64(cfg.HTTPRows)), fmtInt(int64(cfg.people())), fmtInt(int64(cfg.HTTPBodyRows)), cfg.HTTPStreams, cfg.HTTPDatasets, fmtDur(ours.Took),
			fmtPct(ours.OtherCPU), cfg.HTTPDatasets, copySamplesNote(base, "before", "after"), postsOnly, fmtPct(bestUnread/best), cli)})
	h.report.add(Row{Scenario: ScenarioIngestion, Metric: identityUnreadMetric, Ours: fmtRate(rate(ours), "rows/s"), Baseline: fmtRate(bestUnread, "rows/s") + " (identityMap unread)",
		Ratio: fmtPct(rate(ours) / bestUnread), Goal: "≥ 80% of the same rows without identities", Holds: judge(rate(ours)/bestUnread >= 0.8, checkWork(unread, "stored", "the posted")),
		Note: fmt.Sprintf("the row above's events, against the same events with their identityMap under %s, a name the service does not read: the same bytes "+
			"posted, decoded and stored, no identity extracted, stored or indexed, posted just before and just after it into %d new datasets each; the faster of the two: %s.",
			unreadIdentityMap, cfg.HTTPDatasets, copySamplesNote(unread, "before", "after"))})
}
