package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	For(t, time.Minute, func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprintf("%d calls", calls)
	})
	require.Equal(t, 3, calls)
}

// fatalRecorder stands in for a test that For fails: it records the message and ends the goroutine as t.Fatalf does.
type fatalRecorder struct {
	testing.TB
	msg atomic.Value
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg.Store(fmt.Sprintf(format, args...))
	panic(r)
}

func TestForFailsWithTheLastWhyPastItsDeadline(t *testing.T) {
	t.Parallel()
	r := &fatalRecorder{TB: t}
	func() {
		defer func() { require.Equal(t, r, recover()) }()
		For(r, 0, func() (bool, string) { return false, "still pending" })
	}()
	require.Equal(t, "not done within 0s: still pending", r.msg.Load())
}
