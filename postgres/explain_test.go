package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
// last row are checked at that time instead. The scenarios send rows with _ttl and with _expiresAt (the test fails
// if either goes missing), and each explanation names the field the row's last line sent (sentFields).
//
// make test plays the first explainDefault seeds; PROPTEST_N and PROPTEST_SEED choose others, as for
// TestExpiryScenarios.
func TestExplainAgreesWithRuleOnScenarios(t *testing.T) {
	t.Parallel()
	seeds := proptestSeeds(t)
	if os.Getenv("PROPTEST_N") == "" && os.Getenv("PROPTEST_SEED") == "" {
		seeds = seeds[:explainDefault]
	}
	var fields [3]atomic.Int64 // rows explained, by catalog.OverrideField
	t.Run("Scenarios", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
				t.Parallel()
				explainScenario(t, drawScenario(seed), &fields)
			})
		}
	})
	if len(seeds) >= explainDefault && !t.Failed() {
		require.Positive(t, fields[catalog.OverrideTTL].Load(), "the scenarios explain rows sent with _ttl")
		require.Positive(t, fields[catalog.OverrideExpiresAt].Load(), "the scenarios explain rows sent with _expiresAt")
	}
}

// explainScenario builds a scenario and explains each of its rows (TestExplainAgreesWithRuleOnScenarios), counting
// them by the field that set their own expiry.
func explainScenario(t *testing.T, sc scenario, fields *[3]atomic.Int64) {
	b := setupSweep(t)
	ids, deleted, _ := b.build(t, sc, &scenarioStats{})
	sent := sentFields(t, sc, ids)
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
		require.Equal(t, sent[r.dataset+"/"+r.id], x.OwnExpiryField, "%s/%s: the field its last line set its own expiry with", r.dataset, r.id)
		fields[x.OwnExpiryField].Add(1)
		require.Len(t, x.SettingIDs, len(x.History))
		requireSQLVerdict(t, x, r, at)
		for _, when := range instants(want, stored, at) {
			b.now = when
			x, err := previews.ExplainRow(context.Background(), b.caller, r.dataset, catalog.LakeHouse, r.id)
			require.NoError(t, err)
			requireSQLVerdict(t, x, r, when)
		}
	}
}

// sentFields returns, for each row a scenario stores (dataset/_id), the field its last line set its own expiry with:
// a line of an _id replaces the row, and _ttl: -1 sets none (it is never_expires).
func sentFields(t *testing.T, sc scenario, ids []string) map[string]catalog.OverrideField {
	t.Helper()
	out := map[string]catalog.OverrideField{}
	for _, s := range sc.steps {
		if s.kind != stepIngest {
			continue
		}
		for _, l := range s.lines {
			var line map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(l), &line))
			var id string
			require.NoError(t, json.Unmarshal(line["_id"], &id))
			f := catalog.NoOverrideField
			if ttl, ok := line["_ttl"]; ok && string(ttl) != "-1" {
				f = catalog.OverrideTTL
			}
			if _, ok := line["_expiresAt"]; ok {
				f = catalog.OverrideExpiresAt
			}
			out[ids[s.ds]+"/"+id] = f
		}
	}
	return out
}

// requireSentFields checks that every stored row, in both stores, records the field its last line set its own
// expiry with: 't' for _ttl, 'e' for _expiresAt, NULL for neither (migration 0020).
func (b *sweepBundle) requireSentFields(t *testing.T, sent map[string]catalog.OverrideField) {
	t.Helper()
	codes := map[catalog.OverrideField]string{catalog.NoOverrideField: "NULL", catalog.OverrideTTL: "t", catalog.OverrideExpiresAt: "e"}
	rows, err := b.db.Pool.Query(context.Background(), `
		SELECT dataset_id || '/' || row_id, coalesce(own_expiry_source::text, 'NULL') FROM lake_rows WHERE replaced_at IS NULL
		UNION ALL SELECT dataset_id || '/' || row_id, coalesce(own_expiry_source::text, 'NULL') FROM profile_rows WHERE replaced_at IS NULL`)
	require.NoError(t, err)
	var key, code string
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&key, &code}, func() error {
		want, ok := sent[key]
		require.True(t, ok, "%s was sent", key)
		require.Equal(t, codes[want], code, "%s: the field its last line set its own expiry with", key)
		n++
		return nil
	})
	require.NoError(t, err)
	if len(sent) > 0 {
		require.Positive(t, n, "the scenario stores rows")
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
