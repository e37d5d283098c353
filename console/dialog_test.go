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
func (b *bundle) openDialog(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	run(t, ctx, chromedp.Click(fmt.Sprintf(`#inventory tr[data-id=%q] button.link`, b.ids[name])), chromedp.WaitVisible(`dialog.retention form`))
	waitText(t, ctx, "#chart-summary", "rows")
}

// countPreviews makes the page count its preview requests in window.previews.
func countPreviews(t *testing.T, ctx context.Context) {
	t.Helper()
	eval[bool](t, ctx, `(() => { window.previews = 0; const f = window.fetch;
		window.fetch = (url, opts) => { if (String(url).includes('/preview')) window.previews++; return f(url, opts); }; return true; })()`)
}

// testRetentionDialog changes web-clickstream.
func testRetentionDialog(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(t, ctx, b.token(t, allScopes...))
	id := b.ids["web-clickstream"]
	b.openDialog(t, ctx, "web-clickstream")

	t.Run("ShowsValuesLimitsAndChart", func(t *testing.T) {
		require.Equal(t, "12", eval[string](t, ctx, `document.querySelector('`+lakeValue+`').value`))
		require.Equal(t, "M", eval[string](t, ctx, `document.querySelector('`+lakeUnit+`').value`))
		require.Contains(t, text(t, ctx, "#ttl-adobe_lakeHouse-limits"), "Minimum 30 days, maximum 10 years, default 12 months")
		bars := eval[int](t, ctx, `document.querySelectorAll('svg.chart rect.bar').length`)
		require.GreaterOrEqual(t, bars, 24, "two years of rows by month")
		deleted := eval[int](t, ctx, `document.querySelectorAll('svg.chart rect.bar:not(.kept)').length`)
		require.Positive(t, deleted, "rows older than 12 months are marked")
		require.Contains(t, text(t, ctx, "#chart-summary"), "under 12 months, a run now would delete")
		checkAccessibility(t, ctx, "retention dialog")
		screenshot(t, ctx, "retention-dialog")
	})

	t.Run("ChartFollowsTheValueDebounced", func(t *testing.T) {
		before := eval[string](t, ctx, `document.querySelector('#chart-summary').dataset.rowsToDelete`)
		countPreviews(t, ctx)
		setField(t, ctx, lakeValue, "")
		run(t, ctx, chromedp.SendKeys(lakeValue, "3"))
		waitText(t, ctx, "#chart-summary", "under 3 months")
		after := eval[string](t, ctx, `document.querySelector('#chart-summary').dataset.rowsToDelete`)
		require.NotEqual(t, before, after, "a shorter value deletes more")
		require.LessOrEqual(t, eval[int](t, ctx, `window.previews`), 2, "one preview per pause in typing, not per keystroke")
	})

	t.Run("RefusedValueShowsTheAPIMessageInPlace", func(t *testing.T) {
		setField(t, ctx, lakeValue, "5")
		setField(t, ctx, lakeUnit, "D")
		run(t, ctx, chromedp.Click(`dialog button[type=submit]`))
		waitText(t, ctx, lakeError, "ttlValue P5D is below minValue P30D")
		require.Equal(t, "ttl-adobe_lakeHouse-value", eval[string](t, ctx, `document.activeElement.id`), "focus goes to the field")
		require.Zero(t, b.updates(t, id), "nothing saved")
	})

	t.Run("CrossStoreRuleIsMarkedWhereItBites", func(t *testing.T) {
		setField(t, ctx, `#ttl-adobe_unifiedProfile-value`, "2")
		setField(t, ctx, `#ttl-adobe_unifiedProfile-unit`, "Y")
		require.True(t, eval[bool](t, ctx, `document.querySelector('#cross-store').classList.contains('bites')`))
		setField(t, ctx, `#ttl-adobe_unifiedProfile-value`, "12")
		setField(t, ctx, `#ttl-adobe_unifiedProfile-unit`, "M")
	})

	t.Run("SavedValueReachesTheInventoryAndTheAuditLog", func(t *testing.T) {
		setField(t, ctx, lakeValue, "3")
		setField(t, ctx, lakeUnit, "M")
		run(t, ctx, chromedp.Click(`dialog button[type=submit]`), chromedp.WaitNotPresent(`dialog.retention`))
		waitText(t, ctx, fmt.Sprintf(`#inventory tr[data-id=%q] td.ttl-lake`, id), "3 months")
		waitText(t, ctx, fmt.Sprintf(`#inventory tr[data-id=%q] td.ttl-profile`, id), "3 months")
		require.Equal(t, 1, b.updates(t, id), "one Update audit event")
		require.Equal(t, "Set data retention for web-clickstream", eval[string](t, ctx, `document.activeElement.textContent`), "focus returns to the opener")
	})
}

// testRetentionDialogChangedMeanwhile changes journey-feedback (SYSTEM: 30 days to 13 months).
func testRetentionDialogChangedMeanwhile(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(t, ctx, b.token(t, allScopes...))
	b.openDialog(t, ctx, "journey-feedback")

	// Another steward saves first.
	six := retention.Period{Months: 6}
	c := &catalog.Caller{User: "other@acme.example", Org: b.org, Sandbox: catalog.DefaultSandbox}
	_, err := b.datasets.PatchDataset(context.Background(), c, b.ids["journey-feedback"], &catalog.Patch{TTL: map[catalog.Store]*retention.Period{catalog.LakeHouse: &six}}, nil)
	require.NoError(t, err)

	setField(t, ctx, lakeValue, "2")
	run(t, ctx, chromedp.Click(`dialog button[type=submit]`), chromedp.WaitVisible(`#conflict`))
	require.Contains(t, text(t, ctx, "#conflict"), "This dataset changed meanwhile")
	require.True(t, eval[bool](t, ctx, `document.querySelector('`+lakeValue+`').disabled`), "nothing more can be sent from stale values")
	checkAccessibility(t, ctx, "retention dialog, changed meanwhile")
	screenshot(t, ctx, "retention-changed-meanwhile")

	run(t, ctx, chromedp.Click(`#conflict button`), chromedp.WaitNotPresent(`#conflict`))
	waitText(t, ctx, "#ttl-adobe_lakeHouse-limits", "Now: 6 months")
	require.Equal(t, "6", eval[string](t, ctx, `document.querySelector('`+lakeValue+`').value`))
}

// testRetentionDialogReadOnly opens app-sessions with a token that may only read.
func testRetentionDialogReadOnly(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(t, ctx, b.token(t, catalog.ScopeDatasetsRead))
	b.openDialog(t, ctx, "app-sessions")
	require.Contains(t, text(t, ctx, "#read-only"), "lacks the datasets.manage scope")
	require.True(t, eval[bool](t, ctx, `document.querySelector('`+lakeValue+`').disabled`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('#ttl-adobe_unifiedProfile-forever').disabled`))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('dialog button[type=submit]').length`), "no Save")
	checkAccessibility(t, ctx, "retention dialog, read only")
}

// updates counts the Update audit events of a dataset.
func (b *bundle) updates(t *testing.T, id string) int {
	t.Helper()
	var n int
	err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = 'Update'`, id).Scan(&n)
	require.NoError(t, err)
	return n
}
