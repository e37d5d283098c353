package console_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// testExplainARow explains a row of journey-feedback by its _id, then one that is not there; it only reads.
func testExplainARow(t *testing.T, b *bundle) {
	id := b.ids["journey-feedback"]
	var rowID string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT row_id FROM lake_rows
		WHERE dataset_id = $1 AND replaced_at IS NULL ORDER BY ts DESC, row_id LIMIT 1`, id).Scan(&rowID))
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, allScopes...))
	b.openDataset(ctx, t, "journey-feedback")

	t.Run("ExplainsTheRow", func(t *testing.T) {
		setField(ctx, t, "#explain-id", rowID)
		run(ctx, t, chromedp.Click(`#explain-submit`))
		waitText(ctx, t, "#explain-facts", rowID)
		facts := text(ctx, t, "#explain-facts")
		require.Contains(t, facts, "Clock (")
		require.Contains(t, facts, "Expiry set by")
		require.Contains(t, facts, "Next run that deletes it")
		require.Empty(t, eval[string](ctx, t, `document.querySelector("#explain-error").textContent`))
		checkAccessibility(ctx, t, "dataset, a row explained")
		screenshot(ctx, t, "dataset-explain")
	})

	t.Run("AMissingRowSaysSo", func(t *testing.T) {
		setField(ctx, t, "#explain-id", "no/such row")
		run(ctx, t, chromedp.Click(`#explain-submit`))
		waitText(ctx, t, "#explain-error", `row "no/such row" was not found`)
		require.Zero(t, eval[int](ctx, t, `document.querySelectorAll('#explain-facts').length`), "no stale answer beside the error")
		checkAccessibility(ctx, t, "dataset, a row not found")
	})

	t.Run("AnEmptyIdIsAskedFor", func(t *testing.T) {
		setField(ctx, t, "#explain-id", "")
		run(ctx, t, chromedp.Click(`#explain-submit`))
		waitText(ctx, t, "#explain-error", "Enter the row's _id.")
		require.Equal(t, "explain-id", eval[string](ctx, t, `document.activeElement.id`), fmt.Sprintf("focus on the field of %s", id))
	})

	// In a sandbox of its own, so that no other part sees the row: a row sent with _ttl is said to be, with what its
	// _ttl came to, where the page once said only "_expiresAt or _ttl".
	t.Run("NamesTheFieldOfAnOwnExpiry", func(t *testing.T) {
		const sandbox = "explain"
		c := &catalog.Caller{User: "steward@acme.example", Org: b.org, Sandbox: sandbox}
		ds, err := b.datasets.CreateDataset(context.Background(), c, catalog.DatasetCreate{Name: "own-expiry",
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		b.callAPI(t, http.MethodPost, "/dataSets/"+ds.ID+"/rows", sandbox, "application/x-ndjson",
			`{"timestamp":"2026-11-01T00:00:00Z","_id":"own-ttl","_ttl":"P75D"}`+"\n", http.StatusOK)
		setField(ctx, t, "#sandbox", sandbox)
		run(ctx, t, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/datasets/%s'`, ds.ID)))
		waitText(ctx, t, "#main h1", "own-expiry")
		setField(ctx, t, "#explain-id", "own-ttl")
		run(ctx, t, chromedp.Click(`#explain-submit`))
		waitText(ctx, t, "#explain-facts", "own-ttl")
		facts := text(ctx, t, "#explain-facts")
		require.Contains(t, facts, "The row's own _ttl")
		require.Contains(t, facts, "(_ttl, 75 days after its clock)")
		checkAccessibility(ctx, t, "dataset, a row's own _ttl explained")
	})
}
