package httpapi

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Verifying a token is a sixth of the CPU of a GET /ttl/{id} (docs/benchmarks.md, "Where a read's CPU goes"): the
// signature, and above all decoding its claims, twice. A client sends the same token with every request, so the
// Authenticator remembers the tokens it verified, by their SHA-256, for a short while.

// Bounds of the verified-token cache: a token's verification is reused for at most verifiedTTL (so that a key
// removed from the JWKS stops being accepted within it, as the JWKS refresh already allows), and the cache holds at
// most maxVerified tokens (about 300 bytes each); when full it is emptied, and tokens are verified again.
const (
	verifiedTTL = time.Minute
	maxVerified = 4096
)

// verifiedToken is a token's claims as Verify returned them, and when they were verified.
type verifiedToken struct {
	claims Claims
	at     time.Time
}

// verifiedTokens remembers verified tokens by their SHA-256.
type verifiedTokens struct {
	mu     sync.Mutex
	byHash map[[sha256.Size]byte]verifiedToken
}

// get returns a copy of the claims of the token verified within verifiedTTL of now, unless they have expired or are
// not yet valid at now: then the token must be verified again, which refuses it as the JWT library does.
func (v *verifiedTokens) get(token string, now time.Time) (*Claims, bool) {
	key := sha256.Sum256([]byte(token))
	v.mu.Lock()
	e, ok := v.byHash[key]
	v.mu.Unlock()
	if !ok || now.Sub(e.at) >= verifiedTTL || now.Before(e.at) {
		return nil, false
	}
	if e.claims.ExpiresAt == nil || !now.Before(e.claims.ExpiresAt.Time) {
		return nil, false
	}
	if e.claims.NotBefore != nil && now.Before(e.claims.NotBefore.Time) {
		return nil, false
	}
	c := e.claims
	return &c, true
}

// put remembers the claims of a token verified at now.
func (v *verifiedTokens) put(token string, claims *Claims, now time.Time) {
	key := sha256.Sum256([]byte(token))
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byHash == nil || len(v.byHash) >= maxVerified {
		v.byHash = make(map[[sha256.Size]byte]verifiedToken)
	}
	v.byHash[key] = verifiedToken{claims: *claims, at: now}
}

// len is how many tokens the cache holds.
func (v *verifiedTokens) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.byHash)
}
