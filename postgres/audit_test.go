package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
	"github.com/acme/retention/riverjobs"
)

// auditBundle is a database, its audit service and an org whose events the test writes, with a clock it sets.
type auditBundle struct {
	url    string
	db     *postgres.DB
	audit  *postgres.AuditService
	caller *catalog.Caller
	now    time.Time
}

func setupAudit(t *testing.T) *auditBundle {
	t.Helper()
	dbURL := testdb.New(t)
	db, err := postgres.Open(context.Background(), dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	b := &auditBundle{url: dbURL, db: db, audit: postgres.NewAuditService(db), now: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC),
		caller: &catalog.Caller{User: "u@example.com", ClientID: "c", Org: "AUDITORG@AdobeOrg", Sandbox: "prod", RequestID: "r"}}
	db.Now = func() time.Time { return b.now }
	return b
}

// record appends n events of the bundle's org to sandbox, a second apart from at, and returns them sealed.
func (b *auditBundle) record(t *testing.T, org, sandbox string, at time.Time, n int) []*audit.Event {
	t.Helper()
	out := make([]*audit.Event, n)
	for i := range out {
		ev := &audit.Event{
			Org: org, Sandbox: sandbox, Timestamp: at.Add(time.Duration(i) * time.Second), RequestID: fmt.Sprintf("req-%d", i),
			AssetType: audit.AssetDataset, AssetID: fmt.Sprintf("%024x", i), AssetName: fmt.Sprintf("ds-%d", i),
			Action: audit.ActionUpdate, Status: audit.StatusSuccess, User: "u@example.com", ClientID: "c",
			Details: map[string]any{"i": i, "big": int64(1) << 60, "ratio": 0.25},
		}
		require.NoError(t, b.audit.Record(context.Background(), ev))
		out[i] = ev
	}
	return out
}

func (b *auditBundle) verify(t *testing.T, org string) *audit.Verification {
	t.Helper()
	v, err := b.audit.Verify(context.Background(), org)
	require.NoError(t, err)
	return v
}

// tamper runs sql as the superuser with triggers off, as only a superuser (or the table's owner) could.
func (b *auditBundle) tamper(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sql, args...)
		if err == nil && tag.RowsAffected() == 0 {
			return errors.New("tampering changed nothing")
		}
		return err
	})
	require.NoError(t, err)
}

// appURL is the bundle's database as the service's role, retention_app, logs in to it.
func (b *auditBundle) appURL(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(b.url)
	require.NoError(t, err)
	u.User = url.User("retention_app")
	return u.String()
}

func requireSQLState(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
}

func TestAuditChain(t *testing.T) {
	t.Parallel()

	t.Run("EventsChainPerOrg", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		a := b.record(t, "A@AdobeOrg", "prod", b.now, 3)
		other := b.record(t, "B@AdobeOrg", "dev", b.now, 2)
		a = append(a, b.record(t, "A@AdobeOrg", "dev", b.now, 1)...)
		for i, ev := range a {
			require.Equal(t, int64(i+1), ev.Seq)
			if i == 0 {
				require.Equal(t, audit.GenesisHash, ev.PrevHash)
			} else {
				require.Equal(t, a[i-1].Hash, ev.PrevHash)
			}
		}
		require.Equal(t, int64(1), other[0].Seq, "each org has a chain of its own")
		require.Equal(t, audit.GenesisHash, other[0].PrevHash)

		v := b.verify(t, "A@AdobeOrg")
		require.True(t, v.Valid, "%+v", v.FirstBroken)
		require.Equal(t, int64(4), v.Events)
		require.Equal(t, audit.ChainPoint{Seq: 4, Hash: a[3].Hash}, v.Head)
		require.True(t, b.verify(t, "B@AdobeOrg").Valid)
		require.True(t, b.verify(t, "NOBODY@AdobeOrg").Valid, "an org without events has an empty, intact chain")
	})

	t.Run("ChangesWriteChainedEvents", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		datasets := postgres.NewDatasetService(b.db)
		ds, err := datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: "chained",
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		patch, err := catalog.ParsePatch(map[string]any{"extensions": map[string]any{"adobe_lakeHouse": map[string]any{
			"rowExpiration": map[string]any{"ttlValue": "P6M"}}}})
		require.NoError(t, err)
		b.now = b.now.Add(time.Second)
		_, err = datasets.PatchDataset(ctx, b.caller, ds.ID, patch, nil)
		require.NoError(t, err)
		b.now = b.now.Add(time.Second)
		require.NoError(t, datasets.DeleteDataset(ctx, b.caller, ds.ID))

		v := b.verify(t, b.caller.Org)
		require.True(t, v.Valid, "%+v", v.FirstBroken)
		require.Equal(t, int64(3), v.Events)
		q, err := audit.ParseQuery(audit.Params{OrderBy: "+timestamp"})
		require.NoError(t, err)
		page, err := b.audit.FindEvents(ctx, b.caller, q)
		require.NoError(t, err)
		require.Len(t, page.Events, 3)
		for i, action := range []string{audit.ActionCreate, audit.ActionUpdate, audit.ActionDelete} {
			require.Equal(t, action, page.Events[i].Action)
			require.Equal(t, int64(i+1), page.Events[i].Seq)
		}
	})

	t.Run("ConcurrentWritersKeepOneChainPerOrg", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		orgs := []string{"C1@AdobeOrg", "C2@AdobeOrg", "C3@AdobeOrg"}
		const writers, each = 8, 15
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range each {
					errs <- b.audit.Record(ctx, &audit.Event{Org: orgs[(w+i)%len(orgs)], Sandbox: "prod", RequestID: "r",
						AssetType: audit.AssetDataset, AssetID: "x", AssetName: "x", Action: audit.ActionUpdate,
						Status: audit.StatusSuccess, User: "u", ClientID: "c", Details: map[string]any{"w": w, "i": i}})
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		var total int64
		for _, org := range orgs {
			v := b.verify(t, org)
			require.True(t, v.Valid, "%s: %+v", org, v.FirstBroken)
			require.Equal(t, v.Head.Seq, v.Events)
			total += v.Events
		}
		require.Equal(t, int64(writers*each), total)
	})
}

