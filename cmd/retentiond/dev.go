package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/config"
	"github.com/acme/retention/internal/demo"
	"github.com/acme/retention/postgres"
)

// printDevWelcome loads the demo data and prints what a new user needs: the URL, a dev token and curl calls that
// work as printed.
func printDevWelcome(ctx context.Context, cfg *config.Config, svc catalog.DatasetService, db *postgres.DB, out io.Writer) error {
	datasets, err := demo.Load(ctx, svc, db)
	if err != nil {
		return err
	}
	org := demo.Orgs[0]
	token, err := httpapi.MintToken(cfg.AuthHS256Secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "dev@acme.example", ExpiresAt: jwt.NewNumericDate(time.Now().Add(24 * time.Hour))},
		Org:              org, ClientID: "retentionctl-dev",
		Scope: strings.Join([]string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage, catalog.ScopeAuditRead, catalog.ScopeRetentionRun}, " "),
	})
	if err != nil {
		return err
	}
	id := ""
	for _, ds := range datasets {
		if ds.IsTimeSeries() && ds.Classification.ManagedBy == catalog.Customer {
			id = ds.ID
			break
		}
	}
	base := "http://" + cfg.HTTPAddr
	headers := fmt.Sprintf(`-H "Authorization: Bearer $TOKEN" -H "x-api-key: dev" -H "x-gw-ims-org-id: %s"`, org)
	fmt.Fprintf(out, `
retentiond is starting at %[1]s with %[2]d demo datasets in org %[3]s.

  export TOKEN=%[4]s

  curl -s %[5]s %[1]s/dataSets
  curl -s %[5]s %[1]s/ttl/%[6]s
  curl -s -X PATCH %[5]s -H "Content-Type: application/json" %[1]s/v2/dataSets/%[6]s \
       -d '{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P3M"}}}}'

Stop with Ctrl-C; the next `+"`make run`"+` reuses the data.
`, base, len(datasets), org, token, headers, id)
	return nil
}
