package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The smoke run gives pgbench a floor of work, not of time: with -T 1 and 16 clients, a busy machine could end the
// second before any client completed a transaction, and pgbench then prints no rate. The full run keeps its time.
func TestPgbenchArgs(t *testing.T) {
	t.Parallel()
	t.Run("SmokeRunsTransactions", func(t *testing.T) {
		t.Parallel()
		args, length := pgbenchArgs(SmokeConfig(), "postgres://x/pgbench")
		require.Equal(t, []string{"-S", "-n", "-c", "16", "-j", "2", "-t", "50", "postgres://x/pgbench"}, args)
		require.Equal(t, "-t 50", length)
		require.NotContains(t, args, "-T")
	})
	t.Run("FullRunsForTheAPIDuration", func(t *testing.T) {
		t.Parallel()
		cfg := DefaultConfig()
		args, length := pgbenchArgs(cfg, "u")
		require.Equal(t, "-T 10", length)
		require.False(t, slices.Contains(args, "-t"))
		cfg.APIDuration = 1500 * time.Millisecond
		_, length = pgbenchArgs(cfg, "u")
		require.Equal(t, "-T 2", length, "whole seconds, rounded up")
	})
	t.Run("FlagSetsTheFloor", func(t *testing.T) {
		t.Parallel()
		cfg, err := ParseFlags([]string{"-pgbench-transactions", "7"}, nil)
		require.NoError(t, err)
		_, length := pgbenchArgs(cfg, "u")
		require.Equal(t, "-t 7", length)
		_, err = ParseFlags([]string{"-pgbench-transactions", "-1"}, nil)
		require.ErrorContains(t, err, "-pgbench-transactions")
	})
}