func TestAuditTamperEvidence(t *testing.T) {
	t.Parallel()

	t.Run("EditedEventCaughtAtExactlyThatEvent", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 6)
		b.tamper(t, `UPDATE audit_events SET details = jsonb_set(details, '{i}', '99') WHERE id = $1`, events[3].ID)
		v := b.verify(t, b.caller.Org)
		require.False(t, v.Valid)
		require.Equal(t, int64(4), v.FirstBroken.Seq)
		require.Equal(t, events[3].ID, v.FirstBroken.ID)
		require.Equal(t, audit.BreakHash, v.FirstBroken.Reason)
		require.Equal(t, int64(6), v.Events)
	})

	t.Run("EditedNewestEventCaught", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 3)
		b.tamper(t, `UPDATE audit_events SET user_id = 'someone-else' WHERE id = $1`, events[2].ID)
		v := b.verify(t, b.caller.Org)
		require.Equal(t, int64(3), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakHash, v.FirstBroken.Reason)
	})

	t.Run("EditedTimestampCaught", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 3)
		b.tamper(t, `UPDATE audit_events SET occurred_at = occurred_at - interval '1 microsecond' WHERE id = $1`, events[0].ID)
		require.Equal(t, int64(1), b.verify(t, b.caller.Org).FirstBroken.Seq)
	})

	t.Run("RemovedEventCaught", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 5)
		b.tamper(t, `DELETE FROM audit_events WHERE id = $1`, events[1].ID)
		v := b.verify(t, b.caller.Org)
		require.Equal(t, int64(3), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakSeq, v.FirstBroken.Reason)
	})

	t.Run("RemovedNewestEventsCaught", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 5)
		b.tamper(t, `DELETE FROM audit_events WHERE org_id = $1 AND seq >= $2`, b.caller.Org, events[3].Seq)
		v := b.verify(t, b.caller.Org)
		require.Equal(t, int64(4), v.FirstBroken.Seq)
		require.Equal(t, audit.BreakTail, v.FirstBroken.Reason)
	})

	t.Run("InsertedEventCaught", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 3)
		// A forged event that links correctly to the newest one, without moving the head.
		forged := *events[2]
		forged.ID, forged.AssetName = "11111111-2222-3333-4444-555555555555", "forged"
		require.NoError(t, forged.Seal(4, events[2].Hash))
		b.tamper(t, `INSERT INTO audit_events (id, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id,
			asset_name, action, status, user_id, client_id, details, seq, prev_hash, hash)
			SELECT $1, org_id, sandbox_name, occurred_at, request_id, asset_type, asset_id, $2, action, status, user_id,
			       client_id, details, 4, $3, $4 FROM audit_events WHERE id = $5`,
			forged.ID, forged.AssetName, forged.PrevHash, forged.Hash, events[2].ID)
		v := b.verify(t, b.caller.Org)
		require.Equal(t, int64(4), v.FirstBroken.Seq)
		require.Equal(t, forged.ID, v.FirstBroken.ID)
		require.Equal(t, audit.BreakExtra, v.FirstBroken.Reason)
	})
}

