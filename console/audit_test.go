package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/demo"
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

// testAuditChainBroken edits an event of the demo's second org (Globex, whose chain no other part reads) as only a
// superuser could, with the audit tables' triggers off: the verification names the first broken event, and its link
// opens the log at that event.
func testAuditChainBroken(t *testing.T, b *bundle) {
	org := demo.Orgs[1]
	var id string
	var seq int64
	err := b.db.Pool.QueryRow(context.Background(), `SELECT id, seq FROM audit_events WHERE org_id = $1 ORDER BY seq OFFSET 1 LIMIT 1`, org).Scan(&id, &seq)
	require.NoError(t, err)
	tx, err := b.db.Pool.Begin(context.Background())
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), `SET LOCAL session_replication_role = replica`)
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), `UPDATE audit_events SET user_id = 'someone-else' WHERE id = $1`, id)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(context.Background()))

	ctx := tab(t)
	run(ctx, t, chromedp.Navigate(b.url+"/ui/#token="+tokenOf(t, org, allScopes...)), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
	run(ctx, t, chromedp.Click(`#nav-audit`), chromedp.WaitVisible(`#audit-verify`))
	run(ctx, t, chromedp.Click(`#audit-verify`), chromedp.WaitVisible(`#audit-broken`))
	require.Contains(t, text(ctx, t, "#audit-tools-status"), fmt.Sprintf("The chain is broken at event #%d", seq))
	checkAccessibility(ctx, t, "audit log, chain broken")

	run(ctx, t, chromedp.Click(`#audit-broken`), chromedp.WaitVisible(`#audit tr.event[aria-current]`))
	require.Equal(t, id, eval[string](ctx, t, `document.querySelector('#audit tr.event[aria-current]').dataset.id`), "the link opens the broken event")
	require.Contains(t, text(ctx, t, fmt.Sprintf(`#event-%s`, id)), id, "its details shown")
	require.Equal(t, "someone-else", text(ctx, t, `#audit tr.event[aria-current] td:nth-child(4)`))
}
