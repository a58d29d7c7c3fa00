package testenv

import (
	"testing"
	"time"
)

// Eventually calls check every interval until it returns nil. It fails tb with what
// and check's last error once limit has passed, or at once when tb's context has ended.
// limit bounds a wait for something to converge; it is never an assertion on speed.
func Eventually(tb testing.TB, limit, interval time.Duration, what string, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || tb.Context().Err() != nil {
			tb.Fatalf("%s: still not so after %v: %v", what, limit, err)
		}
		time.Sleep(interval)
	}
}
