package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/retention"
)

// includeExpiredSeeds is how many of the property test's scenarios TestIncludeExpiredMarksExactlyTheExpiredRows
// plays: the six classic ones and two generated ones, with shortened, lengthened and disabled TTLs, overrides,
// imports and re-sent _ids. A mark that skipped the history walk failed six of these eight.
const includeExpiredSeeds = 8

// TestIncludeExpiredMarksExactlyTheExpiredRows holds a page with IncludeExpired (the read a legal hold's reviewer
// makes) to the expiry rule: on the property test's scenarios it shows every stored row of a live dataset, marks
// expired exactly those retention.Expired says are, and leaves unmarked exactly the rows a default page shows.
func TestIncludeExpiredMarksExactlyTheExpiredRows(t *testing.T) {
	t.Parallel()
	var marked, unmarked atomic.Int64
	t.Run("Scenarios", func(t *testing.T) {
		for seed := range uint64(includeExpiredSeeds) {
			t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
				t.Parallel()
				e, u := requireExpiredMarks(t, drawScenario(seed))
				marked.Add(int64(e))
				unmarked.Add(int64(u))
			})
		}
	})
	require.Positive(t, marked.Load(), "the scenarios store expired rows")
	require.Positive(t, unmarked.Load(), "the scenarios store unexpired rows")
}

// requireExpiredMarks builds the scenario, reads every live dataset with and without IncludeExpired at the run's
// time, and returns how many rows were marked expired and how many not.
func requireExpiredMarks(t *testing.T, sc scenario) (marked, unmarked int) {
	t.Helper()
	var stats scenarioStats
	b := setupSweep(t)
	ids, deleted, _ := b.build(t, sc, &stats)
	b.now = b.now.Add(sc.advance)
	history := b.history(t)
	want := map[string]bool{}
	for _, r := range b.allRows(t) {
		if !deleted[r.dataset] {
			want[r.dataset+"/"+r.id] = retention.Expired(r.row, history[r.dataset], b.now)
		}
	}
	got, shown := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		if deleted[id] {
			continue
		}
		all, err := b.rows.FindRows(context.Background(), b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 100000, IncludeExpired: true})
		require.NoError(t, err)
		for _, r := range all.Rows {
			got[id+"/"+r.ID] = r.Expired
		}
		page, err := b.rows.FindRows(context.Background(), b.caller, id, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 100000})
		require.NoError(t, err)
		for _, r := range page.Rows {
			shown[id+"/"+r.ID] = true
		}
	}
	require.Equal(t, want, got, "IncludeExpired shows every stored row, marked expired by the rule")
	for key, expired := range got {
		require.Equal(t, !expired, shown[key], "%s: a default page shows exactly the unmarked rows", key)
		if expired {
			marked++
		} else {
			unmarked++
		}
	}
	return marked, unmarked
}
