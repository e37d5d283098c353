package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/retention/internal/config"
)

func TestBulkheadDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(getenv(validEnv()), false)
	require.NoError(t, err)
	require.Equal(t, 16, cfg.RequestConns)
	require.Equal(t, 10, cfg.JobConns)
	require.Equal(t, 2, cfg.HealthConns)
	require.LessOrEqual(t, 3*(cfg.RequestConns+cfg.JobConns+cfg.HealthConns), 100-3-10,
		"three replicas fit PostgreSQL's default max_connections, less its 3 reserved, with room for tools")
	require.Equal(t, 30*time.Second, cfg.HTTPReadTimeout)
	require.Equal(t, 30*time.Second, cfg.HTTPWriteTimeout)
	require.Equal(t, 4, cfg.LongRequestsPerOrg)
}

func TestBulkheadVariables(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(getenv(with(validEnv(), map[string]string{
		"DATABASE_POOL_REQUESTS": "40", "DATABASE_POOL_JOBS": "6", "DATABASE_POOL_HEALTH": "1",
		"HTTP_READ_TIMEOUT": "1m", "HTTP_WRITE_TIMEOUT": "45s", "LONG_REQUESTS_PER_ORG": "12",
	})), false)
	require.NoError(t, err)
	require.Equal(t, []int{40, 6, 1, 12}, []int{cfg.RequestConns, cfg.JobConns, cfg.HealthConns, cfg.LongRequestsPerOrg})
	require.Equal(t, time.Minute, cfg.HTTPReadTimeout)
	require.Equal(t, 45*time.Second, cfg.HTTPWriteTimeout)

	_, err = config.Load(getenv(with(validEnv(), map[string]string{
		"DATABASE_POOL_REQUESTS": "1", "DATABASE_POOL_JOBS": "3", "DATABASE_POOL_HEALTH": "x",
		"HTTP_READ_TIMEOUT": "-1s", "HTTP_WRITE_TIMEOUT": "soon", "LONG_REQUESTS_PER_ORG": "0",
	})), false)
	require.Error(t, err)
	lines := errorLines(err)
	for _, name := range []string{"DATABASE_POOL_REQUESTS", "DATABASE_POOL_JOBS", "DATABASE_POOL_HEALTH", "HTTP_READ_TIMEOUT", "HTTP_WRITE_TIMEOUT", "LONG_REQUESTS_PER_ORG"} {
		require.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, name) }), "%s is named: %v", name, lines)
	}
}
