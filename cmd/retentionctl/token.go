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
	sub := fs.String("sub", devUser, "the user (sub claim)")
	client := fs.String("client", devClient, "the client id (client_id claim)")
	scope := fs.String("scope", strings.Join(catalog.AllScopes, " "), "space-separated scopes")
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

// devUser and devClient are the identity of the token `retentionctl token` mints by default (and `make run`'s). The
// CLI acts as them when no token is exported, so that one person's work reads as one identity in the audit log,
// whichever command did it.
const (
	devUser   = "dev@acme.example"
	devClient = "retentionctl-dev"
)

// exportedToken is the token the CLI acts as: RETENTION_TOKEN, else TOKEN (the variable the README and `make run`
// export), else none.
func exportedToken(env getenv) string {
	if t := strings.TrimSpace(env("RETENTION_TOKEN")); t != "" {
		return t
	}
	return strings.TrimPrefix(strings.TrimSpace(env("TOKEN")), "Bearer ")
}

// cliIdentity is the user and client the CLI records for work it does on the database itself (load): those of the
// exported token, read without checking its signature (who runs load holds the database's credentials anyway), or
// the default identity of `retentionctl token`.
func cliIdentity(env getenv) (user, client string) {
	user, client = devUser, devClient
	token := exportedToken(env)
	if token == "" {
		return user, client
	}
	var claims httpapi.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil {
		return user, client
	}
	if claims.Subject != "" {
		user = claims.Subject
	}
	if claims.ClientID != "" {
		client = claims.ClientID
	}
	return user, client
}
