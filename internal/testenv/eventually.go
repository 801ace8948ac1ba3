package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, failing the test when
// timeout passes first. It is for waiting on real I/O (Redis, sockets,
// other processes) that no injected clock reaches; what names the wait in
// the failure.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
