package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
)

// Each record-delete part works in a sandbox of its own, so that its orders, datasets and holds are apart from the
// demo data the other parts read and from one another.

// caller is the test's steward in sandbox.
func (b *bundle) caller(sandbox string) *catalog.Caller {
	return &catalog.Caller{User: "steward@acme.example", Org: b.org, Sandbox: sandbox}
}

// identityDataset creates a dataset in sandbox and ingests, through the API, one row per e-mail carrying it in its
// identityMap; it returns the dataset's id.
func (b *bundle) identityDataset(t *testing.T, sandbox, name string, emails ...string) string {
	t.Helper()
	ds, err := b.datasets.CreateDataset(context.Background(), b.caller(sandbox), catalog.DatasetCreate{Name: name,
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	var lines []string
	for i, e := range emails {
		lines = append(lines, fmt.Sprintf(`{"timestamp":"2026-11-20T10:00:00Z","_id":"%s-%d","identityMap":{"email":[{"id":%q,"primary":true}]}}`, name, i, e))
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.url+"/dataSets/"+ds.ID+"/rows", strings.NewReader(strings.Join(lines, "\n")))
	require.NoError(t, err)
	for k, v := range map[string]string{"Authorization": "Bearer " + b.token(t, allScopes...), "x-api-key": "console-test",
		"x-gw-ims-org-id": b.org, "x-sandbox-name": sandbox, "Content-Type": "application/x-ndjson"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "rows ingested")
	return ds.ID
}

// executeOrder carries an order forward as its River job does.
func (b *bundle) executeOrder(t *testing.T, id string) {
	t.Helper()
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, "console-test-key"), nil).Execute(context.Background(), id))
}

// createOrder creates an order in sandbox through the service, as another client would.
func (b *bundle) createOrder(t *testing.T, sandbox, datasetID, name string, ids ...catalog.Identity) string {
	t.Helper()
	w, err := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{}).CreateWorkOrder(context.Background(), b.caller(sandbox),
		catalog.WorkOrderCreate{DisplayName: name, DatasetID: datasetID, Identities: ids})
	require.NoError(t, err)
	return w.ID
}

// openRecordDeletes signs in with scopes, switches to sandbox and opens the Record deletes page.
func (b *bundle) openRecordDeletes(ctx context.Context, t *testing.T, sandbox string, scopes ...string) {
	t.Helper()
	b.signIn(ctx, t, b.token(t, scopes...))
	setField(ctx, t, "#sandbox", sandbox)
	run(ctx, t, chromedp.Click(`#nav-workorders`))
	waitText(ctx, t, "#workorders-status", "record deletes")
}

// orderIDShown is the order id of the page shown (#/workorders/DI-…), once the order's page is drawn.
func orderIDShown(ctx context.Context, t *testing.T) string {
	t.Helper()
	run(ctx, t, chromedp.WaitVisible(`#wo-facts`))
	return strings.TrimPrefix(eval[string](ctx, t, `decodeURIComponent(location.hash)`), "#/workorders/")
}

