package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// composeService returns the lines of a service of docker-compose.yml, comments and blank lines left out.
func composeService(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	require.NoError(t, err)
	var lines []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		switch {
		case indent == 2 && trimmed == name+":":
			in = true
		case indent <= 2:
			in = false
		case in:
			lines = append(lines, trimmed)
		}
	}
	require.NotEmpty(t, lines, "no service %q in docker-compose.yml", name)
	return lines
}

// In docker compose, runs and audit go through the API of the retentiond service: the CLI's default RETENTION_URL,
// 127.0.0.1, is its own container. Both services are stamped from the same build arguments.
func TestComposeCLIReachesTheAPI(t *testing.T) {
	t.Parallel()
	cli, server := composeService(t, "retentionctl"), composeService(t, "retentiond")
	require.Contains(t, cli, "RETENTION_URL: http://retentiond:8080")
	require.Contains(t, server, `- "8080:8080"`, "retentiond listens on 8080 (the image's HTTP_ADDR)")
	require.Contains(t, cli, "<<: *retention-env", "the same DATABASE_URL and secret as the server")
	for _, service := range [][]string{cli, server} {
		require.Contains(t, service, "REVISION: ${REVISION:-unknown}")
	}
}
