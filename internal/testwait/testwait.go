// Package testwait is the tests' one way to wait for work done on another clock: a process, a job queue or a
// goroutine the test does not drive. Tests never sleep a fixed time instead: For returns as soon as the condition
// holds, and its deadline only turns a hang into a failure, so a slow machine makes a test slower, never red.
package testwait

import (
	"testing"
	"time"
)

// Poll intervals: the first check is immediate, then they grow from first to most, so that short waits end
// promptly and long ones do not load the machine they wait on.
const (
	first = 5 * time.Millisecond
	most  = 200 * time.Millisecond
)

// For calls cond until it reports done, and fails the test (with cond's last word on why it was not done) when
// within has passed without it. cond runs on the test's goroutine, so it may use require.
func For(tb testing.TB, within time.Duration, cond func() (done bool, why string)) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for wait := first; ; wait = min(2*wait, most) {
		done, why := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not done within %s: %s", within, why)
		}
		time.Sleep(wait)
	}
}
