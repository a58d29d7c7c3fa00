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

// With a burst of 2 (kube-proxy's), a second sync may follow the first at once; then
// syncs are one interval apart, and a quiet spell earns the burst back.
func TestScheduleBurst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := time.Millisecond
	s := schedule{minInterval: time.Second, burst: 2}
	steps := []struct {
		request, now time.Duration // a request at, asked at now
		wantWait     time.Duration
	}{
		{0, 0, 0},                                     // first sync
		{100 * ms, 100 * ms, 0},                       // the burst's second
		{200 * ms, 200 * ms, 800 * ms},                // then one per interval (2 s of credit used)
		{1200 * ms, 1200 * ms, 800 * ms},              // the sync at 1 s pushed the next to 2 s
		{10 * time.Second, 10 * time.Second, 0},       // after a quiet spell
		{10*time.Second + ms, 10*time.Second + ms, 0}, // the burst is back
		{10*time.Second + 2*ms, 10*time.Second + 2*ms, time.Second - 2*ms},
	}
	for i, st := range steps {
		s.request(at(st.request))
		wait, ok := s.next(at(st.now))
		if !ok || wait != st.wantWait {
			t.Fatalf("step %d: request at %v waits %v (ok %v), want %v", i, st.request, wait, ok, st.wantWait)
		}
		s.start(at(st.now + wait))
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
