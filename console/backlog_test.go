package console_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// testBacklog: a dataset's page shows each store's expired backlog as GET /dataSets/{id} has it (app-sessions, a
// profile-enabled demo dataset, two years of rows of which the older year has expired). It runs alone, so that no
// run of another part changes the figures between the page's read and the test's.
func testBacklog(t *testing.T, b *bundle) {
	ctx := tab(t)
	b.signIn(ctx, t, b.token(t, allScopes...))
	b.openDataset(ctx, t, "app-sessions")
	c := &catalog.Caller{Org: b.org, Sandbox: catalog.DefaultSandbox}
	ds, err := b.datasets.FindDatasetByID(context.Background(), c, b.ids["app-sessions"])
	require.NoError(t, err)
	lake := ds.Backlog[catalog.LakeHouse]
	require.Positive(t, lake.ExpiredRows, "the demo's older year has expired")
	require.NotNil(t, lake.OldestExpiredAt)
	require.Contains(t, text(ctx, t, "#backlog-lake"), "rows, expired by")
	require.Equal(t, fmt.Sprint(lake.ExpiredRows), eval[string](ctx, t, `document.querySelector('#backlog-lake').dataset.rows`))
	require.Equal(t, lake.OldestExpiredAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		eval[string](ctx, t, `document.querySelector('#backlog-lake time').dateTime`))
	profile := ds.Backlog[catalog.Profile]
	require.Equal(t, fmt.Sprint(profile.ExpiredRows), eval[string](ctx, t, `document.querySelector('#backlog-profile').dataset.rows`),
		"the profile store's, beside the lake's")
	checkAccessibility(ctx, t, "dataset with its backlog")
}
