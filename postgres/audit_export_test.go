package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
)

// exportIDs runs an export of q as the bundle's caller and returns its events' ids in order and its pages' sizes.
func (b *auditBundle) exportIDs(t *testing.T, q audit.Query, each func(page []*audit.Event)) ([]string, []int) {
	t.Helper()
	var ids []string
	var sizes []int
	err := b.audit.ExportEvents(context.Background(), b.caller, q, func(page []*audit.Event) error {
		sizes = append(sizes, len(page))
		for _, ev := range page {
			ids = append(ids, ev.ID)
		}
		if each != nil {
			each(page)
		}
		return nil
	})
	require.NoError(t, err)
	return ids, sizes
}

// findIDs returns the ids of every event of q through FindEvents, page by page (its pages count by offset).
func (b *auditBundle) findIDs(t *testing.T, q audit.Query) []string {
	t.Helper()
	var ids []string
	q.Limit = audit.MaxLimit
	for q.Start = 0; ; q.Start += q.Limit {
		page, err := b.audit.FindEvents(context.Background(), b.caller, q)
		require.NoError(t, err)
		for _, ev := range page.Events {
			ids = append(ids, ev.ID)
		}
		if !page.More {
			return ids
		}
	}
}

// TestExportPagesByKeyset: an export reads its events in pages, each a query of its own that starts after the last
// event of the one before (finding 1: a page's connection is released before the page is written). Whatever the
// order, ties included, the pages must add up to exactly what one query answers.
func TestExportPagesByKeyset(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	// 1,234 events full of ties: four timestamps, three actions, two asset names, five request ids.
	_, err := b.db.Pool.Exec(context.Background(), `
INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, asset_name, action,
                          status, user_id, client_id, details, seq, prev_hash, hash)
SELECT gen_random_uuid(), $1, 'prod', $2::timestamptz - (g % 4) * interval '1 minute', 'r' || (g % 5), 'Dataset',
       'a' || (g % 7), 'n' || (g % 2), (ARRAY['Create', 'Update', 'Expire'])[1 + g % 3], 'Success', 'u', 'c',
       jsonb_build_object('g', g), g, '', ''
FROM generate_series(1, 1234) g`, b.caller.Org, b.now)
	require.NoError(t, err)

	for _, tc := range []struct{ name, orderBy string }{
		{"NewestFirst", ""},
		{"OldestFirst", "+timestamp"},
		{"ByActionThenAssetName", "action,-assetName"},
		{"ByRequestIDDescending", "-requestId,+timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := audit.ParseQuery(audit.Params{OrderBy: tc.orderBy})
			require.NoError(t, err)
			got, sizes := b.exportIDs(t, q, nil)
			require.Equal(t, []int{500, 500, 234}, sizes)
			require.Equal(t, b.findIDs(t, q), got)
		})
	}
}

// TestExportIsTheLogAtItsStart: paged, an export would also show events appended while it runs (at its end, in
// ascending order); it shows the log as it was when it started, as its single query did.
func TestExportIsTheLogAtItsStart(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	before := b.record(t, b.caller.Org, "prod", b.now.Add(-time.Hour), 501)
	q, err := audit.ParseQuery(audit.Params{OrderBy: "+timestamp"})
	require.NoError(t, err)
	appended := false
	got, _ := b.exportIDs(t, q, func([]*audit.Event) {
		if !appended {
			b.record(t, b.caller.Org, "prod", b.now, 1)
			appended = true
		}
	})
	want := make([]string, len(before))
	for i, ev := range before {
		want[i] = ev.ID
	}
	require.Equal(t, want, got)
}
