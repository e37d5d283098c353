package console_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
)

// signIn opens the console with the token in the link's fragment, as `make run` prints it, and waits for the
// inventory's first page.
func (b *bundle) signIn(ctx context.Context, t *testing.T, token string) {
	t.Helper()
	run(ctx, t, chromedp.Navigate(b.url+"/ui/#token="+token), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
}

// setField sets a control's value as a user would, firing its input and change events.
func setField(ctx context.Context, t *testing.T, sel, value string) {
	t.Helper()
	eval[bool](ctx, t, fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value))
}

// names are the dataset names of the inventory's page, in order.
func names(ctx context.Context, t *testing.T) []string {
	t.Helper()
	return eval[[]string](ctx, t, `[...document.querySelectorAll('#inventory tbody tr[data-id] th.name .ds-name')].map(th => th.textContent)`)
}

// waitNames waits until the inventory shows exactly want.
func waitNames(ctx context.Context, t *testing.T, want ...string) {
	t.Helper()
	js := fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#inventory tbody tr[data-id] th.name .ds-name')].map(th => th.textContent)) === %q`, mustJSON(want))
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		t.Fatalf("inventory never showed %v; it shows %v (%v)", want, names(ctx, t), err)
	}
}

// TestConsole drives the console in Chromium against one API on the demo data; after the inventory, its parts run in
// parallel tabs, each on a dataset the others leave alone.
func TestConsole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The inventory first and alone: its screenshot and values are the demo data's, before the dialogs change any.
	t.Run("Inventory", func(t *testing.T) { testInventory(t, b) })
	// Alone as well, so that its figures are the inventory's and not the other parts' load.
	t.Run("TenThousandDatasets", func(t *testing.T) { testTenThousandDatasets(t, b) })
	// Alone too: a run of another part would change the backlog between the page's read and the test's.
	t.Run("Backlog", func(t *testing.T) { testBacklog(t, b) })
	for name, part := range map[string]func(*testing.T, *bundle){
		"ServedByTheAPI": testServedByTheAPI, "RetentionDialog": testRetentionDialog,
		"RetentionDialogChangedMeanwhile":           testRetentionDialogChangedMeanwhile,
		"RetentionDialogReadOnlyWithoutManageScope": testRetentionDialogReadOnly,
		"Runs": testRuns, "RunsReadOnlyWithoutRunScope": testRunsReadOnly,
		"Holds": testHolds, "HoldsReadOnlyWithoutHoldScope": testHoldsReadOnly,
		"AuditChainBroken":                testAuditChainBroken,
		"RetentionDialogOfARecordDataset": testRetentionDialogOfARecordDataset,
		"LinkNeverReplacesASession":       testLinkNeverReplacesASession,
		"ExplainARow":                     testExplainARow,
		"RecordDeleteByTyping":            testRecordDeleteByTyping,
		"RecordDeleteByUpload":            testRecordDeleteByUpload,
		"RecordDeletesReadOnly":           testRecordDeletesReadOnly,
		"RecordDeleteHeld":                testRecordDeleteHeld,
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
	b.signIn(ctx, t, b.token(t, allScopes...))

	t.Run("FirstPageSortedByName", func(t *testing.T) {
		require.Equal(t, []string{"app-sessions", "journey-feedback", "loyalty-members", "web-clickstream"}, names(ctx, t))
		require.Equal(t, "Showing datasets 1 to 4.", text(ctx, t, "#inventory-status"))
		row := fmt.Sprintf(`#inventory tr[data-id=%q]`, b.ids["app-sessions"])
		require.Equal(t, "20,000", text(ctx, t, row+" td.num"), "rows with thousands separators")
		require.Equal(t, "12 months", text(ctx, t, row+" td.ttl-lake"))
		require.Equal(t, "Keep forever", text(ctx, t, fmt.Sprintf(`#inventory tr[data-id=%q] td.ttl-lake`, b.ids["loyalty-members"])), "a record dataset without a TTL yet")
		require.Equal(t, "None (kept forever)", text(ctx, t, fmt.Sprintf(`#inventory tr[data-id=%q] td.next-job`, b.ids["loyalty-members"])),
			"no retention job date for a dataset kept forever")
		require.NotEqual(t, "—", text(ctx, t, fmt.Sprintf(`#inventory tr[data-id=%q] td.rows`, b.ids["loyalty-members"])), "a record dataset has metrics")
		require.Equal(t, "favicon.svg", eval[string](ctx, t, `document.querySelector('link[rel=icon]').getAttribute('href')`),
			"the page names its icon, so the browser asks for no /favicon.ico")
		hash := eval[string](ctx, t, `location.hash`)
		require.Equal(t, "#/datasets", hash, "the token left the URL")
		checkAccessibility(ctx, t, "datasets")
		screenshot(ctx, t, "datasets")
	})

	t.Run("SortByNameDescending", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#inventory th[aria-sort] button`))
		waitNames(ctx, t, "web-clickstream", "loyalty-members", "journey-feedback", "app-sessions")
		require.Equal(t, "descending", eval[string](ctx, t, `document.querySelector('#inventory thead th').getAttribute('aria-sort')`))
	})

	t.Run("SortByManagedBy", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(3) button`))
		waitNames(ctx, t, "app-sessions", "loyalty-members", "web-clickstream", "journey-feedback")
	})

	t.Run("SortByRowsBothWays", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(1) button`))
		waitNames(ctx, t, "app-sessions", "journey-feedback", "loyalty-members", "web-clickstream")
		rows := eval[map[string]int](ctx, t, `Object.fromEntries([...document.querySelectorAll('#inventory tbody tr[data-id]')].map(tr =>
			[tr.querySelector('.ds-name').textContent, Number(tr.querySelector('td.num').textContent.replace(/\D/g, '')) || 0]))`)
		byRows := slices.Collect(maps.Keys(rows))
		slices.SortFunc(byRows, func(a, b string) int { return cmp.Or(cmp.Compare(rows[a], rows[b]), cmp.Compare(a, b)) })
		run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(6) button`))
		waitNames(ctx, t, byRows...)
		slices.SortFunc(byRows, func(a, b string) int { return cmp.Or(cmp.Compare(rows[b], rows[a]), cmp.Compare(a, b)) })
		run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(6) button`))
		waitNames(ctx, t, byRows...)
		require.Equal(t, "descending", eval[string](ctx, t, `document.querySelector('#inventory thead th:nth-child(6)').getAttribute('aria-sort')`))
		require.Positive(t, rows["app-sessions"])
	})

	t.Run("SortByStorageBothWays", func(t *testing.T) {
		for _, dir := range []string{"ascending", "descending"} {
			run(ctx, t, chromedp.Click(`#inventory thead th:nth-child(7) button`))
			waitSorted(ctx, t, 7, dir)
			// The exact bytes are in each cell's title; a dataset without a storage would have none (every dataset,
			// records included, has one now: 0 without rows).
			shown := eval[[]storageCell](ctx, t, `[...document.querySelectorAll('#inventory tbody tr[data-id]')].map(tr => ({
				name: tr.querySelector('.ds-name').textContent,
				bytes: tr.querySelector('td.storage').title ? Number(tr.querySelector('td.storage').title.replace(/\D/g, '')) : -1 }))`)
			want := slices.Clone(shown)
			slices.SortStableFunc(want, func(a, b storageCell) int {
				if (a.Bytes < 0) != (b.Bytes < 0) {
					return cmp.Compare(b.Bytes, a.Bytes) // none last, either way
				}
				if dir == "descending" {
					a, b = b, a
				}
				return cmp.Compare(a.Bytes, b.Bytes)
			})
			require.Equal(t, want, shown, "sorted %s by the storage shown, none last", dir)
			require.Positive(t, slices.MaxFunc(shown, func(a, b storageCell) int { return cmp.Compare(a.Bytes, b.Bytes) }).Bytes)
		}
		require.Contains(t, eval[string](ctx, t, `location.hash`), "sort=desc%3Aextensions.adobe_lakeHouse.metrics.storageSize")
	})

	t.Run("FilterByName", func(t *testing.T) {
		setField(ctx, t, "#filter-name", "CLICK")
		run(ctx, t, chromedp.Click(`form[role=search] button[type=submit]`))
		waitNames(ctx, t, "web-clickstream")
	})

	t.Run("FilterByTag", func(t *testing.T) {
		setField(ctx, t, "#filter-name", "")
		setField(ctx, t, "#filter-tag", "team:mobile")
		run(ctx, t, chromedp.Click(`form[role=search] button[type=submit]`))
		waitNames(ctx, t, "app-sessions")
	})

	t.Run("NoMatchIsSaid", func(t *testing.T) {
		setField(ctx, t, "#filter-tag", "team:nobody")
		run(ctx, t, chromedp.Click(`form[role=search] button[type=submit]`))
		waitText(ctx, t, "#inventory-status", "No datasets match these filters.")
		require.Empty(t, names(ctx, t))
	})

	t.Run("NarrowWindow", func(t *testing.T) {
		run(ctx, t, chromedp.EmulateViewport(narrowWidth, viewportHeight))
		defer run(ctx, t, chromedp.EmulateViewport(viewportWidth, viewportHeight))
		require.True(t, eval[bool](ctx, t, `new Promise(r => requestAnimationFrame(() => r(true)))`))
		require.LessOrEqual(t, eval[int](ctx, t, `document.documentElement.scrollWidth`), narrowWidth, "nothing leaves the page sideways")
		require.True(t, eval[bool](ctx, t, `(() => { const links = [...document.querySelectorAll('#nav a')].map(a => a.getBoundingClientRect().top);
			return links.every(top => top === links[0]); })()`), "the navigation on one line")
		require.True(t, eval[bool](ctx, t, `(() => { const bar = document.querySelector('header.top').getBoundingClientRect();
			const out = document.querySelector('#signout').getBoundingClientRect();
			return out.left >= bar.left && out.right <= bar.right && out.top >= bar.top && out.bottom <= bar.bottom; })()`), "Sign out inside the bar")
		require.True(t, eval[bool](ctx, t, `(() => { const w = document.querySelector('.table-wrap'); return w.scrollWidth > w.clientWidth && w.getBoundingClientRect().right <= innerWidth; })()`),
			"the table scrolls in its box")
		checkAccessibility(ctx, t, "datasets, 800 px")
	})

	t.Run("SignOutForgetsTheToken", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#signout`), chromedp.WaitVisible(`form.signin`))
		require.Equal(t, "", eval[string](ctx, t, `sessionStorage.getItem('token') || ''`))
		require.Equal(t, "none", eval[string](ctx, t, `getComputedStyle(document.querySelector('#session')).display`), "no sandbox box nor Sign out on the sign-in page")
		checkAccessibility(ctx, t, "sign-in")
		screenshot(ctx, t, "sign-in")
	})

	t.Run("ARefusedTokenSaysWhatToDo", func(t *testing.T) {
		foreign, err := httpapi.MintToken("another-secret-of-at-least-32-bytes!!", httpapi.Claims{
			RegisteredClaims: jwt.RegisteredClaims{Subject: "steward@acme.example", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
			Org:              b.org, Scope: catalog.ScopeDatasetsRead,
		})
		require.NoError(t, err)
		setField(ctx, t, "#token", foreign)
		run(ctx, t, chromedp.Click(`form.signin button[type=submit]`))
		waitText(ctx, t, "#signin-error", "Get a new one with ./bin/retentionctl token")
		require.Equal(t, "none", eval[string](ctx, t, `getComputedStyle(document.querySelector('#session')).display`))
		setField(ctx, t, "#token", "TOKEN=not-a-token")
		run(ctx, t, chromedp.Click(`form.signin button[type=submit]`))
		waitText(ctx, t, "#signin-error", "Paste the token alone (it starts with eyJ)")
	})

	t.Run("SignInByPastingAToken", func(t *testing.T) {
		// The banner's whole line, as a user copies it.
		setField(ctx, t, "#token", "  export TOKEN="+b.token(t, catalog.ScopeDatasetsRead)+"\n")
		run(ctx, t, chromedp.Click(`form.signin button[type=submit]`), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
		waitNames(ctx, t, "app-sessions", "journey-feedback", "loyalty-members", "web-clickstream")
	})

	t.Run("AnotherSandboxIsEmpty", func(t *testing.T) {
		setField(ctx, t, "#sandbox", "dev")
		waitText(ctx, t, "#inventory-status", "No datasets yet in this sandbox")
		require.Empty(t, names(ctx, t))
	})

	t.Run("ASandboxTheAPIWouldRefuseIsNotKept", func(t *testing.T) {
		setField(ctx, t, "#sandbox", "dev\u2028x")
		require.Equal(t, "dev", eval[string](ctx, t, `sessionStorage.getItem('sandbox')`))
		require.False(t, eval[bool](ctx, t, `document.querySelector('#sandbox').validity.valid`))
	})
}

// storageCell is a dataset's name and the exact storage its inventory row shows, -1 for none.
type storageCell struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// waitSorted waits until the inventory is drawn sorted by its column-th column in dir (ascending, descending).
func waitSorted(ctx context.Context, t *testing.T, column int, dir string) {
	t.Helper()
	js := fmt.Sprintf(`document.querySelector('#inventory thead th:nth-child(%d)').getAttribute('aria-sort') === %q &&
		!!document.querySelector('#inventory tbody tr[data-id]')`, column, dir)
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		t.Fatalf("the inventory was never sorted %s by column %d: %v", dir, column, err)
	}
}

