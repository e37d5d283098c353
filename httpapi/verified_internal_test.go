package httpapi

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const verifiedSecret = "verified-token-cache-test-secret-0123456789"

// setupVerify returns an HS256 Authenticator on a clock the test moves, and a signer of tokens valid from nbf to exp.
func setupVerify(t *testing.T) (*Authenticator, *testClock, func(sub string, nbf, exp time.Time) string) {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	a, err := NewAuthenticator(context.Background(), verifiedSecret, "", clock.Now)
	require.NoError(t, err)
	sign := func(sub string, nbf, exp time.Time) string {
		token, err := MintToken(verifiedSecret, Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: sub,
			NotBefore: jwt.NewNumericDate(nbf), ExpiresAt: jwt.NewNumericDate(exp)}, Org: "ORG@AdobeOrg", Scope: "a b"})
		require.NoError(t, err)
		return token
	}
	return a, clock, sign
}

// A token verified once is answered from the cache, but never past its expiry or before its not-before, never
// longer than verifiedTTL, and never when its verification failed.
func TestVerifiedTokens(t *testing.T) {
	t.Parallel()
	t.Run("ReusedWithinTheMinute", func(t *testing.T) {
		t.Parallel()
		a, clock, sign := setupVerify(t)
		token := sign("u", clock.Now().Add(-time.Minute), clock.Now().Add(time.Hour))
		first, err := a.Verify(token)
		require.NoError(t, err)
		require.Equal(t, 1, a.verified.len())
		first.Scope = "changed by the caller"
		clock.Add(verifiedTTL - time.Second)
		again, err := a.Verify(token)
		require.NoError(t, err)
		require.Equal(t, "a b", again.Scope, "a caller's change to its claims must not reach the cache")
		_, cached := a.verified.get(token, clock.Now())
		require.True(t, cached)
		clock.Add(time.Second)
		_, cached = a.verified.get(token, clock.Now())
		require.False(t, cached, "a verification is reused for less than verifiedTTL")
	})
	t.Run("ExpiredWhileCached", func(t *testing.T) {
		t.Parallel()
		a, clock, sign := setupVerify(t)
		token := sign("u", clock.Now().Add(-time.Minute), clock.Now().Add(10*time.Second))
		_, err := a.Verify(token)
		require.NoError(t, err)
		clock.Add(10 * time.Second)
		_, err = a.Verify(token)
		require.ErrorIs(t, err, jwt.ErrTokenExpired)
	})
	t.Run("NotYetValidIsNotCached", func(t *testing.T) {
		t.Parallel()
		a, clock, sign := setupVerify(t)
		token := sign("u", clock.Now().Add(30*time.Second), clock.Now().Add(time.Hour))
		_, err := a.Verify(token)
		require.ErrorIs(t, err, jwt.ErrTokenNotValidYet)
		require.Zero(t, a.verified.len(), "a refused token is not remembered")
		clock.Add(30 * time.Second)
		_, err = a.Verify(token)
		require.NoError(t, err)
	})
	t.Run("BadSignatureNeverCached", func(t *testing.T) {
		t.Parallel()
		a, clock, sign := setupVerify(t)
		token := sign("u", clock.Now().Add(-time.Minute), clock.Now().Add(time.Hour))
		forged := token[:len(token)-2] + "xx"
		for range 2 {
			_, err := a.Verify(forged)
			require.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid)
		}
		require.Zero(t, a.verified.len())
	})
	t.Run("Bounded", func(t *testing.T) {
		t.Parallel()
		a, clock, sign := setupVerify(t)
		for i := range maxVerified + 10 {
			_, err := a.Verify(sign(fmt.Sprint("u", i), clock.Now().Add(-time.Minute), clock.Now().Add(time.Hour)))
			require.NoError(t, err)
			require.LessOrEqual(t, a.verified.len(), maxVerified)
		}
		require.Equal(t, 10, a.verified.len(), "a full cache is emptied, then fills again")
	})
}
