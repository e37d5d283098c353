package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
)

// TestIdentityHasherHashesAsIdentityHash: a hasher reused over many identities gives each the hash a fresh HMAC
// gives it, and the hash is HMAC-SHA256 in hex (the vector from `echo -n email:alice@example.com | openssl dgst
// -sha256 -hmac key`).
func TestIdentityHasherHashesAsIdentityHash(t *testing.T) {
	t.Parallel()
	key := []byte("key")
	h := catalog.NewIdentityHasher(key)
	for _, k := range []string{"email:alice@example.com", "ecid:123", "email:alice@example.com", "", "phone:+33612345678"} {
		require.Equal(t, catalog.IdentityHash(key, k), h.Hash(k), k)
	}
	require.Equal(t, "333e8ce0e857dd32792bb5e5bff065c04baec1a4f190f5b0061257ec4bb2f7c2", h.Hash("email:alice@example.com"))
}
