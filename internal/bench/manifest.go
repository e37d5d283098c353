package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/acme/retention/catalog"
)

// Databases of the deletion-manifest scenario: copies of the retention run's, taken before that run consumes them.
const (
	dbManifest     = "manifest"
	dbManifestBase = "manifestbase"
)

// setManifest turns a store's deletionManifest of a dataset on or off.
func (a *apiClient) setManifest(ctx context.Context, id string, on bool) error {
	return a.doJSON(ctx, http.MethodPatch, "/v2/dataSets/"+id, map[string]any{
		"extensions": map[string]any{string(catalog.LakeHouse): map[string]any{"rowExpiration": map[string]any{"deletionManifest": on}}},
	}, nil)
}

// manifestRun times a manual run over the retention run's data with every dataset keeping a deletion manifest,
// against the retention run's DELETE … USING of the same rows, on copies of both databases; it checks that the
// manifests list as many rows as the run deleted and that both leave the same rows. What the manifests add to a run
// is this run against the plain one (manifestCost, once the retention run has measured it).
func (h *harness) manifestRun(ctx context.Context) error {
	h.step("deletion manifest: copying both databases")
	for _, pair := range [][2]string{{dbService, dbManifest}, {dbBaseline, dbManifestBase}} {
		if err := h.pg.cloneDatabase(ctx, pair[0], pair[1]); err != nil {
			return err
		}
		defer func() { _ = h.pg.dropDatabase(context.WithoutCancel(ctx), pair[1]) }()
	}
	if err := h.useService(ctx, dbManifest, "retentiond-manifest.log"); err != nil {
		return err
	}
	api, err := h.client(orgMain)
	if err != nil {
		return errors.Join(err, h.stopService())
	}
	for _, id := range h.mainIDs {
		if err := api.setManifest(ctx, id, true); err != nil {
			return errors.Join(err, h.stopService())
		}
	}
	if err := h.pg.checkpoint(ctx); err != nil {
		return errors.Join(err, h.stopService())
	}
	h.step("deletion manifest: run with all %d datasets listing their rows (timed)", len(h.mainIDs))
	run, ours, err := api.timedRun(ctx, h.pg.url(dbManifest), map[string]any{})
	var release time.Duration
	if err == nil {
		// The run's drops leave the listing of their partitions' rows to the release job it queues, which lists
		// them before it drops each detached table: the manifests are counted once it has completed.
		release, err = h.waitReleased(ctx, dbManifest, run, ours)
	}
	if err := errors.Join(err, h.stopService()); err != nil {
		return err
	}
	listed, err := h.countListed(ctx, run.ID)
	if err != nil {
		return err
	}
	evaluated, err := run.evaluatedAt()
	if err != nil {
		return err
	}
	samples, err := h.timeBaselineDeletes(ctx, dbManifestBase, evaluated, run.Progress.RowsDeleted)
	if err != nil {
		return err
	}
	same, detail, err := h.compareRowsLeft(ctx, dbManifest, dbManifestBase)
	if err != nil {
		return err
	}
	exact := listed == run.Progress.RowsDeleted
	baseline := samples[len(samples)-1].Took
	ratio := baseline.Seconds() / ours.Seconds()
	h.manifestTime, h.manifestRelease = ours, release
	holds := ratio >= 8 && same && exact
	h.deleteJudgements = append(h.deleteJudgements, deleteJudgement{row: len(h.report.Rows), holds: holds, own: samples})
	h.report.add(Row{Scenario: ScenarioManifest, Metric: fmt.Sprintf("wall time, all %d datasets listing their rows", len(h.mainIDs)),
		Ours: fmtDur(ours), Baseline: fmtDur(baseline), Ratio: fmtRatio(ratio) + " faster", Goal: "≥ 8× faster; every deleted row listed; rows left identical",
		Holds: judge(holds, checkWork(samples, "removed", "the run's")), Note: fmt.Sprintf(
			"POST /retention/runs {} after PATCHing deletionManifest true on every dataset: %s rows deleted, %s listed in deletion_manifests once the release job it queued completed. "+
				"Baseline: the retention run's DELETE … USING ds on a copy of the same rows, each sample after a CHECKPOINT: %s. %s",
			fmtInt(run.Progress.RowsDeleted), fmtInt(listed), deleteSamplesNote(samples, "rolled back", "committed, the figure"), detail)})
	if !same || !exact {
		return fmt.Errorf("the run with manifests deleted %d rows and listed %d; %s", run.Progress.RowsDeleted, listed, detail)
	}
	return nil
}

// countListed counts the manifest entries of the run.
func (h *harness) countListed(ctx context.Context, runID string) (int64, error) {
	conn, err := h.pg.connect(ctx, dbManifest)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(entries), 0) FROM deletion_manifests WHERE removal_kind = 'run' AND removal_id = $1`, runID).Scan(&n)
	return n, err
}

// timeBaselineDeletes times the retention run's DELETE … USING ds on the baseline database db at the run's
// evaluation time twice (deleteTwice: rolled back, then committed, which leaves the rows compareRowsLeft compares):
// two samples make the row's baseline one to judge by on its own (checkWork), without another scenario's DELETE. want
// is the rows the run deleted, which each sample must remove too.
func (h *harness) timeBaselineDeletes(ctx context.Context, db string, evaluated time.Time, want int64) ([]workSample, error) {
	base, err := h.pg.connect(ctx, db)
	if err != nil {
		return nil, err
	}
	defer base.Close(ctx)
	const deleteSQL = `DELETE FROM rows r USING ds d WHERE r.dataset_id = d.id
		AND r.ts <= $1::timestamptz - d.ttl + interval '4 days' AND r.ts + d.ttl <= $1::timestamptz`
	return h.deleteTwice(ctx, base, "deletion manifest", want, deleteSQL, evaluated)
}

// manifestCost reports what the manifests added to a run: the manifest scenario's run against the retention
// run's median trial, on copies of the same rows.
func (h *harness) manifestCost() {
	if h.manifestTime == 0 || h.plainRunTime == 0 {
		return
	}
	h.report.add(Row{Scenario: ScenarioManifest, Metric: "run with manifests vs run without", Ours: fmtDur(h.manifestTime),
		Baseline: fmtDur(h.plainRunTime), Ratio: fmtRatio(h.manifestTime.Seconds() / h.plainRunTime.Seconds()), Goal: "—", Holds: NoGoal,
		Note: "the deletion-manifest scenario's run against the retention run's median trial, each on its own copy of the same rows after a CHECKPOINT; one sample each, so a few tens of percent either way is the machine's noise"})
	h.report.add(Row{Scenario: ScenarioManifest, Metric: "release job with the listing vs without", Ours: fmtDur(h.manifestRelease),
		Baseline: fmtDur(h.plainRelease), Ratio: fmtRatio(h.manifestRelease.Seconds() / max(h.plainRelease.Seconds(), 0.001)), Goal: "—", Holds: NoGoal,
		Note: "the time from each run's end until River recorded its release job complete: with manifests, that job lists the rows of every detached table (the listing a drop used to do in the run) before it drops the table; without, it only drops the tables. One sample each"})
}