// testLinkNeverReplacesASession: a link with another token, opened in a tab with a session (by a click, or typed
// over the tab's address), changes nothing until the user chooses, with both identities shown; a link's sandbox is
// checked as the API checks it.
func testLinkNeverReplacesASession(t *testing.T, b *bundle) {
	ctx := tab(t)
	mine := b.token(t, allScopes...)
	b.signIn(ctx, t, mine)
	theirs := tokenAs(t, "mallory@evil.example", "EVIL@AdobeOrg", catalog.ScopeDatasetsRead)
	stored := func() string { return eval[string](ctx, t, `sessionStorage.getItem('token') || ''`) }

	t.Run("AskedWithBothIdentities", func(t *testing.T) {
		run(ctx, t, chromedp.Evaluate[chromedp.Void](`location.hash = '#token=`+theirs+`'`), chromedp.WaitVisible(`#link-choice`))
		choice := text(ctx, t, "#link-choice")
		require.Contains(t, choice, "steward@acme.example · "+b.org)
		require.Contains(t, choice, "mallory@evil.example · EVIL@AdobeOrg")
		require.Equal(t, mine, stored(), "nothing replaced before the user chooses")
		require.NotContains(t, eval[string](ctx, t, `location.href`), theirs, "the token left the URL")
		checkAccessibility(ctx, t, "link choice")
	})

	t.Run("StayKeepsTheSession", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#link-keep`), chromedp.WaitVisible(`#inventory tbody tr[data-id]`))
		require.Equal(t, mine, stored())
	})

	t.Run("AtALoadToo", func(t *testing.T) {
		run(ctx, t, chromedp.Navigate(b.url+"/ui/?again#token="+theirs), chromedp.WaitVisible(`#link-choice`))
		require.Equal(t, mine, stored())
	})

	t.Run("SwitchTakesTheLink", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#link-switch`))
		waitText(ctx, t, "#who", "mallory@evil.example · EVIL@AdobeOrg")
		require.Equal(t, theirs, stored())
	})

	t.Run("ASandboxTheAPIWouldRefuseIsRefused", func(t *testing.T) {
		run(ctx, t, chromedp.Evaluate[chromedp.Void](`location.hash = '#token=`+theirs+`&sandbox=dev%E2%80%A8'`), chromedp.WaitVisible(`#link-refused`))
		require.Contains(t, text(ctx, t, "#link-refused"), "is not a sandbox name")
		require.Equal(t, "prod", eval[string](ctx, t, `document.querySelector('#sandbox').value`))
		require.Equal(t, "", eval[string](ctx, t, `sessionStorage.getItem('sandbox') || ''`))
	})
}

// tokenAs mints a token of another user and org.
func tokenAs(t *testing.T, user, org string, scopes ...string) string {
	t.Helper()
	token, err := httpapi.MintToken(testSecret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: user, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Org:              org, ClientID: "console-test", Scope: scopes[0],
	})
	require.NoError(t, err)
	return token
}
