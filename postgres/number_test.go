package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/testdb"
)

// TestCanonicalNumberMatchesPostgres holds catalog.CanonicalNumber, which the service answers a write with, equal
// to what jsonb keeps and every later read returns, on fixed and random literals.
func TestCanonicalNumberMatchesPostgres(t *testing.T) {
	t.Parallel()
	db := testdb.NewDB(t)
	ctx := context.Background()
	lits := []string{
		"0", "-0", "-0.0", "0e10", "0.000", "0e-3", "1e2", "1E+2", "1.0", "1.50e1", "-12.5e-1", "0.001e5", "1e-3",
		"123.456e-10", "9007199254740993", "0.1000000000000000000001", "1e400", "1e999", "1e-1000", "-1e-1000",
		"0e999999999", "100e-2", "5e0", "5e-0", "0.10e1",
	}
	rng := rand.New(rand.NewPCG(3, 5))
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	}
	for range 500 {
		lit := ""
		if rng.IntN(3) == 0 {
			lit = "-"
		}
		intPart := digits(1 + rng.IntN(20))
		intPart = strings.TrimLeft(intPart, "0")
		if intPart == "" || rng.IntN(4) == 0 {
			intPart = "0"
		}
		lit += intPart
		if rng.IntN(2) == 0 {
			lit += "." + digits(1+rng.IntN(20))
		}
		if rng.IntN(2) == 0 {
			lit += fmt.Sprintf("e%d", rng.IntN(80)-40)
		}
		lits = append(lits, lit)
	}
	for _, lit := range lits {
		want, err := catalog.CanonicalNumber(lit)
		require.NoError(t, err, lit)
		var got string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT ($1::text)::jsonb::text`, "["+lit+"]").Scan(&got))
		require.Equal(t, "["+want+"]", got, lit)
	}
}
