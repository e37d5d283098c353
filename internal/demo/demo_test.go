package demo

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
)

// rowCounts returns the stored rows of every dataset, by name, from the counters, and checks them against the
// tables themselves.
func rowCounts(t *testing.T, db *postgres.DB) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
SELECT d.name, COALESCE((SELECT sum(s.row_count) FROM row_stats s WHERE s.dataset_id = d.id), 0)::bigint,
       (SELECT count(*) FROM lake_rows r WHERE r.dataset_id = d.id) + (SELECT count(*) FROM profile_rows r WHERE r.dataset_id = d.id)
FROM datasets d`)
	require.NoError(t, err)
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var name string
		var counted, stored int64
		require.NoError(t, rows.Scan(&name, &counted, &stored))
		require.Equal(t, stored, counted, "row_stats of %s", name)
		counts[name] = counted
	}
	require.NoError(t, rows.Err())
	return counts
}

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("SecondLoadKeepsTheRows", func(t *testing.T) {
		t.Parallel()
		db := testdb.NewDB(t)
		now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		svc := postgres.NewDatasetService(db)
		ctx := context.Background()

		_, err := svc.CreateDataset(ctx, &catalog.Caller{User: "u", ClientID: "c", Org: Orgs[0], Sandbox: catalog.DefaultSandbox, RequestID: "r"},
			catalog.DatasetCreate{Name: "checkout-events", Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		first, err := Load(ctx, svc, db)
		require.NoError(t, err)
		counts := rowCounts(t, db)
		want := map[string]int64{
			"web-clickstream":  RowsPerDataset,
			"app-sessions":     2 * RowsPerDataset, // profile-enabled: a lake and a profile copy
			"journey-feedback": RowsPerDataset,
			"loyalty-members":  0,
			"pos-transactions": RowsPerDataset,
			"support-tickets":  RowsPerDataset,
			"checkout-events":  0, // the user's own
		}
		require.Equal(t, want, counts)

		require.Len(t, first, 4, "the first org's demo datasets, not the user's own beside them (the banner counts them)")
		second, err := Load(ctx, svc, db)
		require.NoError(t, err)
		require.Equal(t, counts, rowCounts(t, db), "a second load adds no rows")
		require.Len(t, second, len(first))
		for i := range first {
			require.Equal(t, first[i].ID, second[i].ID, "a second load creates no datasets")
		}

		// The rows are two years of history, ingested when they happened.
		var oldest, newest time.Time
		var lagging int64
		err = db.Pool.QueryRow(ctx, `SELECT min(ts), max(ts), count(*) FILTER (WHERE ingested_at <> ts) FROM lake_rows`).
			Scan(&oldest, &newest, &lagging)
		require.NoError(t, err)
		require.Zero(t, lagging, "ingested_at is the event time")
		require.False(t, oldest.Before(now.Add(-RowSpan)), "oldest %s", oldest)
		require.True(t, oldest.Before(now.Add(-RowSpan+24*time.Hour)), "oldest %s", oldest)
		require.True(t, newest.Before(now), "newest %s", newest)
		require.True(t, newest.After(now.Add(-24*time.Hour)), "newest %s", newest)
	})

	t.Run("RowsAreReadable", func(t *testing.T) {
		t.Parallel()
		db := testdb.NewDB(t)
		svc := postgres.NewDatasetService(db)
		ctx := context.Background()
		all, err := Load(ctx, svc, db)
		require.NoError(t, err)
		var web *catalog.Dataset
		for _, ds := range all {
			if ds.Name == "web-clickstream" {
				web = ds
			}
		}
		require.NotNil(t, web)
		c := &catalog.Caller{Org: Orgs[0], Sandbox: catalog.DefaultSandbox}
		page, err := postgres.NewRowService(db, 0).FindRows(ctx, c, web.ID, catalog.RowFilter{Store: catalog.LakeHouse, Limit: 5})
		require.NoError(t, err)
		rows := page.Rows
		require.NotEmpty(t, rows, "the rows of the last year are within the default TTL")
		require.JSONEq(t, `{"page":"","userId":"","durationMs":0}`, blank(t, rows[0].Payload))
	})
}

// A cell of make run-cells loads its own demo org only: the other org's datasets are not there at all.
func TestLoadOrgsLoadsOnlyThoseOrgs(t *testing.T) {
	t.Parallel()
	db := testdb.NewDB(t)
	svc := postgres.NewDatasetService(db)
	ctx := context.Background()
	loaded, err := LoadOrgs(ctx, svc, db, []string{Orgs[1]})
	require.NoError(t, err)
	var names []string
	for _, ds := range loaded {
		names = append(names, ds.Name)
	}
	require.Equal(t, []string{"pos-transactions", "support-tickets"}, names)
	require.Equal(t, map[string]int64{"pos-transactions": RowsPerDataset, "support-tickets": RowsPerDataset}, rowCounts(t, db))

	_, err = LoadOrgs(ctx, svc, db, []string{"NOTADEMO0000000000000000@AdobeOrg"})
	require.ErrorContains(t, err, "NOTADEMO0000000000000000@AdobeOrg is not a demo org")
	_, err = LoadOrgs(ctx, svc, db, nil)
	require.ErrorContains(t, err, "no org")
}

func TestSynthetic(t *testing.T) {
	t.Parallel()

	t.Run("SpreadInOrderOverTheRange", func(t *testing.T) {
		t.Parallel()
		from := time.Date(2024, 11, 23, 0, 0, 0, 0, time.UTC)
		to := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		gen := Synthetic{N: 10_000, From: from, To: to, Seed: 7, IngestedAtEvent: true}
		var prev time.Time
		ids := map[string]bool{}
		perTenth := map[int]int{}
		n := 0
		for in := range gen.Rows() {
			n++
			require.False(t, in.Timestamp.Before(from))
			require.True(t, in.Timestamp.Before(to))
			require.False(t, in.Timestamp.Before(prev), "rows come in time order")
			require.Equal(t, in.Timestamp, *in.IngestedAt)
			require.False(t, in.ClientID)
			require.False(t, ids[in.ID], "_id %s twice", in.ID)
			ids[in.ID] = true
			require.Len(t, in.Payload, in.PayloadSize)
			require.JSONEq(t, `{"page":"","userId":"","durationMs":0}`, blank(t, in.Payload))
			perTenth[int(in.Timestamp.Sub(from)*10/to.Sub(from))]++
			prev = in.Timestamp
		}
		require.Equal(t, 10_000, n)
		require.Equal(t, map[int]int{0: 1000, 1: 1000, 2: 1000, 3: 1000, 4: 1000, 5: 1000, 6: 1000, 7: 1000, 8: 1000, 9: 1000}, perTenth,
			"each tenth of the range holds a tenth of the rows")
	})

	t.Run("SeedDecidesTheRows", func(t *testing.T) {
		t.Parallel()
		gen := Synthetic{N: 100, From: time.Unix(0, 0), To: time.Unix(86400, 0), Seed: 1, Stream: 3}
		payloads := func(g Synthetic) []string {
			var out []string
			for in := range g.Rows() {
				require.Nil(t, in.IngestedAt)
				out = append(out, in.Timestamp.String()+string(in.Payload))
			}
			return out
		}
		require.Equal(t, payloads(gen), payloads(gen))
		other := gen
		other.Stream = 4
		require.NotEqual(t, payloads(gen), payloads(other))
	})

	t.Run("PeopleAddOnlyTheirIdentityMap", func(t *testing.T) {
		t.Parallel()
		plain := Synthetic{N: 2000, From: time.Unix(0, 0), To: time.Unix(86400, 0), Seed: 1, Stream: 3}
		withPeople := plain
		withPeople.People = 40
		var without []catalog.RowInput
		for in := range plain.Rows() {
			require.Nil(t, in.Identities)
			without = append(without, in)
		}
		seen := map[string]int{}
		i := 0
		for in := range withPeople.Rows() {
			// The same event but for the map: the same time and fields.
			require.Equal(t, without[i].Timestamp, in.Timestamp)
			var obj map[string]any
			require.NoError(t, json.Unmarshal(in.Payload, &obj))
			keys, err := catalog.ParseIdentityMap(obj["identityMap"])
			require.NoError(t, err)
			require.Equal(t, keys, in.Identities, "the keys the service extracts from the map")
			require.Len(t, keys, 1, "the primary e-mail alone")
			delete(obj, "identityMap")
			rest, err := json.Marshal(obj)
			require.NoError(t, err)
			require.JSONEq(t, string(without[i].Payload), string(rest))
			seen[keys[0]]++
			i++
		}
		require.Equal(t, 2000, i)
		require.Len(t, seen, 40, "every person has rows")
		for p := range 40 {
			require.Positive(t, seen[PersonKeys(p)[0]], "person %d", p)
		}
	})

	t.Run("EmptyPayloadWithPeopleIsAnObject", func(t *testing.T) {
		t.Parallel()
		gen := Synthetic{N: 3, From: time.Unix(0, 0), To: time.Unix(60, 0), People: 2,
			Payload: func(_ *rand.Rand, dst []byte) []byte { return append(dst, "{}"...) }}
		for in := range gen.Rows() {
			var obj map[string]any
			require.NoError(t, json.Unmarshal(in.Payload, &obj), "%s", in.Payload)
			require.Len(t, obj, 1)
		}
	})
}

// blank returns the JSON object with its values zeroed, to compare the shape of generated payloads.
func blank(t *testing.T, payload []byte) string {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal(payload, &obj))
	for k, v := range obj {
		switch v.(type) {
		case string:
			obj[k] = ""
		case float64:
			obj[k] = 0
		}
	}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}
