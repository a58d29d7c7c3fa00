package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and returns.
type recorder struct {
	testing.TB
	ctx    context.Context
	failed string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Context() context.Context     { return r.ctx }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }

func TestEventuallyWaitsForTheCheck(t *testing.T) {
	calls := 0
	Eventually(t, time.Minute, time.Millisecond, "third call", func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("check called %d times, want 3", calls)
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	r := &recorder{TB: t, ctx: t.Context()}
	calls := 0
	Eventually(r, 20*time.Millisecond, time.Millisecond, "never", func() error {
		calls++
		return fmt.Errorf("call %d", calls)
	})
	if want := fmt.Sprintf("never: still not so after 20ms: call %d", calls); r.failed != want {
		t.Errorf("failed with %q, want %q", r.failed, want)
	}
}

func TestEventuallyStopsWhenTheTestEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := &recorder{TB: t, ctx: ctx}
	start := time.Now()
	Eventually(r, time.Minute, time.Millisecond, "ended", func() error { return errors.New("no") })
	if r.failed == "" || time.Since(start) > 30*time.Second {
		t.Errorf("after the test's context ended: failed %q after %v", r.failed, time.Since(start))
	}
}

func TestPollReturnsTheLastError(t *testing.T) {
	if err := Poll(time.Millisecond, time.Millisecond, func() error { return errors.New("still") }); err == nil || err.Error() != "still" {
		t.Errorf("Poll = %v, want still", err)
	}
	if err := Poll(time.Millisecond, time.Millisecond, func() error { return nil }); err != nil {
		t.Errorf("Poll = %v, want nil", err)
	}
}

func TestHoldsDescribesOnlyWhenFalse(t *testing.T) {
	described := 0
	seen := func() string { described++; return "seen 1" }
	if err := Holds(func() bool { return true }, seen)(); err != nil || described != 0 {
		t.Errorf("true condition: %v, described %d times", err, described)
	}
	if err := Holds(func() bool { return false }, seen)(); err == nil || !strings.Contains(err.Error(), "seen 1") {
		t.Errorf("false condition: %v, want seen 1", err)
	}
}
