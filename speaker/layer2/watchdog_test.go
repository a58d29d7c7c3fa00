package layer2

import (
	"context"
	"testing"
	"time"
)

// TestWatchdog drives the heartbeat with a fake clock: beats on time keep the process
// awake; a heartbeat that is late is not awake even before the heartbeat runs again;
// the beat after the gap reports a stall, and the process stays silent until resume.
func TestWatchdog(t *testing.T) {
	clk := newFakeClock()
	stalls := make(chan time.Duration, 4)
	w := newWatchdog(clk, DefaultStallAfter, func(d time.Duration) { stalls <- d })
	if !w.awake() {
		t.Fatal("a watchdog that has not started says the process is not awake")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	for range 5 {
		if d := clk.waitTimer(t); d != heartbeatEvery {
			t.Fatalf("heartbeat timer %v, want %v", d, heartbeatEvery)
		}
		clk.Advance(heartbeatEvery)
	}
	clk.waitTimer(t)
	if !w.awake() {
		t.Fatal("beating on time, the process is not awake")
	}

	// The process stands still: the clock moves, the heartbeat does not run.
	clk.mu.Lock()
	clk.now = clk.now.Add(3 * time.Second)
	clk.mu.Unlock()
	if w.awake() {
		t.Fatal("3 s after the last beat, before the heartbeat ran again, the process counts as awake")
	}
	clk.Advance(0) // the heartbeat's timer is long due: it runs now
	select {
	case d := <-stalls:
		if d < 3*time.Second {
			t.Errorf("stall of %v reported, want at least 3 s", d)
		}
	case <-time.After(hangGuard):
		t.Fatal("no stall reported")
	}
	clk.waitTimer(t)
	if w.awake() {
		t.Fatal("after a stall, before resume, the process counts as awake")
	}
	if !w.resume() {
		t.Error("resume after a stall says there was none")
	}
	if !w.awake() {
		t.Error("after resume, the process is not awake")
	}
	if w.resume() {
		t.Error("a second resume says there was a stall")
	}
}

func TestWatchdogDisabled(t *testing.T) {
	w := newWatchdog(newFakeClock(), 0, nil)
	w.run(t.Context()) // returns at once
	if !w.awake() {
		t.Error("a disabled watchdog says the process is not awake")
	}
}

// TestResponderSilentWhileNotAwake: while the watchdog says the process is not awake,
// a request for an owned IP is dropped as suppressed (stale requests queued during a
// stall are not answered), and a claim on an owned IP is still seen.
func TestResponderSilentWhileNotAwake(t *testing.T) {
	r, c, m := newTestARP(t)
	awake := false
	r.owners.awake = func() bool { return awake }
	r.serveFrame(arpRequest(vip4))
	c.none(t)
	if got := value(m.Dropped.WithLabelValues(DropSuppressed)); got != 1 {
		t.Errorf("suppressed drops = %v, want 1", got)
	}
	if st := r.owners.status(vip4, "eth0"); !st.here() {
		t.Errorf("status of an owned IP while not awake = %v, want it still owned here (claims are seen)", st)
	}
	awake = true
	r.serveFrame(arpRequest(vip4))
	c.next(t)
}

// TestResponderFrozenBeforeSend: a process frozen after it found a request's IP
// answerable but before it sent the answer (the watchdog says awake at the check, not
// any more at the send) drops the answer: sent at the thaw, it would answer a stale
// request beside the node that took the IP over meanwhile.
func TestResponderFrozenBeforeSend(t *testing.T) {
	r, c, m := newTestARP(t)
	checks := 0
	r.owners.awake = func() bool { checks++; return checks == 1 } // the freeze falls after the first check
	r.serveFrame(arpRequest(vip4))
	c.none(t)
	if checks < 2 {
		t.Fatalf("the watchdog was asked %d times for one request; want again before the send", checks)
	}
	if got := value(m.Dropped.WithLabelValues(DropSuppressed)); got != 1 {
		t.Errorf("suppressed drops = %v, want 1", got)
	}
}