// testRecordDeleteByTyping: identities typed (two spellings of one e-mail counted once), all datasets, a
// confirmation naming both datasets with their rows, the order sent, followed to its completion with its parts,
// and listed.
func testRecordDeleteByTyping(t *testing.T, b *bundle) {
	const sandbox = "erase-typed"
	a := b.identityDataset(t, sandbox, "crm-contacts", "alice@example.com", "bob@example.com")
	c := b.identityDataset(t, sandbox, "web-visits", "alice@example.com", "alice@example.com", "bob@example.com")
	ctx := tab(t)
	b.openRecordDeletes(ctx, t, sandbox, append(allScopes, catalog.ScopeWorkOrdersManage)...)

	t.Run("EmptyList", func(t *testing.T) {
		waitText(ctx, t, "#workorders-status", "No record deletes yet in this sandbox.")
		// The quota is the org's, which the other parts' orders consume too: only its form is checked.
		waitText(ctx, t, "#workorders-quota", "of 1,000,000 today (UTC)")
		checkAccessibility(ctx, t, "record deletes, empty")
	})

	t.Run("ABadLineIsNamed", func(t *testing.T) {
		setField(ctx, t, "#wo-name", "Erase Alice")
		setField(ctx, t, "#wo-identities", "email:alice@example.com\nalice")
		waitText(ctx, t, "#wo-error", "Line 2: write the namespace, a colon and the value")
		run(ctx, t, chromedp.Click(`#wo-review`))
		require.False(t, eval[bool](ctx, t, `document.querySelector('#wo-confirm').open`), "no confirmation for a bad line")
	})

	t.Run("ConfirmationNamesTheDatasets", func(t *testing.T) {
		setField(ctx, t, "#wo-identities", "email:Alice@Example.com\nemail:alice@example.com\n")
		waitText(ctx, t, "#wo-count", "1 distinct identity (2 typed, 0 from the file).")
		require.Equal(t, "ALL", eval[string](ctx, t, `document.querySelector('#wo-dataset').value`), "all datasets unless one is chosen")
		run(ctx, t, chromedp.Click(`#wo-review`), chromedp.WaitVisible(`#wo-confirm`))
		require.Contains(t, text(ctx, t, "#wo-confirm-summary"), "Every row carrying one of 1 identity (1 email) will be deleted from every dataset of this sandbox")
		// The rows of Alice, counted by the API's preview: 1 of crm-contacts' 2, 2 of web-visits' 3.
		require.Equal(t, "1", text(ctx, t, fmt.Sprintf(`#wo-preview tr[data-id=%q] td`, a)))
		require.Equal(t, "2", text(ctx, t, fmt.Sprintf(`#wo-preview tr[data-id=%q] td`, c)))
		require.Contains(t, text(ctx, t, "#wo-preview-total"), "3 rows carry these identities now in 2 datasets the order covers.")
		require.Equal(t, "crm-contacts", text(ctx, t, fmt.Sprintf(`#wo-preview tr[data-id=%q] th`, a)))
		require.Equal(t, "wo-cancel", eval[string](ctx, t, `document.activeElement.id`), "focus on Cancel, not on Delete")
		checkAccessibility(ctx, t, "record delete confirmation")
		screenshot(ctx, t, "record-delete-confirm")
	})

	var id string
	t.Run("SentAndFollowedToItsEnd", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`#wo-send`))
		id = orderIDShown(ctx, t)
		require.True(t, strings.HasPrefix(id, "DI-"), id)
		waitText(ctx, t, "#wo-status", "Received: waiting to be validated. (updated every 2 seconds)")
		require.Contains(t, text(ctx, t, "#wo-no-parts"), "not been split into datasets yet")
		b.executeOrder(t, id)
		waitText(ctx, t, "#wo-status", "Completed: 3 rows deleted.")
		require.Equal(t, "completed", eval[string](ctx, t, fmt.Sprintf(`document.querySelector('#wo-parts tr[data-id=%q]').dataset.status`, c)))
		require.Equal(t, "2", text(ctx, t, fmt.Sprintf(`#wo-parts tr[data-id=%q] td:nth-of-type(2)`, c)), "web-visits: Alice's two rows from the lake")
		require.Equal(t, "1", text(ctx, t, fmt.Sprintf(`#wo-parts tr[data-id=%q] td:nth-of-type(4)`, a)), "crm-contacts: one row deleted")
		require.Contains(t, text(ctx, t, "#wo-products"), "Data Management: success")
		checkAccessibility(ctx, t, "record delete, completed")
		screenshot(ctx, t, "record-delete")
	})

	t.Run("Listed", func(t *testing.T) {
		run(ctx, t, chromedp.Click(`a[href="#/workorders"]`))
		waitText(ctx, t, "#workorders-status", "Showing record deletes 1 to 1 of 1.")
		row := fmt.Sprintf(`#workorders tr[data-id=%q]`, id)
		require.Equal(t, "completed", text(ctx, t, row+" td.wo-status"))
		require.Equal(t, "3", text(ctx, t, row+" td.wo-rows"))
		require.Equal(t, "Erase Alice", text(ctx, t, row+" td.wo-name"))
		checkAccessibility(ctx, t, "record deletes")
		screenshot(ctx, t, "record-deletes")
	})
}

