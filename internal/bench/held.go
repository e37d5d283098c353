package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Databases of the held-dataset scenario: copies of the retention run's, taken before that run consumes them.
const (
	dbHeld     = "held"
	dbHeldBase = "heldbase"
)

// heldRun times a manual run over the retention run's data with one of its datasets under a legal hold, against a
// plain DELETE … USING of the same rows (every expired row but the held dataset's), on copies of both databases, and
// checks that both leave the same rows. The held dataset's rows share every partition with the others, so the run
// keeps its drops only if it carries the held rows out of each dropped partition (docs/storage.md, "Legal holds").
func (h *harness) heldRun(ctx context.Context) error {
	h.step("held dataset: copying both databases")
	for _, pair := range [][2]string{{dbService, dbHeld}, {dbBaseline, dbHeldBase}} {
		if err := h.pg.cloneDatabase(ctx, pair[0], pair[1]); err != nil {
			return err
		}
		defer func() { _ = h.pg.dropDatabase(context.WithoutCancel(ctx), pair[1]) }()
	}
	held := h.mainIDs[0]
	if err := h.useService(ctx, dbHeld, "retentiond-held.log"); err != nil {
		return err
	}
	api, err := h.client(orgMain)
	if err != nil {
		return err
	}
	if err := api.placeHold(ctx, held); err != nil {
		return errors.Join(err, h.stopService())
	}
	if err := h.pg.checkpoint(ctx); err != nil {
		return errors.Join(err, h.stopService())
	}
	h.step("held dataset: run with 1 of %d datasets held (timed)", len(h.mainIDs))
	run, ours, err := api.timedRun(ctx, h.pg.url(dbHeld), map[string]any{})
	var release, heldPart string
	if err == nil {
		var d time.Duration
		d, err = h.waitReleased(ctx, dbHeld, run, ours)
		release = fmtDur(d)
		heldPart = partStatus(run, held)
	}
	if err := errors.Join(err, h.stopService()); err != nil {
		return err
	}
	evaluated, err := run.evaluatedAt()
	if err != nil {
		return err
	}

	h.step("held dataset: CHECKPOINT, baseline DELETE of the same rows (timed)")
	if err := h.pg.checkpoint(ctx); err != nil {
		return err
	}
	base, err := h.pg.connect(ctx, dbHeldBase)
	if err != nil {
		return err
	}
	defer base.Close(ctx)
	const deleteSQL = `DELETE FROM rows r USING ds d WHERE r.dataset_id = d.id AND d.id <> $2
		AND r.ts <= $1::timestamptz - d.ttl + interval '4 days' AND r.ts + d.ttl <= $1::timestamptz`
	var deleted int64
	from := time.Now()
	baseline, err := timed(func() error {
		tag, err := base.Exec(ctx, deleteSQL, evaluated, held)
		deleted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	sample := workSample{Done: deleted, Want: run.Progress.RowsDeleted, Took: baseline, OtherCPU: h.noise.share(from, time.Now())}
	same, detail, err := h.compareRowsLeft(ctx, dbHeld, dbHeldBase)
	if err != nil {
		return err
	}
	ratio := baseline.Seconds() / ours.Seconds()
	h.deleteJudgements = append(h.deleteJudgements, deleteJudgement{row: len(h.report.Rows), holds: ratio >= 8 && same, own: []workSample{sample}})
	h.report.add(Row{Scenario: ScenarioHeldDataset, Metric: fmt.Sprintf("wall time, 1 of %d datasets held", len(h.mainIDs)),
		Ours: fmtDur(ours), Baseline: fmtDur(baseline), Ratio: fmtRatio(ratio) + " faster", Goal: "≥ 8× faster; rows left identical",
		Holds: judge(false, "1 sample(s), 2 needed: its second is the retention run's DELETE, not measured"), Note: fmt.Sprintf(
			"POST /retention/runs {} with a legal hold on %s (TTL %s), whose rows share every partition with the others: %s rows deleted, the held dataset's part %s; "+
				"the release job completed %s after the run. Baseline: the same DELETE … USING ds as the retention run's, without the held dataset, removed %s rows. %s",
			held, h.mainTTL[held], fmtInt(run.Progress.RowsDeleted), heldPart, release, fmtInt(deleted), detail)})
	if !same {
		return errors.New("the run with a held dataset and the baseline left different rows: " + detail)
	}
	return nil
}

// deleteJudgement is a row whose baseline is a DELETE … USING ds, waiting for the other scenario's DELETEs: the
// retention run's trials and the held dataset's run the same statement (but for one dataset) on copies of the same
// rows, so each is the other's second sample, and a single trial (-run-trials 1) still has one.
type deleteJudgement struct {
	row   int // index in the report's rows
	holds bool
	own   []workSample
}

// judgeDeletes judges every row with a DELETE baseline on its own samples and the other scenario's: each sample must
// have removed its own run's rows, with the machine to itself, and their rates must agree.
func (h *harness) judgeDeletes() {
	for i, j := range h.deleteJudgements {
		samples := slices.Clone(j.own)
		for k, other := range h.deleteJudgements {
			if k != i {
				samples = append(samples, other.own...)
			}
		}
		r := &h.report.Rows[j.row]
		r.Holds = judge(j.holds, checkWork(samples, "removed", "the run's"))
		if len(samples) > len(j.own) {
			r.Note += fmt.Sprintf(" Its baseline is checked on %d DELETE samples: its own %d and the other scenarios' (the same statement; the held dataset's without that dataset).",
				len(samples), len(j.own))
		}
	}
}

// partStatus is the status of the dataset's part of the run, as the API shows it.
func partStatus(run *runDoc, id string) string {
	for _, d := range run.Datasets {
		if d.DatasetID == id {
			return fmt.Sprintf("%s with %d rows", d.Status, d.RowsDeleted)
		}
	}
	return "absent"
}
