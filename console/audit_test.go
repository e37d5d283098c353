package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// testAuditLogShowsTheUpdate follows a save of the dialog (web-clickstream's lake from 12 to 3 months) into the
// audit log: the Update event filtered by action and asset, its rowExpiration diff, the export of the same filters
// and the chain's verification.
func testAuditLogShowsTheUpdate(ctx context.Context, t *testing.T, b *bundle) {
	run(ctx, t, chromedp.Click(`#nav-audit`), chromedp.WaitVisible(`#audit-action`))
	waitText(ctx, t, "#audit-status", "Showing events 1 to")

	t.Run("FilteredByActionAndAsset", func(t *testing.T) {
		setField(ctx, t, "#audit-action", "Update")
		setField(ctx, t, "#audit-asset", "web-clickstream")
		run(ctx, t, chromedp.Click(`form[role=search] button[type=submit]`))
		waitText(ctx, t, "#audit-status", "Showing events 1 to 1 of 1.")
		require.Equal(t, "#/audit?action=Update&asset=web-clickstream", eval[string](ctx, t, `location.hash`), "the filters are in the link")
		require.Equal(t, []string{"Update"}, eval[[]string](ctx, t, `[...document.querySelectorAll('#audit tr.event')].map(tr => tr.dataset.action)`))
	})

	t.Run("DetailsShowTheRowExpirationDiff", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#audit tr.event button.link`))
		lake := `#audit tr.details:not([hidden]) tr[data-field="rowExpiration.adobe_lakeHouse.ttlValue"]`
		require.Equal(t, "P12M", text(ctx, t, lake+" td.before"))
		require.Equal(t, "P3M", text(ctx, t, lake+" td.after"))
		require.Equal(t, "changed", eval[string](ctx, t, fmt.Sprintf(`document.querySelector(%q).className`, lake)))
		require.Equal(t, "P3M", text(ctx, t, `#audit tr.details:not([hidden]) tr[data-field="rowExpiration.adobe_unifiedProfile.ttlValue"] td.after`),
			"the profile lowered with the lake")
		checkAccessibility(ctx, t, "audit log, event details")
		screenshot(ctx, t, "audit-log")
	})

	t.Run("ExportCSVAndJSON", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#audit-export-csv`))
		waitText(ctx, t, "#audit-tools-status", "Exported 1 event of the last 365 days to audit-events-")
		require.Contains(t, text(ctx, t, "#audit-tools-status"), ".csv")
		run(ctx, t, chromedp.Click(`#audit-export-json`))
		waitText(ctx, t, "#audit-tools-status", ".json")
		require.Equal(t, fmt.Sprint(b.updates(t, b.ids["web-clickstream"])), eval[string](ctx, t, `document.querySelector('#audit-tools-status').dataset.exported`),
			"the export holds the filtered events, as many as the database has")
	})

	t.Run("VerifyTheChain", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#audit-verify`))
		waitText(ctx, t, "#audit-tools-status", "Verified ")
		require.Contains(t, text(ctx, t, "#audit-tools-status"), "of sandbox prod: the chain is intact")
		checkAccessibility(ctx, t, "audit log, verified")
	})

	t.Run("NoMatchIsSaid", func(t *testing.T) {
		setField(ctx, t, "#audit-user", "nobody@acme.example")
		run(ctx, t, chromedp.Click(`form[role=search] button[type=submit]`))
		waitText(ctx, t, "#audit-status", "No events match these filters.")
		require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('#audit tr.event').length`))
	})
}
