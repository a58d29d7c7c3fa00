package proxy

import (
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := schedule{minInterval: time.Second}
	if _, ok := s.next(t0); ok {
		t.Fatal("due without a request")
	}
	// The first sync may run at once.
	s.request(t0)
	if wait, ok := s.next(t0); !ok || wait != 0 {
		t.Fatalf("first request: wait %v ok %v", wait, ok)
	}
	s.start(t0)
	// A burst right after waits for the interval, and coalesces.
	s.request(t0.Add(100 * time.Millisecond))
	s.request(t0.Add(200 * time.Millisecond))
	if wait, _ := s.next(t0.Add(200 * time.Millisecond)); wait != 800*time.Millisecond {
		t.Fatalf("burst waits %v, want 800ms", wait)
	}
	// A later request (periodic resync) does not postpone an earlier one.
	s.request(t0.Add(time.Hour))
	if wait, _ := s.next(t0.Add(200 * time.Millisecond)); wait != 800*time.Millisecond {
		t.Fatalf("after a later request waits %v, want 800ms", wait)
	}
	s.start(t0.Add(time.Second))
	if _, ok := s.next(t0.Add(time.Second)); ok {
		t.Fatal("still due after the sync started")
	}
	// Overdue: no negative wait.
	s.request(t0.Add(2 * time.Second))
	if wait, _ := s.next(t0.Add(5 * time.Second)); wait != 0 {
		t.Fatalf("overdue wait %v", wait)
	}
}

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		n    int
		min  time.Duration
		want time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{6, 100 * time.Millisecond, 32 * time.Second},
		{7, 0, time.Minute},
		{30, 0, time.Minute},
		{1, 10 * time.Second, 10 * time.Second},
		{3, 2 * time.Minute, 2 * time.Minute},
	} {
		if got := retryDelay(tc.n, tc.min); got != tc.want {
			t.Errorf("retryDelay(%d, %v) = %v, want %v", tc.n, tc.min, got, tc.want)
		}
	}
}
