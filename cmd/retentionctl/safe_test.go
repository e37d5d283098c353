package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/apitest"
	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/postgres"
)

// hostileName erases the terminal's line, returns to its start, retitles the window and reverses what follows.
const hostileName = "pilot\x1b[2K\rforged line\x1b]0;pwned\a\u202eevil\u0085"

// requireTerminalSafe fails unless out holds none of the characters a terminal would act on, other than the
// CLI's own newlines and the spaces tabwriter pads with.
func requireTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\r", "\a", "\u202e", "\u0085"} {
		require.NotContains(t, out, bad, "printed raw: %q", out)
	}
}

// Issue 28, finding 8: retentionctl audit list and expirations list printed a tenant's dataset name, hold reason or
// request id with its raw control characters, which can erase or forge lines of an operator's terminal. Text the API
// stored before names were checked (or any that comes from the API) is printed escaped.
func TestCommandsEscapeWhatTheyPrint(t *testing.T) {
	t.Parallel()
	const secret = "safe-ctl-test-secret-of-32-bytes!!!!"
	ctx := context.Background()
	db := testdb.NewDB(t)
	auth, err := httpapi.NewAuthenticator(ctx, secret, "", time.Now)
	require.NoError(t, err)
	datasets := postgres.NewDatasetService(db)
	srv := httptest.NewServer(apitest.Handler(t, httpapi.New(httpapi.Config{Datasets: datasets, Expirations: postgres.NewExpirationService(db, 0),
		Audit: postgres.NewAuditService(db), Auth: auth, Ready: db.Ready, Registry: prometheus.NewRegistry()})))
	t.Cleanup(srv.Close)
	c := &catalog.Caller{User: "u\x1b[1A", ClientID: "c", Org: "SAFECTL@AdobeOrg", Sandbox: "prod", RequestID: "=1+2\u202e"}
	// Stored through the service, not the API, as a dataset named before the API refused such names.
	ds, err := datasets.CreateDataset(ctx, c, catalog.DatasetCreate{Name: hostileName, Classification: catalog.Classification{DataBehavior: catalog.TimeSeries, ManagedBy: catalog.Customer}})
	require.NoError(t, err)
	_, err = postgres.NewExpirationService(db, 0).CreateExpiration(ctx, c, catalog.ExpirationCreate{DatasetID: ds.ID,
		Expiry: time.Now().UTC().AddDate(0, 0, 3), DisplayName: "retire\r\x1b[1A"})
	require.NoError(t, err)
	env := map[string]string{"RETENTION_URL": srv.URL, "AUTH_HS256_SECRET": secret}

	for _, args := range [][]string{
		{"expirations", "list"}, {"expirations", "list", "-json"}, {"audit", "list"}, {"audit", "list", "-json"},
	} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			out := mustCtl(t, env, append(args, "-org", c.Org)...)
			require.Contains(t, out, ds.ID)
			requireTerminalSafe(t, out)
			if !strings.HasSuffix(args[len(args)-1], "json") {
				require.Contains(t, out, `pilot\x1b[2K\x0dforged line\x1b]0;pwned\x07\u202eevil\u0085`, "the name is shown, escaped")
			}
		})
	}
}
