package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// signIn opens the console with the token in the link's fragment, as `make run` prints it, and waits for the
// inventory's first page.
func (b *bundle) signIn(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(b.url+"/ui/#token="+token), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
}

// setField sets a control's value as a user would, firing its input and change events.
func setField(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value))
}

// names are the dataset names of the inventory's page, in order.
func names(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll('#inventory tbody tr[data-id] th.name')].map(th => th.textContent)`)
}

// waitNames waits until the inventory shows exactly want.
func waitNames(t *testing.T, ctx context.Context, want ...string) {
	t.Helper()
	js := fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#inventory tbody tr[data-id] th.name')].map(th => th.textContent)) === %q`, mustJSON(want))
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		t.Fatalf("inventory never showed %v; it shows %v (%v)", want, names(t, ctx), err)
	}
}

// TestConsole drives the console in Chromium against one API on the demo data; its parts run in parallel tabs, each
// on datasets the others leave alone.
func TestConsole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, part := range map[string]func(*testing.T, *bundle){
		"ServedByTheAPI": testServedByTheAPI, "Inventory": testInventory, "RetentionDialog": testRetentionDialog,
		"RetentionDialogChangedMeanwhile": testRetentionDialogChangedMeanwhile,
		"RetentionDialogReadOnlyWithoutManageScope": testRetentionDialogReadOnly,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			part(t, b)
		})
	}
}

// testInventory: sign in by link, sort, filter, sign out, sign in by pasting, another sandbox. It reads only
// datasets the other parts leave alone (app-sessions, loyalty-members) where values matter.
func testInventory(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(t, ctx, b.token(t, allScopes...))

	t.Run("FirstPageSortedByName", func(t *testing.T) {
		require.Equal(t, []string{"app-sessions", "journey-feedback", "loyalty-members", "web-clickstream"}, names(t, ctx))
		require.Equal(t, "Showing datasets 1 to 4.", text(t, ctx, "#inventory-status"))
		row := fmt.Sprintf(`#inventory tr[data-id=%q]`, b.ids["app-sessions"])
		require.Equal(t, "20,000", text(t, ctx, row+" td.num"), "rows with thousands separators")
		require.Equal(t, "12 months", text(t, ctx, row+" td.ttl-lake"))
		require.Equal(t, "n/a", text(t, ctx, fmt.Sprintf(`#inventory tr[data-id=%q] td.ttl-lake`, b.ids["loyalty-members"])))
		hash := eval[string](t, ctx, `location.hash`)
		require.Equal(t, "#/datasets", hash, "the token left the URL")
		checkAccessibility(t, ctx, "datasets")
		screenshot(t, ctx, "datasets")
	})

	t.Run("SortByNameDescending", func(t *testing.T) {
		run(t, ctx, chromedp.Click(`#inventory th[aria-sort] button`))
		waitNames(t, ctx, "web-clickstream", "loyalty-members", "journey-feedback", "app-sessions")
		require.Equal(t, "descending", eval[string](t, ctx, `document.querySelector('#inventory thead th').getAttribute('aria-sort')`))
	})

	t.Run("SortByManagedBy", func(t *testing.T) {
		run(t, ctx, chromedp.Click(`#inventory thead th:nth-child(3) button`))
		waitNames(t, ctx, "app-sessions", "loyalty-members", "web-clickstream", "journey-feedback")
	})

	t.Run("FilterByName", func(t *testing.T) {
		setField(t, ctx, "#filter-name", "CLICK")
		run(t, ctx, chromedp.Click(`form[role=search] button[type=submit]`))
		waitNames(t, ctx, "web-clickstream")
	})

	t.Run("FilterByTag", func(t *testing.T) {
		setField(t, ctx, "#filter-name", "")
		setField(t, ctx, "#filter-tag", "team:mobile")
		run(t, ctx, chromedp.Click(`form[role=search] button[type=submit]`))
		waitNames(t, ctx, "app-sessions")
	})

	t.Run("NoMatchIsSaid", func(t *testing.T) {
		setField(t, ctx, "#filter-tag", "team:nobody")
		run(t, ctx, chromedp.Click(`form[role=search] button[type=submit]`))
		waitText(t, ctx, "#inventory-status", "No datasets match these filters.")
		require.Empty(t, names(t, ctx))
	})

	t.Run("SignOutForgetsTheToken", func(t *testing.T) {
		run(t, ctx, chromedp.Click(`#signout`), chromedp.WaitVisible(`form.signin`))
		require.Equal(t, "", eval[string](t, ctx, `sessionStorage.getItem('token') || ''`))
		checkAccessibility(t, ctx, "sign-in")
		screenshot(t, ctx, "sign-in")
	})

	t.Run("SignInByPastingAToken", func(t *testing.T) {
		setField(t, ctx, "#token", "Bearer "+b.token(t, catalog.ScopeDatasetsRead))
		run(t, ctx, chromedp.Click(`form.signin button[type=submit]`), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
		waitNames(t, ctx, "app-sessions", "journey-feedback", "loyalty-members", "web-clickstream")
	})

	t.Run("AnotherSandboxIsEmpty", func(t *testing.T) {
		setField(t, ctx, "#sandbox", "dev")
		waitText(t, ctx, "#inventory-status", "No datasets yet in this sandbox")
		require.Empty(t, names(t, ctx))
	})
}