// testRecordDeleteByUpload: an upload in Adobe's format for one dataset; files past the bounds, or not a list, are
// refused before anything is sent, saying which bound.
func testRecordDeleteByUpload(t *testing.T, b *bundle) {
	const sandbox = "erase-upload"
	one := b.identityDataset(t, sandbox, "newsletter", "carol@example.com", "dave@example.com")
	other := b.identityDataset(t, sandbox, "support-tickets", "carol@example.com")
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	ctx := tab(t)
	b.openRecordDeletes(ctx, t, sandbox, catalog.ScopeDatasetsRead, catalog.ScopeWorkOrdersManage)
	upload := func(path string) { run(ctx, t, chromedp.SetUploadFiles(`#wo-file`, []string{path})) }

	t.Run("NotAList", func(t *testing.T) {
		upload(file("object.json", `{"namespaceCode":"email","value":"carol@example.com"}`))
		waitText(ctx, t, "#wo-error", `object.json must hold a JSON array of {"namespaceCode": …, "value": …} objects.`)
	})

	t.Run("ABadEntryIsNamed", func(t *testing.T) {
		upload(file("bad.json", `[{"namespaceCode":"email","value":"carol@example.com"},{"namespaceCode":"e mail","value":"x"}]`))
		waitText(ctx, t, "#wo-error", "bad.json, entry 2: the namespace code must be 1 to 64 letters")
	})

	t.Run("TooManyIdentities", func(t *testing.T) {
		entries := make([]string, catalog.MaxWorkOrderIdentities+1)
		for i := range entries {
			entries[i] = fmt.Sprintf(`{"namespaceCode":"ECID","value":"%d"}`, i)
		}
		upload(file("many.json", "["+strings.Join(entries, ",")+"]"))
		waitText(ctx, t, "#wo-error", "many.json holds 100,001 entries; an order names at most 100,000 identities.")
	})

	t.Run("TooLarge", func(t *testing.T) {
		upload(file("large.json", `[{"namespaceCode":"email","value":"`+strings.Repeat("a", 16<<20)+`"}]`))
		waitText(ctx, t, "#wo-error", "an upload is at most 16,777,216 bytes (16 MiB)")
		require.Equal(t, "", eval[string](ctx, t, `document.querySelector('#wo-file').value`), "the refused file is let go")
	})

	t.Run("OneDataset", func(t *testing.T) {
		upload(file("people.json", `[{"namespaceCode":"email","value":"carol@example.com"},{"namespaceCode":"Email","value":"CAROL@example.com"},
			{"namespaceCode":"ECID","value":"0123456789"}]`))
		waitText(ctx, t, "#wo-count", "2 distinct identities (0 typed, 3 from the file).")
		require.Equal(t, "", eval[string](ctx, t, `document.querySelector('#wo-error').textContent`), "the earlier refusal is gone")
		setField(ctx, t, "#wo-name", "Carol's request")
		// An option is never "visible" to chromedp: its presence is waited for.
		run(ctx, t, chromedp.WaitReady(fmt.Sprintf(`#wo-dataset option[value=%q]`, one)))
		setField(ctx, t, "#wo-dataset", one)
		run(ctx, t, chromedp.Click(`#wo-review`), chromedp.WaitVisible(`#wo-confirm`))
		require.Contains(t, text(ctx, t, "#wo-confirm-summary"), "(1 email, 1 ECID) will be deleted from the dataset newsletter")
		require.Equal(t, 1, eval[int](ctx, t, `document.querySelectorAll('#wo-preview tbody tr').length`), "only the dataset chosen")
		require.Equal(t, "1", text(ctx, t, fmt.Sprintf(`#wo-preview tr[data-id=%q] td`, one)), "the rows of Carol, not the dataset's")
		run(ctx, t, chromedp.Click(`#wo-send`))
		id := orderIDShown(ctx, t)
		require.Contains(t, text(ctx, t, "#wo-facts"), "newsletter")
		b.executeOrder(t, id)
		waitText(ctx, t, "#wo-status", "Completed: 1 row deleted.")
		require.Zero(t, eval[int](ctx, t, fmt.Sprintf(`document.querySelectorAll('#wo-parts tr[data-id=%q]').length`, other)), "the other dataset is no part of it")
	})
}

