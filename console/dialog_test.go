package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

const (
	lakeValue = `#ttl-adobe_lakeHouse-value`
	lakeUnit  = `#ttl-adobe_lakeHouse-unit`
	lakeError = `#ttl-adobe_lakeHouse-error`
)

// openDialog opens the Set data retention dialog of a dataset and waits for its chart.
func (b *bundle) openDialog(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	run(ctx, t, chromedp.Click(fmt.Sprintf(`#inventory tr[data-id=%q] button.link`, b.ids[name])), chromedp.WaitVisible(`dialog.retention form`))
	waitText(ctx, t, "#chart-summary", "rows")
}

// countPreviews makes the page count its preview requests in window.previews.
func countPreviews(ctx context.Context, t *testing.T) {
	t.Helper()
	eval[bool](ctx, t, `(() => { window.previews = 0; const f = window.fetch;
		window.fetch = (url, opts) => { if (String(url).includes('/preview')) window.previews++; return f(url, opts); }; return true; })()`)
}

// testRetentionDialog changes web-clickstream.
func testRetentionDialog(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, allScopes...))
	id := b.ids["web-clickstream"]
	b.openDialog(ctx, t, "web-clickstream")

	t.Run("ShowsValuesLimitsAndChart", func(t *testing.T) {
		require.Equal(t, "12", eval[string](ctx, t, `document.querySelector('`+lakeValue+`').value`))
		require.Equal(t, "M", eval[string](ctx, t, `document.querySelector('`+lakeUnit+`').value`))
		require.Contains(t, text(ctx, t, "#ttl-adobe_lakeHouse-limits"), "Minimum 30 days, maximum 10 years, default 12 months")
		bars := eval[int](ctx, t, `document.querySelectorAll('svg.chart rect.bar').length`)
		require.GreaterOrEqual(t, bars, 24, "two years of rows by month")
		deleted := eval[int](ctx, t, `document.querySelectorAll('svg.chart rect.bar:not(.kept)').length`)
		require.Positive(t, deleted, "rows older than 12 months are marked")
		require.Contains(t, text(ctx, t, "#chart-summary"), "under 12 months, a run now would delete")
		checkAccessibility(ctx, t, "retention dialog")
		screenshot(ctx, t, "retention-dialog")
	})

	t.Run("ChartFollowsTheValueDebounced", func(t *testing.T) {
		before := eval[string](ctx, t, `document.querySelector('#chart-summary').dataset.rowsToDelete`)
		countPreviews(ctx, t)
		setField(ctx, t, lakeValue, "")
		run(ctx, t, chromedp.SendKeys(lakeValue, "3"))
		waitText(ctx, t, "#chart-summary", "under 3 months")
		after := eval[string](ctx, t, `document.querySelector('#chart-summary').dataset.rowsToDelete`)
		require.NotEqual(t, before, after, "a shorter value deletes more")
		require.LessOrEqual(t, eval[int](ctx, t, `window.previews`), 2, "one preview per pause in typing, not per keystroke")
	})

	t.Run("RefusedValueShowsTheAPIMessageInPlace", func(t *testing.T) {
		setField(ctx, t, lakeValue, "5")
		setField(ctx, t, lakeUnit, "D")
		run(ctx, t, chromedp.Click(`dialog button[type=submit]`))
		waitText(ctx, t, lakeError, "Too short: 5 days is less than this dataset's minimum, 30 days.")
		require.Equal(t, "ttl-adobe_lakeHouse-value", eval[string](ctx, t, `document.activeElement.id`), "focus goes to the field")
		require.Zero(t, b.updates(t, id), "nothing saved")
		// The chart shows nothing a refused value would delete.
		waitText(ctx, t, "#chart-summary", "Nothing is marked for a value that cannot be saved.")
		require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('svg.chart rect.bar.deleted, svg.chart rect.bar.partly').length`))
		setField(ctx, t, lakeValue, "11")
		setField(ctx, t, lakeUnit, "Y")
		waitText(ctx, t, "#chart-summary", "Too long: 11 years is more than this dataset's maximum, 10 years.")
		setField(ctx, t, lakeValue, "5")
		setField(ctx, t, lakeUnit, "D")
	})

	t.Run("CrossStoreRuleIsMarkedWhereItBites", func(t *testing.T) {
		setField(ctx, t, `#ttl-adobe_unifiedProfile-value`, "2")
		setField(ctx, t, `#ttl-adobe_unifiedProfile-unit`, "Y")
		require.True(t, eval[bool](ctx, t, `document.querySelector('#cross-store').classList.contains('bites')`))
		setField(ctx, t, `#ttl-adobe_unifiedProfile-value`, "12")
		setField(ctx, t, `#ttl-adobe_unifiedProfile-unit`, "M")
	})

	t.Run("SavedValueReachesTheInventoryAndTheAuditLog", func(t *testing.T) {
		setField(ctx, t, lakeValue, "3")
		setField(ctx, t, lakeUnit, "M")
		run(ctx, t, chromedp.Click(`dialog button[type=submit]`), chromedp.WaitNotPresent(`dialog.retention`))
		waitText(ctx, t, fmt.Sprintf(`#inventory tr[data-id=%q] td.ttl-lake`, id), "3 months")
		waitText(ctx, t, fmt.Sprintf(`#inventory tr[data-id=%q] td.ttl-profile`, id), "3 months")
		require.Equal(t, 1, b.updates(t, id), "one Update audit event")
		require.Equal(t, "Set data retention for web-clickstream", eval[string](ctx, t, `document.activeElement.textContent`), "focus returns to the opener")
	})

	t.Run("AuditLogShowsTheUpdate", func(t *testing.T) { testAuditLogShowsTheUpdate(ctx, t, b) })
}

