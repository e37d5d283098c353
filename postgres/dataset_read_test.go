package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/postgres"
)

// listed reads the dataset through the listing, whose attach functions read each table on its own: the reference
// the one-statement reads of a dataset are held to.
func (b *sweepBundle) listed(t *testing.T, name string) *catalog.Dataset {
	t.Helper()
	list, err := b.datasets.FindDatasets(context.Background(), b.caller, catalog.DatasetFilter{Names: []string{name}, IncludeAll: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	return list[0]
}

// readFixtures creates a time-series dataset with everything a GET of it shows (TTLs in both stores, rows in two
// partitions, two active holds and a released one, a pending expiration), a bare one, and a record dataset with
// three rows and a hold, and returns their names and ids.
func (b *sweepBundle) readFixtures(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids := map[string]string{"full": b.newDataset(t, "full"), "bare": b.newDataset(t, "bare"),
		"record": b.newDatasetOf(t, "record", catalog.Record)}
	full := ids["full"]
	b.setTTL(t, full, "P3M")
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{
		"adobe_unifiedProfile": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P2M"}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(ctx, b.caller, full, patch, nil)
	require.NoError(t, err)
	b.now = time.Date(2024, 12, 20, 0, 0, 0, 0, time.UTC)
	b.ingestSeries(t, full, 40, 24*time.Hour)
	b.ingestLines(t, ids["record"], `{"_id":"m1"}`, `{"_id":"m2"}`, `{"_id":"m3"}`)
	b.placeHold(t, full)
	b.placeHold(t, full)
	released := b.placeHold(t, full)
	_, err = b.datasets.ReleaseHold(ctx, b.caller, full, released)
	require.NoError(t, err)
	b.placeHold(t, ids["record"])
	_, err = postgres.NewExpirationService(b.db, 0).CreateExpiration(ctx, b.caller,
		catalog.ExpirationCreate{DatasetID: full, Expiry: b.now.Add(30 * 24 * time.Hour), DisplayName: "retire full"})
	require.NoError(t, err)
	return ids
}

// TestFindDatasetByIDAnswersAsTheListing holds the one statement of GET /dataSets/{id} to the listing's separate
// reads of each table: the same row expirations, holds, pending expiry and metrics, for a dataset that has them all,
// one that has none, and a record dataset.
func TestFindDatasetByIDAnswersAsTheListing(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ids := b.readFixtures(t)
	for name, id := range ids {
		got, err := b.datasets.FindDatasetByID(context.Background(), b.caller, id)
		require.NoError(t, err, name)
		require.NotNil(t, got.Backlog, "%s: the read by id has the expired backlog (backlog_test.go), a listing not", name)
		got.Backlog = nil
		require.Equal(t, b.listed(t, name), got, name)
	}

	full, err := b.datasets.FindDatasetByID(context.Background(), b.caller, ids["full"])
	require.NoError(t, err)
	require.Equal(t, 2, full.ActiveHolds, "a released hold is not counted")
	require.NotNil(t, full.PendingExpiry)
	require.Equal(t, b.now.Add(30*24*time.Hour), *full.PendingExpiry)
	require.Equal(t, int64(40), full.Metrics.RowCount)
	require.Positive(t, full.Metrics.StorageSize)
	require.Equal(t, "P3M", full.RowExpiration[catalog.LakeHouse].TTL.String())
	require.Equal(t, "P2M", full.RowExpiration[catalog.Profile].TTL.String())

	bare, err := b.datasets.FindDatasetByID(context.Background(), b.caller, ids["bare"])
	require.NoError(t, err)
	require.Zero(t, bare.ActiveHolds)
	require.Nil(t, bare.PendingExpiry)
	require.Equal(t, &catalog.Metrics{AsOf: b.now}, bare.Metrics, "a time-series dataset without rows shows zero metrics")

	record, err := b.datasets.FindDatasetByID(context.Background(), b.caller, ids["record"])
	require.NoError(t, err)
	require.NotNil(t, record.Metrics, "a record dataset's rows are in the lake too")
	require.Equal(t, int64(3), record.Metrics.RowCount)
	require.Positive(t, record.Metrics.StorageSize)
	require.Equal(t, 1, record.ActiveHolds)
}

// TestTTLLimitsAnswersAsItsParts holds the one statement of GET /ttl/{id} to the dataset's listing and the org's
// limits as FindLimits reads them, with the org's overrides in place (setupSweep sets them for customer datasets).
func TestTTLLimitsAnswersAsItsParts(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ids := b.readFixtures(t)
	all, err := b.policies.FindLimits(context.Background(), b.caller.Org)
	require.NoError(t, err)
	for name, id := range ids {
		ds, limits, err := b.datasets.TTLLimits(context.Background(), b.caller, id)
		require.NoError(t, err, name)
		want := b.listed(t, name)
		require.Equal(t, want.RowExpiration, ds.RowExpiration, name)
		require.Equal(t, want.Version, ds.Version, name)
		require.Nil(t, ds.Metrics, "the limits answer reads no metrics")
		require.Len(t, limits, len(catalog.Stores))
		for _, store := range catalog.Stores {
			require.Equal(t, all[ds.PolicyKey(store)], limits[store], "%s %s", name, store)
		}
	}
	_, limits, err := b.datasets.TTLLimits(context.Background(), b.caller, ids["full"])
	require.NoError(t, err)
	require.Equal(t, "P1D", limits[catalog.LakeHouse].Min.String(), "the org's override, not the built-in minimum")
}

// TestOneStatementReadsStayInScope: another org's or sandbox's caller, and anyone after the dataset's deletion, get
// not found from both reads.
func TestOneStatementReadsStayInScope(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	id := b.newDataset(t, "mine")
	ctx := context.Background()
	other := *b.caller
	other.Org = "OTHER@AdobeOrg"
	sandbox := *b.caller
	sandbox.Sandbox = "dev"
	for name, c := range map[string]*catalog.Caller{"OtherOrg": &other, "OtherSandbox": &sandbox} {
		t.Run(name, func(t *testing.T) {
			_, err := b.datasets.FindDatasetByID(ctx, c, id)
			require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err))
			_, _, err = b.datasets.TTLLimits(ctx, c, id)
			require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err))
		})
	}
	require.NoError(t, b.datasets.DeleteDataset(ctx, b.caller, id))
	_, err := b.datasets.FindDatasetByID(ctx, b.caller, id)
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err))
	_, _, err = b.datasets.TTLLimits(ctx, b.caller, id)
	require.Equal(t, catalog.ENOTFOUND, catalog.ErrorCode(err))
}

