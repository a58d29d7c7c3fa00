package testkit

import (
	"errors"
	"testing"
	"time"
)

// Eventually calls check every interval until it returns nil. It fails tb with what
// and check's last error once limit has passed, or at once when tb's context has ended.
// limit bounds a wait for something to converge; it is never an assertion on speed.
func Eventually(tb testing.TB, limit, interval time.Duration, what string, check func() error) {
	tb.Helper()
	if err := poll(limit, interval, func() bool { return tb.Context().Err() != nil }, check); err != nil {
		tb.Fatalf("%s: still not so after %v: %v", what, limit, err)
	}
}

// Poll calls check every interval until it returns nil, or returns check's last error
// once limit has passed. It is Eventually for where a test may not fail at once, such
// as its Cleanup functions, which run after its context has ended.
func Poll(limit, interval time.Duration, check func() error) error {
	return poll(limit, interval, func() bool { return false }, check)
}

// Holds is a check for Eventually made of a condition: while cond is false its error
// is seen, called only then, so it can describe the state that is not yet right.
func Holds(cond func() bool, seen func() string) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New(seen())
	}
}

func poll(limit, interval time.Duration, stop func() bool, check func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || stop() {
			return err
		}
		time.Sleep(interval)
	}
}