func TestAuditAppendOnly(t *testing.T) {
	t.Parallel()

	t.Run("ServiceRoleCannotChangeEvents", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", b.now, 2)
		app := testdb.Pool(t, b.appURL(t))
		ctx := context.Background()
		var n int
		require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM audit_events`).Scan(&n), "the service reads events")
		require.Equal(t, 2, n)
		for _, sql := range []string{
			`UPDATE audit_events SET asset_name = 'x' WHERE id = '` + events[0].ID + `'`,
			`DELETE FROM audit_events WHERE id = '` + events[0].ID + `'`,
			`DELETE FROM audit_events`,
			`TRUNCATE audit_events`,
			`UPDATE audit_chains SET anchor_seq = 2, anchor_hash = 'x'`,
			`DELETE FROM audit_chains`,
			`DELETE FROM audit_purges`,
			`ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_change`,
			`DROP TABLE audit_events`,
		} {
			_, err := app.Exec(ctx, sql)
			require.Error(t, err, sql)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, sql)
			require.Contains(t, []string{"42501"}, pgErr.Code, "%s: %s", sql, pgErr.Message)
		}
		// Nor can it empty the log through the retention's function.
		_, err := app.Exec(ctx, `SELECT * FROM audit_purge($1, now(), 1000)`, b.caller.Org)
		require.ErrorContains(t, err, "within 30 days")
		require.True(t, b.verify(t, b.caller.Org).Valid)
	})

	t.Run("TriggersStopEvenTheSuperuser", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		b.record(t, b.caller.Org, "prod", b.now, 1)
		ctx := context.Background()
		for _, sql := range []string{
			`UPDATE audit_events SET asset_name = 'x'`,
			`DELETE FROM audit_events`,
			`TRUNCATE audit_events`,
			`UPDATE audit_events SET asset_name = 'x' WHERE false`,
		} {
			_, err := b.db.Pool.Exec(ctx, sql)
			requireSQLState(t, err, "P0001")
			require.ErrorContains(t, err, "append-only", sql)
		}
	})

	t.Run("ServiceRunsAsItsRole", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		appDB, err := postgres.Open(ctx, b.appURL(t), nil)
		require.NoError(t, err)
		t.Cleanup(appDB.Close)
		// Startup migrations find nothing to do and need no more than the service's privileges.
		n, err := postgres.MigrateUp(ctx, appDB.Pool)
		require.NoError(t, err)
		require.Zero(t, n)
		require.NoError(t, riverjobs.Migrate(ctx, appDB.Pool))

		appDB.Now = func() time.Time { return time.Now().UTC() }
		datasets, rows := postgres.NewDatasetService(appDB), postgres.NewRowService(appDB, 0)
		ds, err := datasets.CreateDataset(ctx, b.caller, catalog.DatasetCreate{Name: "as-app",
			Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
		require.NoError(t, err)
		at := time.Now().Add(-time.Hour)
		_, err = rows.IngestRows(ctx, b.caller, ds.ID, func(yield func(catalog.RowInput) bool) {
			yield(catalog.RowInput{ID: "r1", Timestamp: at, IngestedAt: &at, Payload: []byte(`{}`)})
		}, catalog.IngestOptions{})
		require.NoError(t, err, "ingestion creates row partitions as the service's role")
		require.NoError(t, datasets.DeleteDataset(ctx, b.caller, ds.ID))

		appAudit := postgres.NewAuditService(appDB)
		q, err := audit.ParseQuery(audit.Params{})
		require.NoError(t, err)
		page, err := appAudit.FindEvents(ctx, b.caller, q)
		require.NoError(t, err)
		require.Len(t, page.Events, 2)
		v, err := appAudit.Verify(ctx, b.caller.Org)
		require.NoError(t, err)
		require.True(t, v.Valid, "%+v", v.FirstBroken)
	})
}

func TestAuditRetention(t *testing.T) {
	t.Parallel()

	t.Run("RemovesOldEventsAndStaysVerifiable", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		old := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
		org := b.caller.Org
		oldProd := b.record(t, org, "prod", old, 3)
		oldDev := b.record(t, org, "dev", old.Add(time.Hour), 2)
		kept := b.record(t, org, "prod", b.now, 2)
		untouched := b.record(t, "YOUNG@AdobeOrg", "prod", b.now, 2)

		r := &audit.Retention{Purger: b.audit, Keep: audit.DefaultKeep, Now: func() time.Time { return b.now }}
		res, err := r.PurgeOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, audit.PurgeResult{Orgs: 1, Removed: 5}, res)

		v := b.verify(t, org)
		require.True(t, v.Valid, "%+v", v.FirstBroken)
		require.Equal(t, audit.ChainPoint{Seq: 5, Hash: kept[0].PrevHash}, v.Anchor, "the anchor is the first kept event's link")
		require.Equal(t, oldDev[1].Hash, v.Anchor.Hash)
		require.Equal(t, int64(4), v.Events, "two kept events and one purge record per sandbox")

		var left []int64
		rows, err := b.db.Pool.Query(ctx, `SELECT seq FROM audit_events WHERE org_id = $1 ORDER BY seq`, org)
		require.NoError(t, err)
		left, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		require.Equal(t, []int64{6, 7, 8, 9}, left)

		// Each sandbox that lost events shows it in its own log.
		for sandbox, removed := range map[string]int{"prod": len(oldProd), "dev": len(oldDev)} {
			c := *b.caller
			c.Sandbox = sandbox
			q, err := audit.ParseQuery(audit.Params{Property: []string{"assetType==AuditLog"}})
			require.NoError(t, err)
			page, err := b.audit.FindEvents(ctx, &c, q)
			require.NoError(t, err)
			require.Len(t, page.Events, 1, sandbox)
			ev := page.Events[0]
			require.Equal(t, audit.ActionDelete, ev.Action)
			require.Equal(t, fmt.Sprint(removed), fmt.Sprint(ev.Details["removedEvents"]), sandbox)
		}
		var recorded int64
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT sum(removed) FROM audit_purges WHERE org_id = $1`, org).Scan(&recorded))
		require.Equal(t, int64(5), recorded, "the purge function's own record")

		require.True(t, b.verify(t, "YOUNG@AdobeOrg").Valid)
		require.Equal(t, int64(len(untouched)), b.verify(t, "YOUNG@AdobeOrg").Events)

		res, err = r.PurgeOnce(ctx)
		require.NoError(t, err)
		require.Zero(t, res.Removed, "a second pass finds nothing")
	})

	t.Run("EmptiedChainAnchorsOnTheOldHead", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		events := b.record(t, b.caller.Org, "prod", time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC), 3)
		res, err := b.audit.PurgeBefore(context.Background(), time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		require.Equal(t, int64(3), res.Removed)
		v := b.verify(t, b.caller.Org)
		require.True(t, v.Valid, "%+v", v.FirstBroken)
		require.Equal(t, audit.ChainPoint{Seq: 3, Hash: events[2].Hash}, v.Anchor)
		require.Equal(t, int64(1), v.Events, "only the purge record is left")
	})

	t.Run("Batches", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		b.audit.PurgeBatch = 2
		events := b.record(t, b.caller.Org, "prod", time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC), 5)
		res, err := b.audit.PurgeBefore(ctx, time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		require.Equal(t, int64(5), res.Removed)
		v := b.verify(t, b.caller.Org)
		require.True(t, v.Valid, "%+v", v.FirstBroken)
		require.Equal(t, int64(5), v.Anchor.Seq)
		require.Equal(t, events[4].Hash, v.Anchor.Hash, "all old events gone: the anchor is the old head")
		require.Equal(t, int64(3), v.Events, "one purge record per batch (2+2+1)")
	})

	t.Run("TamperingAfterRetentionCaught", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		b.record(t, b.caller.Org, "prod", time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC), 3)
		kept := b.record(t, b.caller.Org, "prod", b.now, 3)
		_, err := b.audit.PurgeBefore(ctx, time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		b.tamper(t, `DELETE FROM audit_events WHERE id = $1`, kept[0].ID)
		v := b.verify(t, b.caller.Org)
		require.Equal(t, kept[1].Seq, v.FirstBroken.Seq, "the first kept event is the anchor's: removing it shows")
	})

	t.Run("RetentionAsTheServiceRole", func(t *testing.T) {
		t.Parallel()
		b := setupAudit(t)
		ctx := context.Background()
		b.record(t, b.caller.Org, "prod", time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC), 2)
		appDB, err := postgres.Open(ctx, b.appURL(t), nil)
		require.NoError(t, err)
		t.Cleanup(appDB.Close)
		appDB.Now = b.db.Now
		res, err := postgres.NewAuditService(appDB).PurgeBefore(ctx, time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC))
		require.NoError(t, err)
		require.Equal(t, int64(2), res.Removed)
		require.True(t, b.verify(t, b.caller.Org).Valid)
	})
}
