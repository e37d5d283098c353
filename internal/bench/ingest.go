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

// prepareHTTP creates the datasets of one variant and generates their events: HTTPRows in all, the same events
// for every variant but for the _id field and, with people, the identityMap of one of that many people.
func (h *harness) prepareHTTP(ctx context.Context, api *apiClient, prefix string, clientIDs bool, people, rows, datasets int) (*httpBatch, error) {
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
// POST /dataSets/{id}/rows twice (events with a client _id, as XDM events carry, and without) and copies the same
// rows into the baseline table with the same indexes.
func (h *harness) ingestion(ctx context.Context) error {
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
	// variant, its baseline. (The two of issue #20 keep their order and their store.)
	type variant struct {
		metric, prefix string
		clientIDs      bool
		people         int
		goal           float64 // 0: a sample only, no row of its own
	}
	var withIDs *httpBatch
	results := map[string]time.Duration{}
	posted := map[string]workSample{}
	variants := []variant{{"POST rows, events with _id", "http-id", true, 0, 0.5}, {"POST rows, events without _id", "http-noid", false, 0, 0.25},
		{identityIngestMetric, "http-ident", true, cfg.people(), 0.8}, {identityIngestBaseline, "http-id2", true, 0, 0}}
	for _, v := range variants {
		b, err := h.prepareHTTP(ctx, api, v.prefix, v.clientIDs, v.people, cfg.HTTPRows, cfg.HTTPDatasets)
		if err != nil {
			return err
		}
		if err := h.pg.checkpoint(ctx); err != nil {
			return err
		}
		h.step("ingestion: %s, %s rows", v.metric, fmtInt(int64(cfg.HTTPRows)))
		from := time.Now()
		elapsed, err := h.post(ctx, api, b)
		if err != nil {
			return fmt.Errorf("%s: %w", v.metric, err)
		}
		results[v.metric] = elapsed
		// post fails unless the service stored every row posted.
		posted[v.metric] = workSample{Done: int64(b.rows), Want: int64(b.rows), Took: elapsed, OtherCPU: h.noise.share(from, time.Now())}
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
		if v.people > 0 || v.goal == 0 {
			continue // judged against the _id variant below, not raw COPY
		}
		rate := float64(cfg.HTTPRows) / results[v.metric].Seconds()
		h.report.add(Row{Scenario: ScenarioIngestion, Metric: v.metric, Ours: fmtRate(rate, "rows/s"), Baseline: fmtRate(raw, "rows/s") + " (raw COPY)",
			Ratio: fmtPct(rate / raw), Goal: fmt.Sprintf("≥ %s of raw COPY", fmtPct(v.goal)), Holds: judge(rate/raw >= v.goal, invalid),
			Note: fmt.Sprintf("%s rows as NDJSON, %s events a request, %d clients at once over %d datasets, into the store the earlier scenarios left (%s wall time). "+
				"Baseline: the same rows, exported from the service, COPY in %d streams into the baseline table as its DELETE left it (vacuumed), with the same indexes; samples: %s",
				fmtInt(int64(cfg.HTTPRows)), fmtInt(int64(cfg.HTTPBodyRows)), cfg.HTTPStreams, cfg.HTTPDatasets, fmtDur(results[v.metric]), cfg.HTTPStreams,
				copySamplesNote(samples, "committed", "the same again, rolled back"))})
	}
	h.reportIdentityIngestion(posted[identityIngestMetric], []workSample{posted[variants[0].metric], posted[identityIngestBaseline]})
	return nil
}

// Metrics of the identities variant of the HTTP ingestion, and of the second sample of its baseline.
const (
	identityIngestMetric   = "POST rows, events with _id and identityMap"
	identityIngestBaseline = "POST rows, events with _id (second sample)"
)

// reportIdentityIngestion reports the events with identities against the same events without them (the _id
// variant, posted before and after), judged against the faster of those two samples, the stricter.
func (h *harness) reportIdentityIngestion(ours workSample, base []workSample) {
	cfg := h.cfg
	rate := func(s workSample) float64 { return float64(s.Done) / s.Took.Seconds() }
	best := max(rate(base[0]), rate(base[1]))
	ratio := rate(ours) / best
	cli := ""
	if h.identLoad > 0 && h.cliRate > 0 {
		cli = fmt.Sprintf(" Beside it, retentionctl load of the retention-run rows in this run: %s without identities, %s with (the identities store).",
			fmtRate(h.cliRate, "rows/s"), fmtRate(float64(cfg.Rows)/h.identLoad.Seconds(), "rows/s"))
	}
	h.report.add(Row{Scenario: ScenarioIngestion, Metric: identityIngestMetric, Ours: fmtRate(rate(ours), "rows/s"), Baseline: fmtRate(best, "rows/s") + " (without identityMap)",
		Ratio: fmtPct(ratio), Goal: "≥ 80% of the same rows without identities", Holds: judge(ratio >= 0.8, checkWork(base, "stored", "the posted")),
		Note: fmt.Sprintf("the _id variant's %s rows again, each event also carrying the identityMap of one of %s people (its e-mail primary, and an ECID: "+
			"one identity key extracted into the identities column and its GIN index), %s events a request, %d clients at once over %d new datasets (%s wall time, "+
			"other processes %s of the CPU). Baseline: the same events without identityMap, the _id variant, posted before it and again after it into "+
			"%d new datasets; the faster of the two: %s.%s",
			fmtInt(int64(cfg.HTTPRows)), fmtInt(int64(cfg.people())), fmtInt(int64(cfg.HTTPBodyRows)), cfg.HTTPStreams, cfg.HTTPDatasets, fmtDur(ours.Took),
			fmtPct(ours.OtherCPU), cfg.HTTPDatasets, copySamplesNote(base, "before", "after"), cli)})
}