// testRecordDeletesReadOnly: without workorders.manage the orders are listed (paged) and no form is shown.
func testRecordDeletesReadOnly(t *testing.T, b *bundle) {
	const sandbox = "erase-read"
	for i := range 21 {
		b.executeOrder(t, b.createOrder(t, sandbox, catalog.AllDatasets, fmt.Sprintf("order %02d", i), catalog.Identity{Namespace: "email", Value: "x@example.com"}))
	}
	ctx := tab(t)
	b.openRecordDeletes(ctx, t, sandbox, catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage)
	waitText(ctx, t, "#workorders-status", "Showing record deletes 1 to 20 of 21.")
	require.Contains(t, text(ctx, t, "#workorders-read-only"), "lacks the workorders.manage scope")
	require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('#create-workorder').length`))
	require.Equal(t, "order 20", text(ctx, t, "#workorders tbody tr td.wo-name"), "newest first")
	checkAccessibility(ctx, t, "record deletes, read only")
	run(ctx, t, chromedp.Click(`nav.pager button:last-child`))
	waitText(ctx, t, "#workorders-status", "Showing record deletes 21 to 21 of 21.")
	require.Equal(t, "order 00", text(ctx, t, "#workorders tbody tr td.wo-name"))
}

// testRecordDeleteHeld: an order of a held dataset waits, ingested, its part's reason naming the hold; after the
// release it completes and the page, polling, shows it.
func testRecordDeleteHeld(t *testing.T, b *bundle) {
	const sandbox = "erase-held"
	ds := b.identityDataset(t, sandbox, "call-recordings", "erin@example.com", "frank@example.com")
	hold, err := b.datasets.PlaceHold(context.Background(), b.caller(sandbox), ds, catalog.HoldCreate{Reason: "litigation 2026-7"})
	require.NoError(t, err)
	id := b.createOrder(t, sandbox, ds, "Erin", catalog.Identity{Namespace: "email", Value: "erin@example.com"})
	b.executeOrder(t, id)
	ctx := tab(t)
	b.openRecordDeletes(ctx, t, sandbox, catalog.ScopeDatasetsRead)
	run(ctx, t, chromedp.Click(fmt.Sprintf(`#workorders tr[data-id=%q] th a`, id)))
	waitText(ctx, t, "#wo-status", "Ingested: every dataset is done but the held ones")
	part := fmt.Sprintf(`#wo-parts tr[data-id=%q]`, ds)
	require.Equal(t, "waiting", eval[string](ctx, t, fmt.Sprintf(`document.querySelector(%q).dataset.status`, part)))
	require.Contains(t, text(ctx, t, part+" td.wo-part-reason"), "is under legal hold "+hold.ID, "the part names its hold")
	checkAccessibility(ctx, t, "record delete, held")
	screenshot(ctx, t, "record-delete-held")
	_, err = b.datasets.ReleaseHold(context.Background(), b.caller(sandbox), ds, hold.ID)
	require.NoError(t, err)
	b.executeOrder(t, id)
	waitText(ctx, t, "#wo-status", "Completed: 1 row deleted.")
}
