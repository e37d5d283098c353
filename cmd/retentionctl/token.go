package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
	"github.com/acme/retention/internal/config"
)

func runToken(args []string, env getenv, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	org := fs.String("org", defaultOrg, "the org the token acts in (its org claim)")
	sub := fs.String("sub", "dev@acme.example", "the user (sub claim)")
	client := fs.String("client", "retentionctl-dev", "the client id (client_id claim)")
	scope := fs.String("scope", strings.Join([]string{catalog.ScopeDatasetsRead, catalog.ScopeDatasetsManage,
		catalog.ScopeAuditRead, catalog.ScopeRetentionRun, catalog.ScopeRetentionHold}, " "), "space-separated scopes")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *ttl <= 0 {
		return fmt.Errorf("-ttl must be a positive duration such as 24h, got %s", *ttl)
	}
	secret := env("AUTH_HS256_SECRET")
	if secret == "" {
		secret = config.DevSecret
	}
	token, err := httpapi.MintToken(secret, httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: *sub, IssuedAt: jwt.NewNumericDate(time.Now()),
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(*ttl))},
		Org: *org, ClientID: *client, Scope: *scope,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, token)
	return nil
}
