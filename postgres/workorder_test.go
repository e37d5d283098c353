package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/jobs"
	"github.com/acme/retention/postgres"
)

// testHashKey keys the identity hashes of the tests' audit events.
const testHashKey = "test-identity-key"

// identityLine is an event carrying an identityMap; primary marks the e-mail primary.
func identityLine(ts, id, email string, primaryEmail bool, ecid string) string {
	m := fmt.Sprintf(`{"email":[{"id":%q,"primary":%t}]`, email, primaryEmail)
	if ecid != "" {
		m += fmt.Sprintf(`,"ECID":[{"id":%q,"primary":%t}]`, ecid, !primaryEmail)
	}
	m += "}"
	if ts == "" {
		return fmt.Sprintf(`{"_id":%q,"identityMap":%s}`, id, m)
	}
	return fmt.Sprintf(`{"timestamp":%q,"_id":%q,"identityMap":%s}`, ts, id, m)
}

// rowIDsIn lists the dataset's row ids in a store, every version.
func (b *sweepBundle) rowIDsIn(t *testing.T, table, datasetID string) []string {
	t.Helper()
	var ids []string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(array_agg(row_id ORDER BY row_id), '{}') FROM `+table+` WHERE dataset_id = $1`, datasetID).Scan(&ids))
	return ids
}

func (b *sweepBundle) createWorkOrder(t *testing.T, datasetID string, ids ...catalog.Identity) string {
	t.Helper()
	w, err := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{}).CreateWorkOrder(context.Background(), b.caller,
		catalog.WorkOrderCreate{DisplayName: "erase", DatasetID: datasetID, Identities: ids})
	require.NoError(t, err)
	return w.ID
}

// TestWorkOrderErasesAPersonFromEveryDataset: rows of Alice and Bob in a time-series dataset with both stores, a
// record dataset and a held dataset; an order for Alice's e-mail (sent in another case) against ALL removes her
// rows from both stores and the record dataset, leaves Bob's and the rows whose primary identity is another, keeps
// the held dataset's rows with the order ingested and its reason naming the hold, and completes after the release.
// Each dataset's removal has one Delete event naming the order with the exact rows, the identity only as its keyed
// hash; repeating the job removes nothing twice, and the counters stay exact.
func TestWorkOrderErasesAPersonFromEveryDataset(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	profile, err := b.datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: "events", Tags: map[string][]string{"unifiedProfile": {"enabled:true"}},
		Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	events, records, held := profile.ID, b.newDatasetOf(t, "records", catalog.Record), b.newDataset(t, "held")
	b.setTTL(t, events, "P1Y")
	patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{
		"adobe_unifiedProfile": map[string]any{"rowExpiration": map[string]any{"ttlValue": "P6M"}}}})
	require.NoError(t, err)
	_, err = b.datasets.PatchDataset(ctx, b.caller, events, patch, nil)
	require.NoError(t, err)
	ts := "2024-12-30T10:00:00Z"
	b.ingestLines(t, events, identityLine(ts, "e1", "Alice@Example.com", true, "111"), identityLine(ts, "e2", "bob@example.com", true, ""),
		identityLine(ts, "e3", "alice@example.com", false, "999"), `{"timestamp":"2024-12-30T11:00:00Z","_id":"e4"}`,
		identityLine(ts, "e5", "alice@example.com", true, ""))
	b.ingestLines(t, records, identityLine("", "r1", "alice@example.com", true, ""), identityLine("", "r2", "bob@example.com", true, ""))
	b.ingestLines(t, held, identityLine(ts, "h1", "alice@example.com", true, ""), identityLine(ts, "h2", "bob@example.com", true, ""))
	hold := b.placeHold(t, held)

	id := b.createWorkOrder(t, catalog.AllDatasets, catalog.Identity{Namespace: "Email", Value: "ALICE@example.com"})
	runner := postgres.NewWorkOrderRunner(b.db, testHashKey)
	orders := jobs.NewWorkOrders(runner, nil)
	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{})
	require.NoError(t, orders.Execute(ctx, id))

	w, err := svc.FindWorkOrder(ctx, b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderIngested, w.Status)
	require.Contains(t, w.Reason, hold, "the reason names the hold")
	require.Equal(t, []string{"e2", "e3", "e4"}, b.rowIDsIn(t, "lake_rows", events), "e3's primary identity is its ECID")
	require.Equal(t, []string{"e2", "e3", "e4"}, b.rowIDsIn(t, "profile_rows", events))
	require.Equal(t, []string{"r2"}, b.rowIDsIn(t, "lake_rows", records))
	require.Equal(t, []string{"h1", "h2"}, b.rowIDsIn(t, "lake_rows", held), "a held dataset keeps its rows")
	require.Equal(t, int64(5), w.RowsDeleted)
	b.requireCountersExact(t)

	wantHash := catalog.IdentityHash([]byte(testHashKey), "email:alice@example.com")
	t.Run("DeleteEventsNameTheOrderAndHashTheIdentity", func(t *testing.T) {
		rows, err := b.db.Pool.Query(ctx, `SELECT asset_id, details::text, details->>'rowsDeleted' FROM audit_events
			WHERE action = 'Delete' AND details->>'workorderId' = $1 ORDER BY asset_id`, id)
		require.NoError(t, err)
		got := map[string]string{}
		for rows.Next() {
			var asset, details, n string
			require.NoError(t, rows.Scan(&asset, &details, &n))
			require.NotContains(t, strings.ToLower(details), "alice@", "no identity in clear")
			require.Contains(t, details, wantHash)
			got[asset] = n
		}
		require.NoError(t, rows.Err())
		require.Equal(t, map[string]string{events: "4", records: "1"}, got)
	})

	_, err = b.datasets.ReleaseHold(ctx, b.caller, held, hold)
	require.NoError(t, err)
	require.NoError(t, orders.Execute(ctx, id))
	require.NoError(t, orders.Execute(ctx, id), "a repeat does nothing")
	w, err = svc.FindWorkOrder(ctx, b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderCompleted, w.Status)
	require.Empty(t, w.Reason)
	require.Equal(t, int64(6), w.RowsDeleted)
	require.Equal(t, []string{"h2"}, b.rowIDsIn(t, "lake_rows", held))
	require.Len(t, w.Parts, 3)
	for _, p := range w.Parts {
		require.Equal(t, catalog.PartCompleted, p.Status)
	}
	var deletes, executes int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'Delete'), count(*) FILTER (WHERE action = 'Execute')
		FROM audit_events WHERE details->>'workorderId' = $1 OR asset_id = $1`, id).Scan(&deletes, &executes))
	require.Equal(t, 3, deletes, "one Delete event per dataset")
	require.Equal(t, 1, executes)
	var left []string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT identities FROM workorders WHERE id = $1`, id).Scan(&left))
	require.Empty(t, left, "a completed order keeps no identities")
	b.requireCountersExact(t)
	report, err := postgres.NewAuditService(b.db).Verify(ctx, b.caller.Org)
	require.NoError(t, err)
	require.True(t, report.Valid)
}

// TestWorkOrderFindsRowsThroughTheIdentitiesIndexes: in a dataset of 3,000 rows and two of the person's, one of her
// e-mail alone and one also carrying an ECID, none primary (its first identity the ECID), the delete of an order
// naming her e-mail reaches her rows through the partition's two identities indexes (migration 0024: a hash index on
// a row's first identity, the GIN index of the rows of several), not through the dataset's 3,000 rows nor a scan;
// and it removes exactly those two.
func TestWorkOrderFindsRowsThroughTheIdentitiesIndexes(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "indexed")
	lines := []string{
		identityLine("2024-12-30T10:00:00Z", "alice", "alice@example.com", true, ""),
		`{"timestamp":"2024-12-30T10:00:00Z","_id":"alice-device","identityMap":{"email":[{"id":"alice@example.com"}],"ECID":[{"id":"0001"}]}}`,
		`{"timestamp":"2024-12-30T10:00:00Z","_id":"bob-device","identityMap":{"email":[{"id":"bob@example.com"}],"ECID":[{"id":"0002"}]}}`,
	}
	for i := range 3000 {
		lines = append(lines, fmt.Sprintf(`{"timestamp":"2024-12-30T11:00:00Z","_id":"r%d"}`, i))
	}
	b.ingestLines(t, ds, lines...)
	_, err := b.db.Pool.Exec(ctx, `ANALYZE lake_rows`)
	require.NoError(t, err)
	plan, err := b.db.IdentityDeletePlan(ctx, ds, catalog.LakeHouse, []string{"email:alice@example.com"})
	require.NoError(t, err)
	require.NotContains(t, plan, `"Seq Scan"`, "no partition is scanned whole")
	// A partition's indexes are named by PostgreSQL, after the column: their conditions tell them apart.
	require.Contains(t, plan, `"Index Cond": "(identities[1] = ANY (`, "rows are found by their first identity through its hash index")
	require.Contains(t, plan, `"Index Cond": "(identities && `, "rows of several identities are found through their GIN index")

	id := b.createWorkOrder(t, ds, catalog.Identity{Namespace: "email", Value: "alice@example.com"})
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, testHashKey), nil).Execute(ctx, id))
	ids := b.rowIDsIn(t, "lake_rows", ds)
	require.Len(t, ids, 3001, "her two rows removed, no other")
	require.NotContains(t, ids, "alice")
	require.NotContains(t, ids, "alice-device")
	require.Contains(t, ids, "bob-device")
}

