package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// openDataset opens a dataset's page from the inventory's name link.
func (b *bundle) openDataset(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	run(ctx, t, chromedp.Click(fmt.Sprintf(`#inventory tr[data-id=%q] a.ds-name`, b.ids[name])), chromedp.WaitVisible(`#holds h2`))
}

// testHolds places and releases a hold on loyalty-members, which also gets a pending dataset expiration; the other
// parts leave it alone once the inventory part has read it.
func testHolds(t *testing.T, b *bundle) {
	id := b.ids["loyalty-members"]
	expiry := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 40)
	c := &catalog.Caller{User: "steward@acme.example", Org: b.org, Sandbox: catalog.DefaultSandbox}
	_, err := postgres.NewExpirationService(b.db, 20).CreateExpiration(context.Background(), c,
		catalog.ExpirationCreate{DatasetID: id, Expiry: expiry, DisplayName: "Retire the loyalty export"})
	require.NoError(t, err)
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, append(allScopes, catalog.ScopeRetentionHold)...))
	b.openDataset(ctx, t, "loyalty-members")

	t.Run("ShowsThePendingExpiration", func(t *testing.T) {
		require.Contains(t, text(ctx, t, "#pending-expiration"), "scheduled to be deleted, whole, on")
		require.Contains(t, text(ctx, t, "#expiration-status"), "To be deleted, with all its rows, on")
		require.Equal(t, expiry.Format("2006-01-02T15:04:05.000Z"), eval[string](ctx, t, `document.querySelector('#pending-expiration time').dateTime`))
		require.Contains(t, text(ctx, t, "#holds-status"), "Not held")
	})

	t.Run("RefusedHoldShowsTheAPIMessage", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#hold-place`))
		waitText(ctx, t, "#hold-error", "reason")
		require.Zero(t, b.auditEvents(t, id, "Hold"), "nothing placed")
	})

	t.Run("PlaceAHold", func(t *testing.T) {
		setField(ctx, t, "#hold-reason", "litigation hold")
		setField(ctx, t, "#hold-reference", "case 2026-114")
		run(ctx, t, chromedp.Click(`#hold-place`))
		waitText(ctx, t, "#holds-status", "Held: 1 active hold.")
		require.Equal(t, "litigation hold", text(ctx, t, "#holds-table tbody th.reason"))
		require.Equal(t, 1, b.auditEvents(t, id, "Hold"))
		checkAccessibility(ctx, t, "dataset, held")
		screenshot(ctx, t, "dataset")
	})

	t.Run("InventoryShowsHeldAndTheExpiration", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#nav-datasets`), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
		row := fmt.Sprintf(`#inventory tr[data-id=%q]`, id)
		waitText(ctx, t, row+" td.held", "Held (1)")
		require.Contains(t, text(ctx, t, row+" th.name .expiry"), "to be deleted on")
		require.Equal(t, "rgb(74, 85, 104)", eval[string](ctx, t, fmt.Sprintf(`getComputedStyle(document.querySelector('%s th.name .expiry')).color`, row)),
			"a planned deletion in the muted text colour, not the error red")
		run(ctx, t, chromedp.Click(`#filter-held`), chromedp.Click(`form[role=search] button[type=submit]`))
		waitNames(ctx, t, "loyalty-members")
		require.Contains(t, eval[string](ctx, t, `location.hash`), "held=1")
	})

	// No run removes a held dataset's rows: its next retention job comes after the release, and sorted by it, it
	// comes after the datasets the next run will visit (the other parts hold none).
	t.Run("InventorySortsTheHeldDatasetAfterTheNextRun", func(t *testing.T) {
		run(ctx, t, chromedp.Evaluate[chromedp.Void](`location.hash = '#/datasets'`))
		waitSorted(ctx, t, 1, "ascending")
		row := fmt.Sprintf(`#inventory tr[data-id=%q]`, id)
		waitText(ctx, t, row+" td.next-job", "After release")
		require.NotEmpty(t, eval[string](ctx, t, fmt.Sprintf(`document.querySelector('#inventory tr[data-id=%q] td.next-job time').dateTime`, b.ids["app-sessions"])),
			"a dataset that is not held has the store's next run")
		run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(10) button`))
		waitSorted(ctx, t, 10, "ascending")
		waitNames(ctx, t, "app-sessions", "journey-feedback", "web-clickstream", "loyalty-members")
		checkAccessibility(ctx, t, "datasets, sorted by next retention job")
		run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(10) button`))
		waitSorted(ctx, t, 10, "descending")
		waitNames(ctx, t, "loyalty-members", "app-sessions", "journey-feedback", "web-clickstream")
	})

	t.Run("ReleaseAfterConfirming", func(t *testing.T) {
		b.openDataset(ctx, t, "loyalty-members")
		run(ctx, t, chromedp.Click(`#holds-table button.release-ask`), chromedp.WaitVisible(`#holds-table button.release-confirm`))
		require.Zero(t, b.auditEvents(t, id, "Release"), "one click releases nothing")
		checkAccessibility(ctx, t, "dataset, confirm release")
		run(ctx, t, chromedp.Click(`#holds-table button.release-confirm`))
		waitText(ctx, t, "#holds-status", "Not held")
		require.Equal(t, 1, b.auditEvents(t, id, "Release"))
	})

	t.Run("MoveCancelAndScheduleTheDeletion", func(t *testing.T) {
		later := expiry.AddDate(0, 0, 10)
		setField(ctx, t, "#expiration-day", later.Format(time.DateOnly))
		run(ctx, t, chromedp.Click(`#expiration-save`))
		waitText(ctx, t, "#expiration-status", "To be deleted")
		waitAttr(ctx, t, "#expiration-status time", "dateTime", later.Format("2006-01-02T15:04:05.000Z"))
		run(ctx, t, chromedp.Click(`#expiration-cancel`), chromedp.WaitVisible(`#expiration-cancel-confirm`))
		checkAccessibility(ctx, t, "dataset, confirm cancelling the deletion")
		run(ctx, t, chromedp.Click(`#expiration-cancel-confirm`))
		waitText(ctx, t, "#expiration-status", "No deletion scheduled")
		require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('#pending-expiration').length`))
		setField(ctx, t, "#expiration-day", "2020-01-01")
		run(ctx, t, chromedp.Click(`#expiration-save`))
		waitText(ctx, t, "#expiration-error", "a deletion is scheduled at least a day ahead")
		setField(ctx, t, "#expiration-day", later.Format(time.DateOnly))
		run(ctx, t, chromedp.Click(`#expiration-save`))
		waitText(ctx, t, "#expiration-status", "To be deleted")
		checkAccessibility(ctx, t, "dataset, deletion scheduled")
	})
}

