package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/audit"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
)

// auditCtlBundle is a running API with an audit log, and the environment the CLI reaches it with.
type auditCtlBundle struct {
	db     *postgres.DB
	env    map[string]string
	org    string
	events []*audit.Event // oldest first
}

func setupAuditCtl(t *testing.T) *auditCtlBundle {
	t.Helper()
	const secret = "audit-ctl-test-secret-of-32-bytes!!"
	ctx := context.Background()
	db := testdb.NewDB(t)
	auth, err := httpapi.NewAuthenticator(ctx, secret, "", time.Now)
	require.NoError(t, err)
	svc := postgres.NewAuditService(db)
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(httpapi.Config{Datasets: postgres.NewDatasetService(db), Audit: svc, Auth: auth,
		Ready: db.Ready, Registry: prometheus.NewRegistry()})))
	t.Cleanup(srv.Close)
	b := &auditCtlBundle{db: db, env: map[string]string{"RETENTION_URL": srv.URL, "AUTH_HS256_SECRET": secret}, org: "AUDITCTL@AdobeOrg"}
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i, action := range []string{"Create", "Update", "Update", "Expire", "Delete"} {
		ev := &audit.Event{Org: b.org, Sandbox: "prod", Timestamp: base.Add(time.Duration(i) * time.Minute), RequestID: "req",
			AssetType: "Dataset", AssetID: "5c8c3c555033b814b69f947f", AssetName: "clicks", Action: action, Status: "Success",
			User: "ann@example.com", ClientID: "c", Details: map[string]any{"i": i}}
		require.NoError(t, svc.Record(ctx, ev))
		b.events = append(b.events, ev)
	}
	// Another org's event, which no command of b.org may show.
	require.NoError(t, svc.Record(ctx, &audit.Event{Org: "OTHER@AdobeOrg", Sandbox: "prod", RequestID: "r", AssetType: "Dataset",
		AssetID: "x", AssetName: "x", Action: "Update", Status: "Success", User: "u", ClientID: "c"}))
	return b
}

func (b *auditCtlBundle) ctl(t *testing.T, args ...string) string {
	t.Helper()
	return mustCtl(t, b.env, append(args, "-org", b.org)...)
}

func TestAuditCommands(t *testing.T) {
	t.Parallel()

	t.Run("ListTable", func(t *testing.T) {
		t.Parallel()
		b := setupAuditCtl(t)
		out := b.ctl(t, "audit", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 7, out)
		require.Regexp(t, `^TIME\s+ACTION\s+ASSET TYPE\s+ASSET ID\s+ASSET NAME\s+USER\s+STATUS\s+REQUEST\s+SEQ$`, lines[0])
		require.Contains(t, lines[1], "Delete", "newest first")
		require.Contains(t, lines[5], "Create")
		require.Equal(t, "5 event(s) shown of 5", lines[6])
		require.NotContains(t, out, "OTHER")
	})

	t.Run("ListFilters", func(t *testing.T) {
		t.Parallel()
		b := setupAuditCtl(t)
		ids := func(args ...string) []string {
			var docs []map[string]any
			require.NoError(t, json.Unmarshal([]byte(b.ctl(t, append([]string{"audit", "list", "-json"}, args...)...)), &docs))
			var out []string
			for _, d := range docs {
				out = append(out, d["id"].(string))
			}
			return out
		}
		e := b.events
		require.Equal(t, []string{e[2].ID, e[1].ID}, ids("-action", "Update"))
		require.Equal(t, []string{e[4].ID, e[2].ID, e[1].ID}, ids("-action", "update,delete"))
		require.Equal(t, []string{e[1].ID, e[2].ID}, ids("-property", "action==Update", "-order-by", "+timestamp"))
		require.Equal(t, []string{e[4].ID, e[3].ID}, ids("-since", e[2].Timestamp.Format(time.RFC3339)))
		require.Equal(t, []string{e[0].ID}, ids("-until", e[1].Timestamp.Format(time.RFC3339)))
		require.Len(t, ids("-user", "ann@example.com", "-asset-type", "Dataset", "-status", "Success", "-request-id", "req",
			"-asset-id", "5c8c3c555033b814b69f947f", "-asset-name", "clicks"), 5)
		require.Empty(t, ids("-user", "nobody"))
		require.Equal(t, []string{e[4].ID, e[3].ID}, ids("-limit", "2"), "one page")
		require.Len(t, ids("-limit", "2", "-all"), 5, "every page")
		require.Equal(t, []string{e[2].ID}, ids("-limit", "1", "-start", "2"))
	})

	t.Run("ListMentionsMorePages", func(t *testing.T) {
		t.Parallel()
		b := setupAuditCtl(t)
		out := b.ctl(t, "audit", "list", "-limit", "2")
		require.Contains(t, out, "2 event(s) shown of 5; more with -start 2 or -all")
	})

	t.Run("BadFilterNamesTheTerm", func(t *testing.T) {
		t.Parallel()
		b := setupAuditCtl(t)
		_, err := ctl(t, b.env, "audit", "list", "-org", b.org, "-property", "color==red")
		require.ErrorContains(t, err, "400")
		require.ErrorContains(t, err, "color==red")
		_, err = ctl(t, b.env, "audit", "export", "-org", b.org, "-since", "yesterday")
		require.ErrorContains(t, err, "yesterday")
		_, err = ctl(t, b.env, "audit", "bogus")
		require.ErrorIs(t, err, errUsage)
	})

	t.Run("ExportEqualsList", func(t *testing.T) {
		t.Parallel()
		b := setupAuditCtl(t)
		var listed []map[string]any
		require.NoError(t, json.Unmarshal([]byte(b.ctl(t, "audit", "list", "-json", "-action", "Update,Expire")), &listed))
		require.Len(t, listed, 3)

		var exported []map[string]any
		require.NoError(t, json.Unmarshal([]byte(b.ctl(t, "audit", "export", "-format", "json", "-action", "Update,Expire")), &exported))
		require.Equal(t, listed, exported)

		file := filepath.Join(t.TempDir(), "audit.csv")
		require.Empty(t, b.ctl(t, "audit", "export", "-action", "Update,Expire", "-o", file))
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		records, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 4)
		require.Equal(t, "id", records[0][0])
		for i, rec := range records[1:] {
			require.Equal(t, listed[i]["id"], rec[0])
			require.Equal(t, listed[i]["action"], rec[8])
		}
	})

	t.Run("Verify", func(t *testing.T) {
		t.Parallel()
		b := setupAuditCtl(t)
		out := b.ctl(t, "audit", "verify")
		require.Contains(t, out, "audit chain of AUDITCTL@AdobeOrg: valid, 5 event(s) verified (seq 1 to 5)")
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(b.ctl(t, "audit", "verify", "-json")), &v))
		require.Equal(t, true, v["valid"])

		ctx := context.Background()
		require.NoError(t, pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE audit_events SET action = 'Create' WHERE id = $1`, b.events[3].ID)
			return err
		}))
		out, err := ctl(t, b.env, "audit", "verify", "-org", b.org)
		require.ErrorIs(t, err, errChainBroken)
		require.Contains(t, out, "BROKEN at seq 4 (event "+b.events[3].ID)
		require.Contains(t, out, audit.BreakHash)
	})
}