// TestWorkOrderOfADeletedDatasetFails: the one dataset an order names is deleted before the order runs; it fails
// with that reason, and its identities are erased.
func TestWorkOrderOfADeletedDatasetFails(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "gone")
	id := b.createWorkOrder(t, ds, catalog.Identity{Namespace: "email", Value: "a@example.com"})
	require.NoError(t, b.datasets.DeleteDataset(ctx, b.caller, ds))
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, testHashKey), nil).Execute(ctx, id))
	w, err := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{}).FindWorkOrder(ctx, b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderFailed, w.Status)
	require.Contains(t, w.Reason, "deleted")
}

// TestIdentityMapIsValidatedLineByLine: a malformed identityMap refuses its line, naming the field; the good lines
// of the body are stored with their identities.
func TestIdentityMapIsValidatedLineByLine(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ds := b.newDataset(t, "ids")
	ts := `"timestamp":"2024-12-30T10:00:00Z"`
	lines := []string{
		`{` + ts + `,"identityMap":{"email":[{"id":"a@example.com"}]}}`,
		`{` + ts + `,"identityMap":["a@example.com"]}`,
		`{` + ts + `,"identityMap":{"email":{"id":"a@example.com"}}}`,
		`{` + ts + `,"identityMap":{"email":[{"id":""}]}}`,
		`{` + ts + `,"identityMap":{"e mail":[{"id":"x"}]}}`,
		`{` + ts + `,"identityMap":{"email":[{"id":"x","primary":"yes"}]}}`,
	}
	res, err := ingest(context.Background(), b.rows, b.caller, ds, rawEvents(lines...), catalog.IngestOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted)
	want := map[int]string{2: "identityMap must be an object", 3: "identityMap.email must be an array", 4: "identity value must be 1 to",
		5: `namespace code "e mail"`, 6: "identityMap.email[0].primary must be true or false"}
	require.Len(t, res.Errors, len(want))
	for _, e := range res.Errors {
		require.Contains(t, e.Reason, want[e.Line], "line %d", e.Line)
	}
	var keys []string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT identities FROM lake_rows WHERE dataset_id = $1`, ds).Scan(&keys))
	require.Equal(t, []string{"email:a@example.com"}, keys)
}

// TestDatasetPrimaryIdentity: a dataset declares its primary identity (namespace and field path) in
// extensions.primaryIdentity; a malformed declaration is refused naming the field; the declaration is audited with
// the PATCH; rows without identityMap are then found by the value at the path (an identityMap still wins), and an
// order erases them.
func TestDatasetPrimaryIdentity(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "crm")
	patchWith := func(decl any) error {
		p, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{catalog.PrimaryIdentityExtension: decl}})
		require.NoError(t, err)
		_, err = b.datasets.PatchDataset(ctx, b.caller, ds, p, nil)
		return err
	}
	for field, decl := range map[string]any{
		"extensions.primaryIdentity":           "email",
		"extensions.primaryIdentity.namespace": map[string]any{"namespace": "e mail", "path": "person.email"},
		"extensions.primaryIdentity.path":      map[string]any{"namespace": "email", "path": "person..email"},
	} {
		err := patchWith(decl)
		var de *catalog.Error
		require.ErrorAs(t, err, &de, field)
		require.Equal(t, field, de.Field)
	}
	require.NoError(t, patchWith(map[string]any{"namespace": "Email", "path": "person.email"}))
	var audited int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE asset_id = $1 AND action = 'Update'
		AND details::text LIKE '%primaryIdentity%'`, ds).Scan(&audited))
	require.Equal(t, 1, audited, "the declaration is audited with the PATCH")

	ts := `"timestamp":"2024-12-30T10:00:00Z"`
	b.ingestLines(t, ds, `{`+ts+`,"_id":"c1","person":{"email":"Carol@Example.com"}}`, `{`+ts+`,"_id":"c2","person":{"email":"dan@example.com"}}`,
		`{`+ts+`,"_id":"c3","person":{"email":"carol@example.com"},"identityMap":{"ECID":[{"id":"7"}]}}`, `{`+ts+`,"_id":"c4"}`)
	id := b.createWorkOrder(t, ds, catalog.Identity{Namespace: "email", Value: "carol@example.com"})
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, testHashKey), nil).Execute(ctx, id))
	require.Equal(t, []string{"c2", "c3", "c4"}, b.rowIDsIn(t, "lake_rows", ds), "c3's identityMap names another identity")
}

