package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/retention"
)

// TestExplainAgreesWithRuleOnScenarios holds the explanation of a row to the one expiry rule on the property test's
// generated scenarios (drawScenario, the same seeds as TestExpiryScenarios): for every stored row, ExplainRow reads
// the row and history the Go model reads, its Go answer is retention.Explain's, and the SQL twin's verdicts agree
// with it at the scenario's evaluation time and on both sides of each instant the Go rule derives (ExpiresAt,
// DeletableAt, a microsecond before each), which is where the two could differ. The rule judges a stored row, and
// the SQL judges a row that arrived expired by where it was placed then, so instants before the scenario stored its
// last row are checked at that time instead.
//
// make test plays the first explainDefault seeds; PROPTEST_N and PROPTEST_SEED choose others, as for
// TestExpiryScenarios.
func TestExplainAgreesWithRuleOnScenarios(t *testing.T) {
	t.Parallel()
	seeds := proptestSeeds(t)
	if os.Getenv("PROPTEST_N") == "" && os.Getenv("PROPTEST_SEED") == "" {
		seeds = seeds[:explainDefault]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
			t.Parallel()
			sc := drawScenario(seed)
			b := setupSweep(t)
			_, deleted, _ := b.build(t, sc, &scenarioStats{})
			stored := b.now // every row is stored by then
			b.now = b.now.Add(sc.advance)
			at := b.now
			history := b.history(t)
			previews := postgres.NewPreviewService(b.db, sc.grace)
			for _, r := range b.allRows(t) {
				b.now = at
				x, err := previews.ExplainRow(context.Background(), b.caller, r.dataset, catalog.LakeHouse, r.id)
				if deleted[r.dataset] {
					require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err), "a deleted dataset's rows are not found: %v", err)
					continue
				}
				require.NoError(t, err)
				want := retention.Explain(r.row, history[r.dataset], at, sc.grace)
				require.Equal(t, want, x.Explained, "%s/%s: the Go answer on the row and history as stored", r.dataset, r.id)
				require.Len(t, x.SettingIDs, len(x.History))
				requireSQLVerdict(t, x, r, at)
				for _, when := range instants(want, stored, at) {
					b.now = when
					x, err := previews.ExplainRow(context.Background(), b.caller, r.dataset, catalog.LakeHouse, r.id)
					require.NoError(t, err)
					requireSQLVerdict(t, x, r, when)
				}
			}
		})
	}
}

// instants returns the distinct times, other than at, at which to check the SQL verdicts of a row explained as e:
// its ExpiresAt and DeletableAt and a microsecond before each, none before stored.
func instants(e retention.Explanation, stored, at time.Time) []time.Time {
	var out []time.Time
	for _, instant := range []*time.Time{e.ExpiresAt, e.DeletableAt} {
		if instant == nil {
			continue
		}
		for _, when := range []time.Time{*instant, instant.Add(-time.Microsecond)} {
			if when.Before(stored) {
				when = stored
			}
			if !when.Equal(at) && !slices.ContainsFunc(out, when.Equal) {
				out = append(out, when)
			}
		}
	}
	return out
}

// explainDefault is how many scenarios make test explains: each explains every row of its scenario five times.
const explainDefault = 8

// requireSQLVerdict checks the SQL twin's verdicts in x against the Go rule at when.
func requireSQLVerdict(t *testing.T, x *catalog.RowExpiry, r storedRow, when time.Time) {
	t.Helper()
	require.Equal(t, retention.Expired(r.row, x.History, when), x.Expired, "%s/%s at %s: expired, SQL against Go (row %+v, history %+v)",
		r.dataset, r.id, when, r.row, x.History)
	require.Equal(t, retention.Deletable(r.row, x.History, when, x.Grace), x.Deletable, "%s/%s at %s: deletable, SQL against Go",
		r.dataset, r.id, when)
	e := x.Explained
	require.Equal(t, e.ExpiresAt != nil && !e.ExpiresAt.After(when), x.Expired, "%s/%s at %s: SQL expired against the derived expiresAt %v", r.dataset, r.id, when, e.ExpiresAt)
	require.Equal(t, e.DeletableAt != nil && !e.DeletableAt.After(when), x.Deletable, "%s/%s at %s: SQL deletable against the derived deletableAt %v", r.dataset, r.id, when, e.DeletableAt)
}
