package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/testdb"
	"github.com/acme/retention/retention"
)

// TestPeriodArithmeticMatchesPostgres holds the Go calendar arithmetic, which places rows at ingestion, equal to
// Postgres' timestamptz + interval, which judges them in every query.
func TestPeriodArithmeticMatchesPostgres(t *testing.T) {
	t.Parallel()
	db := testdb.NewDB(t)
	rng := rand.New(rand.NewPCG(7, 11))
	ctx := context.Background()
	for i := range 500 {
		ts := time.Date(2000+rng.IntN(40), time.Month(1+rng.IntN(12)), 1+rng.IntN(31), rng.IntN(24), rng.IntN(60), 0, 0, time.UTC)
		p := retention.Period{Years: int64(rng.IntN(3)), Months: int64(rng.IntN(25)), Days: int64(rng.IntN(40))}
		if i%5 == 0 {
			p = retention.Period{Weeks: int64(1 + rng.IntN(60))}
		}
		if p.IsZero() {
			p.Days = 1
		}
		var got time.Time
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT $1::timestamptz + $2::interval`, ts, p.Interval()).Scan(&got))
		require.True(t, got.Equal(p.AddTo(ts)), fmt.Sprintf("%s + %s: Postgres %s, Go %s", ts, p, got, p.AddTo(ts)))
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT $1::timestamptz - $2::interval`, ts, p.Interval()).Scan(&got))
		require.True(t, got.Equal(p.SubtractFrom(ts)), fmt.Sprintf("%s - %s", ts, p))
	}
}
