package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/httpapi"
)

func TestGatewayAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	otherOrgToken := mintToken(t, newOrg(), allScopes, time.Hour)
	expired := mintToken(t, b.org, allScopes, -time.Minute)
	cases := []struct {
		name    string
		headers map[string]string
		status  int
		code    string
	}{
		{"MissingToken", map[string]string{"Authorization": ""}, 403, "403010"},
		{"NotBearer", map[string]string{"Authorization": "Basic abc"}, 403, "403010"},
		{"MissingAPIKey", map[string]string{"x-api-key": ""}, 403, "403000"},
		{"MissingOrgHeader", map[string]string{"x-gw-ims-org-id": ""}, 400, "400003"},
		{"GarbageToken", map[string]string{"Authorization": "Bearer not.a.jwt"}, 401, "401013"},
		{"WrongSignature", map[string]string{"Authorization": "Bearer " + b.token + "x"}, 401, "401013"},
		{"ExpiredToken", map[string]string{"Authorization": "Bearer " + expired}, 401, "401013"},
		{"TokenOfAnotherOrg", map[string]string{"Authorization": "Bearer " + otherOrgToken}, 403, "403025"},
	}
	for _, tc := range cases {
		resp := b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: tc.headers})
		require.Equal(t, tc.status, resp.status, tc.name)
		body := resp.json(t)
		require.Equal(t, tc.code, body["error_code"], tc.name)
		require.NotEmpty(t, body["message"], tc.name)
	}
}

func TestTokenWithoutExpiryIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noExpiry, err := httpapi.MintToken(testSecret, httpapi.Claims{Org: b.org, Scope: catalog.ScopeDatasetsRead})
	require.NoError(t, err)
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: map[string]string{"Authorization": "Bearer " + noExpiry}})
	require.Equal(t, http.StatusUnauthorized, resp.status)
	require.Equal(t, "401013", resp.json(t)["error_code"])
}

func TestScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	readOnly := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeDatasetsRead}, time.Hour)}
	require.Equal(t, http.StatusOK, b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id, headers: readOnly}).status)
	for _, req := range []request{
		{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "x"}, headers: readOnly},
		{method: http.MethodDelete, path: "/dataSets/" + id, headers: readOnly},
		{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{"description": "x"}, headers: readOnly},
		{method: http.MethodPatch, path: "/dataSets/" + id, body: map[string]any{"description": "x"}, headers: readOnly},
		{method: http.MethodPut, path: "/dataSets/" + id, body: map[string]any{"name": "x"}, headers: readOnly},
	} {
		resp := b.do(t, req)
		require.Equal(t, http.StatusForbidden, resp.status, req.method)
		p := resp.problem(t)
		require.Equal(t, "missing-scope", p.Type)
		require.Contains(t, p.Detail, catalog.ScopeDatasetsManage)
	}
	none := map[string]string{"Authorization": "Bearer " + mintToken(t, b.org, []string{catalog.ScopeAuditRead}, time.Hour)}
	resp := b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: none})
	require.Equal(t, http.StatusForbidden, resp.status)
	require.Contains(t, resp.problem(t).Detail, catalog.ScopeDatasetsRead)
}

func TestTenancyIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{name: "secret"})
	other := *b
	other.org = newOrg()
	other.token = mintToken(t, other.org, allScopes, time.Hour)
	devSandbox := map[string]string{"x-sandbox-name": "dev"}

	for _, caller := range []struct {
		name    string
		b       *testBundle
		headers map[string]string
	}{
		{"OtherOrg", &other, nil},
		{"OtherSandbox", b, devSandbox},
	} {
		for _, req := range []request{
			{method: http.MethodGet, path: "/dataSets/" + id},
			{method: http.MethodGet, path: "/ttl/" + id},
			{method: http.MethodDelete, path: "/dataSets/" + id},
			{method: http.MethodPatch, path: "/v2/dataSets/" + id, body: map[string]any{"description": "pwned"}},
			{method: http.MethodPatch, path: "/dataSets/" + id, body: map[string]any{"description": "pwned"}},
			{method: http.MethodPut, path: "/dataSets/" + id, body: map[string]any{"name": "pwned"}},
		} {
			req.headers = caller.headers
			resp := caller.b.do(t, req)
			require.Equal(t, http.StatusNotFound, resp.status, "%s %s %s", caller.name, req.method, req.path)
			require.Equal(t, "dataset "+id+" was not found", resp.problem(t).Detail, "answers exactly as for a missing id")
		}
		list := caller.b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: caller.headers})
		require.JSONEq(t, `{}`, string(list.body), caller.name)
		dup := caller.b.do(t, request{method: http.MethodPost, path: "/dataSets", body: map[string]any{"name": "secret"}, headers: caller.headers})
		require.Equal(t, http.StatusCreated, dup.status, "a name taken in another tenant is free here")
	}
	doc, _ := b.getDataset(t, id)
	require.Equal(t, "1.0.0", doc["version"], "nothing changed the dataset")
}

func TestSandboxHeader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createDataset(t, datasetOpts{})
	explicit := b.do(t, request{method: http.MethodGet, path: "/dataSets/" + id, headers: map[string]string{"x-sandbox-name": "prod"}})
	require.Equal(t, http.StatusOK, explicit.status, "no header means the default sandbox prod")
	bad := b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: map[string]string{"x-sandbox-name": "Prod Sandbox"}})
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Equal(t, "x-sandbox-name", bad.problem(t).Field)
}

// signed signs claims with the test secret, adding header fields (name, value pairs) to the JOSE header.
func signed(t *testing.T, claims jwt.Claims, header ...any) string {
	t.Helper()
	token := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	for i := 0; i+1 < len(header); i += 2 {
		token.Header[header[i].(string)] = header[i+1]
	}
	s, err := token.SignedString([]byte(testSecret))
	require.NoError(t, err)
	return s
}

// TestTokensFollowTheRFCs is part of finding 9: a token whose exp was a string ("exp":"4102444800") or that had a
// crit header was accepted. A NumericDate is a JSON number (RFC 7519 §2), and a crit header names extensions the
// recipient must understand or refuse the token (RFC 7515 §4.1.11); this service understands none.
func TestTokensFollowTheRFCs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	later := time.Now().Add(time.Hour).Unix()
	claims := func(extra map[string]any) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "tester@example.com", "org": b.org, "client_id": "test-client", "scope": catalog.ScopeDatasetsRead, "exp": later}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	typed := httpapi.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "tester@example.com", ExpiresAt: jwt.NewNumericDate(time.Unix(later, 0))},
		Org:              b.org, ClientID: "test-client", Scope: catalog.ScopeDatasetsRead,
	}
	for _, tc := range []struct {
		name   string
		token  string
		status int
	}{
		{"NumericExp", signed(t, claims(nil)), http.StatusOK},
		{"FractionalExp", signed(t, claims(map[string]any{"exp": float64(later) + 0.5})), http.StatusOK},
		{"ExpAsString", signed(t, claims(map[string]any{"exp": fmt.Sprint(later)})), http.StatusUnauthorized},
		{"NbfAsString", signed(t, claims(map[string]any{"nbf": "0"})), http.StatusUnauthorized},
		{"IatAsString", signed(t, claims(map[string]any{"iat": "0"})), http.StatusUnauthorized},
		{"ExpNull", signed(t, claims(map[string]any{"exp": nil})), http.StatusUnauthorized},
		{"CritHeader", signed(t, typed, "crit", []string{"exp"}), http.StatusUnauthorized},
		{"CritExtension", signed(t, typed, "crit", []string{"b64"}, "b64", false), http.StatusUnauthorized},
		{"EmptyCrit", signed(t, typed, "crit", []string{}), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(t, request{method: http.MethodGet, path: "/dataSets", headers: map[string]string{"Authorization": "Bearer " + tc.token}})
			require.Equal(t, tc.status, resp.status, "body: %s", resp.body)
			if tc.status == http.StatusUnauthorized {
				require.Equal(t, "401013", resp.json(t)["error_code"])
			}
		})
	}
}