// testRetentionDialogChangedMeanwhile changes journey-feedback (SYSTEM: 30 days to 13 months).
func testRetentionDialogChangedMeanwhile(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, allScopes...))
	b.openDialog(ctx, t, "journey-feedback")

	// Another steward saves first.
	six := retention.Period{Months: 6}
	c := &catalog.Caller{User: "other@acme.example", Org: b.org, Sandbox: catalog.DefaultSandbox}
	_, err := b.datasets.PatchDataset(context.Background(), c, b.ids["journey-feedback"], &catalog.Patch{TTL: map[catalog.Store]*retention.Period{catalog.LakeHouse: &six}}, nil)
	require.NoError(t, err)

	setField(ctx, t, lakeValue, "2")
	run(ctx, t, chromedp.Click(`dialog button[type=submit]`), chromedp.WaitVisible(`#conflict`))
	require.Contains(t, text(ctx, t, "#conflict"), "This dataset changed meanwhile")
	require.True(t, eval[bool](ctx, t, `document.querySelector('`+lakeValue+`').disabled`), "nothing more can be sent from stale values")
	checkAccessibility(ctx, t, "retention dialog, changed meanwhile")
	screenshot(ctx, t, "retention-changed-meanwhile")

	run(ctx, t, chromedp.Click(`#conflict button`), chromedp.WaitNotPresent(`#conflict`))
	waitText(ctx, t, "#ttl-adobe_lakeHouse-limits", "Now: 6 months")
	require.Equal(t, "6", eval[string](ctx, t, `document.querySelector('`+lakeValue+`').value`))
}

// testRetentionDialogReadOnly opens app-sessions with a token that may only read.
func testRetentionDialogReadOnly(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, catalog.ScopeDatasetsRead))
	b.openDialog(ctx, t, "app-sessions")
	require.Contains(t, text(ctx, t, "#read-only"), "lacks the datasets.manage scope")
	require.True(t, eval[bool](ctx, t, `document.querySelector('`+lakeValue+`').disabled`))
	require.True(t, eval[bool](ctx, t, `document.querySelector('#ttl-adobe_unifiedProfile-forever').disabled`))
	require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('dialog button[type=submit]').length`), "no Save")
	checkAccessibility(ctx, t, "retention dialog, read only")

	// The dialog belongs to its page: a typed URL, Back or Forward closes it.
	run(ctx, t, chromedp.Evaluate[chromedp.Void](`location.hash = '#/runs'`), chromedp.WaitNotPresent(`dialog.retention`), chromedp.WaitVisible(`#runs-status`))
	run(ctx, t, chromedp.Evaluate[chromedp.Void](`history.back()`), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
	b.openDialog(ctx, t, "app-sessions")
	run(ctx, t, chromedp.Evaluate[chromedp.Void](`history.forward()`), chromedp.WaitNotPresent(`dialog.retention`), chromedp.WaitVisible(`#runs-status`))
}

// updates counts the Update audit events of a dataset.
func (b *bundle) updates(t *testing.T, id string) int {
	t.Helper()
	var n int
	err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = 'Update'`, id).Scan(&n)
	require.NoError(t, err)
	return n
}

// testRetentionDialogOfARecordDataset opens loyalty-members, a record dataset without a TTL yet, read only: keep
// forever is its value, and the chart says what that deletes.
func testRetentionDialogOfARecordDataset(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, catalog.ScopeDatasetsRead))
	b.openDialog(ctx, t, "loyalty-members")
	require.True(t, eval[bool](ctx, t, `document.querySelector('#ttl-adobe_lakeHouse-forever').checked`), "no TTL is keep forever")
	require.Contains(t, text(ctx, t, "#ttl-adobe_lakeHouse-limits"), "Minimum 1 day, maximum 10 years, default Keep forever")
	require.Contains(t, text(ctx, t, "#chart-summary"), "keep forever deletes")
	checkAccessibility(ctx, t, "retention dialog, record dataset")
}
