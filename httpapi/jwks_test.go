package httpapi_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
)

// TestRS256ThroughJWKS verifies production tokens: RS256, with keys fetched from a JWKS endpoint.
func TestRS256ThroughJWKS(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	jwk, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1"}})
	require.NoError(t, err)
	store := jwkset.NewMemoryStorage()
	require.NoError(t, store.KeyWrite(context.Background(), jwk))
	keys, err := store.JSONPublic(context.Background())
	require.NoError(t, err)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(keys) }))
	t.Cleanup(jwks.Close)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	auth, err := httpapi.NewAuthenticator(ctx, "", jwks.URL, time.Now)
	require.NoError(t, err)
	sign := func(k *rsa.PrivateKey, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, httpapi.Claims{
			RegisteredClaims: jwt.RegisteredClaims{Subject: "prod-user", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
			Org:              "ORG@AdobeOrg", Scope: catalog.ScopeDatasetsRead,
		})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(k)
		require.NoError(t, err)
		return s
	}
	claims, err := auth.Verify(sign(key, "k1"))
	require.NoError(t, err)
	require.Equal(t, "prod-user", claims.Subject)

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, err = auth.Verify(sign(other, "k1"))
	require.Error(t, err, "a token signed by another key is refused")
	hs, err := httpapi.MintToken(testSecret, httpapi.Claims{Org: "ORG@AdobeOrg", RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	require.NoError(t, err)
	_, err = auth.Verify(hs)
	require.Error(t, err, "HS256 is refused when no shared secret is configured")
}
