package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/pgcluster"
)

// printDevWelcome prints what a new user needs once the server listens at base: a dev token and curl calls that
// work as printed, and, with the private cluster, how to reach its database from a second shell. datasets are the
// demo datasets of org, the token's; dev is nil when DATABASE_URL named a database.
func printDevWelcome(out io.Writer, secret, base, org string, datasets []*catalog.Dataset, dev *pgcluster.Dev) error {
	token, err := httpapi.MintToken(secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "dev@acme.example", ExpiresAt: jwt.NewNumericDate(time.Now().Add(24 * time.Hour))},
		Org:              org, ClientID: "retentionctl-dev",
		Scope: strings.Join(catalog.AllScopes, " "),
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
	headers := fmt.Sprintf(`-H "Authorization: Bearer $TOKEN" -H "x-api-key: dev" -H "x-gw-ims-org-id: %s"`, org)
	fmt.Fprintf(out, `
retentiond is serving at %[1]s with %[2]d demo datasets in org %[3]s.

  export TOKEN=%[4]s

  Web console: %[1]s/ui/#token=%[4]s

  curl -s %[5]s %[1]s/dataSets
  curl -s %[5]s %[1]s/ttl/%[6]s
  curl -s -X PATCH %[5]s -H "Content-Type: application/json" %[1]s/v2/dataSets/%[6]s \
       -d '{"extensions":{"adobe_lakeHouse":{"rowExpiration":{"ttlValue":"P3M"}}}}'
`, base, len(datasets), org, token, headers, id)
	if dev == nil {
		fmt.Fprintln(out, "\nStop with Ctrl-C.")
		return nil
	}
	port, usual := dev.Port()
	portNote := fmt.Sprintf("Its port, %d, is this checkout's: the same at every start, so the line above keeps working.", port)
	if port != usual {
		portNote = fmt.Sprintf("Its port is %d this time: this checkout's usual port, %d, was taken by another process.", port, usual)
	}
	fmt.Fprintf(out, `
From a second shell in this checkout, ./bin/retentionctl reaches this database by itself: with DATABASE_URL unset
it reads %[1]s. Other tools need

  export DATABASE_URL=%[2]s

%[3]s

Stop with Ctrl-C: PostgreSQL stops too, and the next `+"`make run`"+` reuses the data. Should retentiond be killed
and leave PostgreSQL running, the next `+"`make run`"+` takes it over, or `+"`make stop`"+` stops it.
`, dev.URLFile(), dev.URL(), portNote)
	return nil
}
