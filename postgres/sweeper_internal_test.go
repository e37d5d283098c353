package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// TestSweepWorkerPanicIsAnError: a panic in one of the sweep's worker goroutines becomes the error of the job that
// started it, which the job queue records and retries, instead of ending the process.
func TestSweepWorkerPanicIsAnError(t *testing.T) {
	t.Parallel()
	var g errgroup.Group
	goRecover(&g, func() error { panic("bug in a batch") })
	goRecover(&g, func() error { return nil })
	err := g.Wait()
	require.ErrorContains(t, err, "panic in a sweep worker: bug in a batch")
	var g2 errgroup.Group
	want := errors.New("plain failure")
	goRecover(&g2, func() error { return want })
	require.ErrorIs(t, g2.Wait(), want, "an error passes through as it is")
}

// TestNewSweeperAppliesDefaultsOnce: zero fields get their defaults when the sweeper is built, and a negative one
// is refused then, not met in the middle of a run.
func TestNewSweeperAppliesDefaultsOnce(t *testing.T) {
	t.Parallel()
	w, err := NewSweeper(nil, SweepConfig{BatchSize: 5}, nil)
	require.NoError(t, err)
	require.Equal(t, 5, w.cfg.BatchSize)
	require.Equal(t, 2, w.cfg.Workers)
	require.Equal(t, 32, w.cfg.DropBatch)
	require.Equal(t, 10*time.Minute, w.cfg.ListTimeout)
	require.Equal(t, 25, w.cfg.BusyShare)
	_, err = NewSweeper(nil, SweepConfig{Workers: -1}, nil)
	require.ErrorContains(t, err, "negative")
	_, err = NewSweeper(nil, SweepConfig{BusyShare: 101}, nil)
	require.ErrorContains(t, err, "BusyShare is a percentage, at most 100")
}