// TestWorkOrderOfManyIdentitiesHashesThem: an order of more identities than the GIN index is asked for
// (fewIdentities) removes exactly the rows carrying one of them, in both forms of a row's identities (primary e-mail,
// and an ECID beside it), and its delete probes a hash of the keys rather than comparing each row with every key.
func TestWorkOrderOfManyIdentitiesHashesThem(t *testing.T) {
	t.Parallel()
	b := setupSweep(t)
	ctx := context.Background()
	ds := b.newDataset(t, "people")
	var lines, keys []string
	var ids []catalog.Identity
	for i := range 300 {
		lines = append(lines, identityLine("2024-12-30T10:00:00Z", fmt.Sprintf("p%03d", i), fmt.Sprintf("p%d@example.com", i), true, ""))
		if i%3 == 0 {
			ids = append(ids, catalog.Identity{Namespace: "email", Value: fmt.Sprintf("P%d@example.com", i)})
			keys = append(keys, fmt.Sprintf("email:p%d@example.com", i))
		}
	}
	for i := range 50 {
		ids = append(ids, catalog.Identity{Namespace: "email", Value: fmt.Sprintf("nobody%d@example.com", i)})
	}
	b.ingestLines(t, ds, lines...)
	_, err := b.db.Pool.Exec(ctx, `ANALYZE lake_rows`)
	require.NoError(t, err)
	plan, err := b.db.IdentityDeletePlan(ctx, ds, catalog.LakeHouse, keys)
	require.NoError(t, err)
	require.NotContains(t, plan, "&&", "no row is compared with every key")
	require.Contains(t, plan, "Hash", "the keys are hashed")

	svc := postgres.NewWorkOrderService(b.db, postgres.WorkOrderLimits{})
	p, err := svc.PreviewWorkOrder(ctx, b.caller, catalog.WorkOrderCreate{DisplayName: "many", DatasetID: catalog.AllDatasets, Identities: ids})
	require.NoError(t, err)
	require.Equal(t, int64(100), p.RowCount, "the preview matches as the order does")

	id := b.createWorkOrder(t, ds, ids...)
	require.NoError(t, jobs.NewWorkOrders(postgres.NewWorkOrderRunner(b.db, testHashKey), nil).Execute(ctx, id))
	w, err := svc.FindWorkOrder(ctx, b.caller, id)
	require.NoError(t, err)
	require.Equal(t, catalog.WorkOrderCompleted, w.Status)
	require.Equal(t, int64(100), w.RowsDeleted)
	left := b.rowIDsIn(t, "lake_rows", ds)
	require.Len(t, left, 200)
	for _, r := range left {
		var i int
		_, err := fmt.Sscanf(r, "p%03d", &i)
		require.NoError(t, err)
		require.NotZero(t, i%3, "row %s carries an identity of the order", r)
	}
	b.requireCountersExact(t)
	var matched string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT details->>'identitiesMatched' FROM audit_events
		WHERE action = 'Delete' AND details->>'workorderId' = $1`, id).Scan(&matched))
	require.Equal(t, "100", matched, "the Delete event counts the identities that matched")
}
