package speaker

import (
	"net/netip"
	"testing"
	"time"
)

// TestEventLimit: one Event per IP and reason per interval; the ones held back are
// counted into the next; other IPs and reasons have their own budget.
func TestEventLimit(t *testing.T) {
	l := newEventLimit(time.Minute)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(ip netip.Addr, reason string, at time.Duration, wantOK bool, wantHeld int) {
		t.Helper()
		ok, held := l.allow(ip, reason, t0.Add(at))
		if ok != wantOK || held != wantHeld {
			t.Fatalf("%s %s at +%v: allow %v with %d held back, want %v with %d", ip, reason, at, ok, held, wantOK, wantHeld)
		}
	}
	step(a, "IPConflict", 0, true, 0)
	for i := range 100 { // a forger flipping the IP twice a second
		step(a, "IPConflict", time.Duration(i)*500*time.Millisecond, false, 0)
	}
	step(a, "IPConflictResolved", time.Second, true, 0)
	step(a, "IPConflictResolved", 2*time.Second, false, 0)
	step(b, "IPConflict", time.Second, true, 0)
	step(a, "IPConflict", time.Minute, true, 100)
	step(a, "IPConflict", 3*time.Minute, true, 0)
	step(a, "IPConflictResolved", 3*time.Minute, true, 1)
}