// TestDatasetReadsTakeOneRoundTrip counts the statements GET /dataSets/{id} and GET /ttl/{id} send, on a dataset
// with everything they show: one each (BEGIN and COMMIT included, had they any). The sizes of the dataset's
// partitions, measured once a minute, are measured by the first read and reused by the counted one.
func TestDatasetReadsTakeOneRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupConfinement(t)
	id := b.readFixtures(t)["full"]
	ctx := context.Background()
	_, err := b.datasets.FindDatasetByID(ctx, b.caller, id)
	require.NoError(t, err)
	statements := func(path string) []string {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		var out []string
		for _, s := range b.rec.stmts {
			if s.path == path {
				out = append(out, s.sql)
			}
		}
		return out
	}
	b.on(t, "GetDataset", func() {
		ds, err := b.datasets.FindDatasetByID(ctx, b.caller, id)
		require.NoError(t, err)
		require.Positive(t, ds.Metrics.StorageSize)
	})
	require.Len(t, statements("GetDataset"), 1, "%q", statements("GetDataset"))
	b.on(t, "ReadTTL", func() {
		_, _, err := b.datasets.TTLLimits(ctx, b.caller, id)
		require.NoError(t, err)
	})
	require.Len(t, statements("ReadTTL"), 1, "%q", statements("ReadTTL"))
}
