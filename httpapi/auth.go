package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"github.com/acme/retention/catalog"
)

// Claims are the JWT claims the service reads.
type Claims struct {
	jwt.RegisteredClaims
	Org      string `json:"org"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
}

// numericDateClaims are the registered claims whose value RFC 7519 §2 defines as a NumericDate: a JSON number.
var numericDateClaims = []string{"exp", "nbf", "iat"}

// UnmarshalJSON reads the claims, refusing a NumericDate claim that is not a JSON number. The JWT library reads a
// string holding a number too ("exp":"4102444800"), which a token must not be allowed to bend its expiry with.
func (c *Claims) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("read token claims: %w", err)
	}
	for _, name := range numericDateClaims {
		if v, ok := raw[name]; ok && !isJSONNumber(v) {
			return fmt.Errorf("token claim %s is %s, not a NumericDate (a JSON number, RFC 7519)", name, v)
		}
	}
	type claims Claims // the same fields without this method, so decoding does not come back here
	if err := json.Unmarshal(data, (*claims)(c)); err != nil {
		return fmt.Errorf("read token claims: %w", err)
	}
	return nil
}

// isJSONNumber reports whether v, a JSON value, is a number.
func isJSONNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// Authenticator verifies bearer tokens: HS256 with a shared secret (development and tests) and, when configured,
// RS256 through a JWKS endpoint (production). Verification is the JWT library's; this type only picks the key.
type Authenticator struct {
	secret   []byte
	jwks     keyfunc.Keyfunc
	now      func() time.Time
	verified verifiedTokens
}

// NewAuthenticator returns an Authenticator. secret may be empty when jwksURL is set and the reverse; the JWKS is
// fetched in the background and refreshed until ctx ends.
func NewAuthenticator(ctx context.Context, secret, jwksURL string, now func() time.Time) (*Authenticator, error) {
	a := &Authenticator{secret: []byte(secret), now: now}
	if jwksURL != "" {
		k, err := keyfunc.NewDefaultCtx(ctx, []string{jwksURL})
		if err != nil {
			return nil, fmt.Errorf("load JWKS from AUTH_JWKS_URL: %w", err)
		}
		a.jwks = k
	}
	if len(a.secret) == 0 && a.jwks == nil {
		return nil, errors.New("no token verification configured: set AUTH_HS256_SECRET or AUTH_JWKS_URL")
	}
	return a, nil
}

func (a *Authenticator) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515 §4.1.11: a token whose crit header lists an extension the recipient does not understand must be
		// refused. This service understands none, and the JWT library does not check crit at all.
		return nil, errors.New("the token's crit header lists extensions this service does not understand")
	}
	switch t.Method.Alg() {
	case jwt.SigningMethodHS256.Alg():
		if len(a.secret) == 0 {
			return nil, errors.New("HS256 tokens are not accepted")
		}
		return a.secret, nil
	case jwt.SigningMethodRS256.Alg():
		if a.jwks == nil {
			return nil, errors.New("RS256 tokens need AUTH_JWKS_URL")
		}
		return a.jwks.Keyfunc(t)
	}
	return nil, fmt.Errorf("unexpected signing method %s", t.Method.Alg())
}

// Verify parses and verifies a token, requiring an expiry. A token verified within the last minute is not verified
// again, but its expiry and not-before are checked again (verified.go).
func (a *Authenticator) Verify(token string) (*Claims, error) {
	now := a.now()
	if claims, ok := a.verified.get(token, now); ok {
		return claims, nil
	}
	claims := &Claims{}
	_, err := jwt.ParseWithClaims(token, claims, a.key,
		jwt.WithValidMethods([]string{"HS256", "RS256"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		return nil, fmt.Errorf("verify token: %w", err)
	}
	a.verified.put(token, claims, now)
	return claims, nil
}

// MintToken signs an HS256 token for development and tests.
func MintToken(secret string, claims Claims) (string, error) {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}

var sandboxPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

const callerKey = "caller"

// authenticate checks the gateway headers as Adobe's gateway does, answering in its error shape, then puts the
// caller into the context. Errors after this point, a missing scope included, answer as RFC 7807 problems.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		auth := req.Header.Get(echo.HeaderAuthorization)
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			return gateway(c, errTokenMissing)
		}
		if req.Header.Get("x-api-key") == "" {
			return gateway(c, errAPIKeyMissing)
		}
		org := req.Header.Get("x-gw-ims-org-id")
		if org == "" {
			return gateway(c, errOrgMissing)
		}
		claims, err := s.auth.Verify(strings.TrimSpace(token))
		if err != nil {
			return gateway(c, errTokenInvalid)
		}
		if claims.Org != org {
			return gateway(c, errOrgMismatch)
		}
		sandbox := req.Header.Get("x-sandbox-name")
		if sandbox == "" {
			sandbox = catalog.DefaultSandbox
		}
		if !sandboxPattern.MatchString(sandbox) {
			return catalog.Invalid("invalid-sandbox", "x-sandbox-name",
				"x-sandbox-name %q must be the all-lowercase name of a sandbox: letters, digits and dashes, at most 63", catalog.Clip(sandbox))
		}
		c.Set(callerKey, &catalog.Caller{
			User: claims.Subject, ClientID: claims.ClientID, Org: org, Sandbox: sandbox,
			Scopes: strings.Fields(claims.Scope), RequestID: c.Response().Header().Get(echo.HeaderXRequestID),
		})
		return next(c)
	}
}

func gateway(c echo.Context, e gatewayError) error {
	return c.JSON(gatewayStatus(e), e)
}

// requireScope refuses callers whose token lacks scope.
func requireScope(scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !caller(c).HasScope(scope) {
				return &catalog.Error{Code: catalog.EFORBIDDEN, Type: "missing-scope", Field: "scope",
					Message: fmt.Sprintf("this call needs the %s scope, which the token does not grant", scope)}
			}
			return next(c)
		}
	}
}

func caller(c echo.Context) *catalog.Caller {
	v, _ := c.Get(callerKey).(*catalog.Caller)
	return v
}