// waitAttr waits until the first element matching sel has the property prop equal to want.
func waitAttr(ctx context.Context, t *testing.T, sel, prop, want string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el[%q] === %q; })()`, sel, prop, want)
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		t.Fatalf("%s never had %s %q: %v", sel, prop, want, err)
	}
}

// testHoldsReadOnly: a token without retention.hold sees the holds but can neither place nor release one.
func testHoldsReadOnly(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, allScopes...))
	b.openDataset(ctx, t, "journey-feedback")
	require.Contains(t, text(ctx, t, "#holds-read-only"), "takes the retention.hold scope")
	require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('#place-hold, button.release-ask').length`))
	checkAccessibility(ctx, t, "dataset, read only")

	// Without datasets.manage, the dataset's expiration is shown and not offered for change.
	read := tab(t)
	b.signIn(read, t, b.token(t, catalog.ScopeDatasetsRead))
	b.openDataset(read, t, "journey-feedback")
	require.Contains(t, text(read, t, "#expiration-read-only"), "takes the datasets.manage scope")
	require.Zero(t, eval[int](read, t, `document.querySelectorAll('#expiration-form').length`))
}

// auditEvents counts a dataset's audit events of one action.
func (b *bundle) auditEvents(t *testing.T, id, action string) int {
	t.Helper()
	var n int
	err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = $2`, id, action).Scan(&n)
	require.NoError(t, err)
	return n
}
