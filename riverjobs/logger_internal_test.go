package riverjobs

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// River's routine lines (its Info ones, "Producer job counts" every minute among them) reach a service logger at
// Info only as Debug; its warnings and errors keep their level.
func TestRiverInfoIsDebug(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	logger := quietRiver(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	logger.InfoContext(context.Background(), "producer: Producer job counts", "queue", "default")
	require.Empty(t, out.String(), "no River Info line at the service's Info level")
	logger.With("client", "c").WarnContext(context.Background(), "job failed")
	require.Contains(t, out.String(), "level=WARN msg=\"job failed\" client=c")

	out.Reset()
	debug := quietRiver(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	debug.WithGroup("river").Info("producer: Producer job counts", "n", 1)
	require.Contains(t, out.String(), "level=DEBUG msg=\"producer: Producer job counts\" river.n=1")
}
