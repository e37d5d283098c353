package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// testRuns starts a dry run of app-sessions from the form and watches it finish (the bundle's jobs work for real;
// the page polls the run until it ends). A dry run deletes nothing, so the other parts' datasets are untouched.
func testRuns(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, allScopes...))
	run(ctx, t, chromedp.Click(`#nav-runs`), chromedp.WaitVisible(`#start-run`))

	t.Run("ScheduleAndEmptyHistory", func(t *testing.T) {
		waitText(ctx, t, "#schedule", "0 3 * * 0")
		require.Contains(t, text(ctx, t, `#schedule li[data-store=adobe_lakeHouse]`), "Data lake: 0 3 * * 0 (cron, UTC); next run Nov 29, 2026")
		waitText(ctx, t, "#runs-status", "No runs yet in this sandbox")
		checkAccessibility(ctx, t, "runs, empty")
	})

	t.Run("StartADryRunAndWatchItFinish", func(t *testing.T) {
		setField(ctx, t, "#run-find", "sessions")
		run(ctx, t, chromedp.Click(`#run-search`))
		box := fmt.Sprintf(`#run-ds-%s`, b.ids["app-sessions"])
		run(ctx, t, chromedp.WaitVisible(box), chromedp.Click(box))
		waitText(ctx, t, "#run-chosen", "Chosen: app-sessions.")
		require.True(t, eval[bool](ctx, t, `document.querySelector('#run-dry').checked`), "a dry run unless unchecked")
		run(ctx, t, chromedp.Click(`#run-start`), chromedp.WaitVisible(`#run-progress`))
		waitText(ctx, t, "#run-progress-text", "(updated every second)")
		require.Contains(t, text(ctx, t, "#run-progress-text"), "0 of ", "under way: nothing done yet")
		checkAccessibility(ctx, t, "run detail, under way")
		close(b.runGate.open) // the run's part may start: the page, polling, follows it to its end
		waitText(ctx, t, "#run-progress-text", "succeeded.")
		require.Contains(t, text(ctx, t, "#run-progress-text"), "1 of 1 datasets")
		part := fmt.Sprintf(`#run-parts tr[data-id=%q]`, b.ids["app-sessions"])
		require.Equal(t, "app-sessions", text(ctx, t, part+" th a.ds-link"), "the dataset's name, a link to its page")
		require.Equal(t, "#/datasets/"+b.ids["app-sessions"], eval[string](ctx, t, fmt.Sprintf(`document.querySelector('%s th a').getAttribute('href')`, part)))
		require.Equal(t, "Rows to delete", text(ctx, t, "#run-parts thead th:nth-child(4)"), "a dry run deletes nothing")
		require.Equal(t, "succeeded", eval[string](ctx, t, fmt.Sprintf(`document.querySelector(%q).dataset.status`, part)))
		require.Equal(t, "P12M", text(ctx, t, part+" td:nth-of-type(2)"))
		require.Contains(t, text(ctx, t, "#run-facts"), "yes: nothing is deleted")
		checkAccessibility(ctx, t, "run detail")
		screenshot(ctx, t, "run")
	})

	t.Run("TheHistoryListsIt", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`a[href="#/runs"]`))
		waitText(ctx, t, "#runs-status", "Showing runs 1 to 1.")
		require.Equal(t, "succeeded", text(ctx, t, "#runs tbody tr td.run-status"))
		require.Contains(t, text(ctx, t, "#runs tbody tr th"), "dry run")
		require.Equal(t, "1 of 1", text(ctx, t, "#runs tbody tr td.num"))
		require.Contains(t, text(ctx, t, "#runs tbody tr td:nth-of-type(6)"), "none (", "a dry run's count is what it would delete")
		checkAccessibility(ctx, t, "runs")
		screenshot(ctx, t, "runs")
	})

	t.Run("ADeletedDatasetIsSaidToBe", func(t *testing.T) {
		// In a sandbox of its own, so that the other parts' inventories never see the dataset; the run is started
		// over the API (the form is tested above) and its page opened once the dataset is gone.
		const sandbox = "gone"
		c := &catalog.Caller{User: "steward@acme.example", Org: b.org, Sandbox: sandbox}
		ds, err := b.datasets.CreateDataset(context.Background(), c, catalog.DatasetCreate{Name: "doomed",
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		// A run plans only the datasets that hold rows.
		b.callAPI(t, http.MethodPost, "/dataSets/"+ds.ID+"/rows", sandbox, "application/x-ndjson",
			`{"timestamp":"2026-11-01T00:00:00Z","page":"/gone"}`+"\n", http.StatusOK)
		var started struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(b.callAPI(t, http.MethodPost, "/retention/runs", sandbox, "application/json",
			fmt.Sprintf(`{"dryRun":true,"datasetIds":[%q]}`, ds.ID), http.StatusAccepted), &started))
		runID := started.ID
		setField(ctx, t, "#sandbox", sandbox)
		page := fmt.Sprintf(`location.hash = '#/runs/%s'`, runID)
		run(ctx, t, chromedp.Evaluate[chromedp.Void](page))
		waitText(ctx, t, "#run-progress-text", "1 of 1 datasets")
		waitText(ctx, t, "#run-progress-text", "succeeded.")
		require.NoError(t, b.datasets.DeleteDataset(context.Background(), c, ds.ID))
		run(ctx, t, chromedp.Evaluate[chromedp.Void](`location.hash = '#/runs'`), chromedp.WaitVisible(`#runs-status`),
			chromedp.Evaluate[chromedp.Void](page), chromedp.WaitVisible(`#run-parts`))
		waitText(ctx, t, fmt.Sprintf(`#run-parts tr[data-id=%q] th`, ds.ID), "Deleted dataset "+ds.ID)
	})
}

// testRunsReadOnly: without retention.run the history is shown and the form is not, since the API would refuse it.
func testRunsReadOnly(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, catalog.ScopeDatasetsRead))
	run(ctx, t, chromedp.Click(`#nav-runs`), chromedp.WaitVisible(`#runs-read-only`))
	require.Contains(t, text(ctx, t, "#runs-read-only"), "lacks the retention.run scope")
	require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('#start-run').length`))
	waitText(ctx, t, "#schedule", "0 3 * * 0")
}

// callAPI sends one request to the API as a caller with every scope, requires the status and returns the body.
func (b *bundle) callAPI(t *testing.T, method, path, sandbox, contentType, body string, status int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.token(t, allScopes...))
	req.Header.Set("x-api-key", "dev")
	req.Header.Set("x-gw-ims-org-id", b.org)
	req.Header.Set("x-sandbox-name", sandbox)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, path, out)
	return out
}
