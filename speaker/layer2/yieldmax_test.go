package layer2

import (
	"bytes"
	"testing"
	"time"
)

// TestConflictYieldMax: a device answering every probe (a forger) keeps the IP quiet
// from the second claim until ConflictYieldMax only; then the node answers it again,
// contested: one burst, the conflict still reported and gauged, no new OnConflict.
// Further claims never make it quiet again and are defended at most once per
// DefendInterval; a probe round going unanswered clears the conflict.
func TestConflictYieldMax(t *testing.T) {
	h, c := yielded(t, Schedule{Repeats: []time.Duration{time.Hour}})
	start := h.clk.Now()

	// Quiet, with rechecks after 1, 2 and 4 s, each answered by the device.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		h.clk.waitTimerAt(t, wait)
		h.clk.Advance(wait)
		arpProbe(t, c, vip4, mac0)
		c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
		answered(t, c, vip4, false)
	}
	// The next recheck would be 8 s away; the takeback comes first.
	h.clk.waitTimerAt(t, DefaultConflictYieldMax-7*time.Second)
	answered(t, c, vip4, false)
	h.clk.Advance(DefaultConflictYieldMax - 7*time.Second)
	garp(t, c, vip4, mac0) // one burst
	if an := h.nextAnnouncement(); !an.At.Equal(start.Add(DefaultConflictYieldMax)) {
		t.Fatalf("announcement %+v, want one at the takeback", an)
	}
	answered(t, c, vip4, true)
	conf, ok := h.a.Conflict(vip4)
	if !ok || !bytes.Equal(conf.MAC, otherMAC) || !conf.Contested.Equal(start.Add(DefaultConflictYieldMax)) || !conf.Cleared.IsZero() {
		t.Fatalf("Conflict(%s) = %+v %v, want it contested at the takeback", vip4, conf, ok)
	}
	h.wantGauges(vip4.String() + " " + otherMAC.String())
	if got := value(h.a.metrics.ConflictTakebacks); got != 1 {
		t.Fatalf("takebacks = %v, want 1", got)
	}
	h.noConflict()

	// The forger goes on: claims within DefendInterval of the takeback burst are
	// ignored, and the answered probe keeps the conflict but not the IP quiet.
	h.clk.waitTimerAt(t, 5*time.Second)
	for range 10 {
		c.deliver(t, foreignGARP(vip4, otherMAC))
	}
	h.clk.Advance(5 * time.Second)
	arpProbe(t, c, vip4, mac0) // no defence burst before it
	c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
	answered(t, c, vip4, true)
	h.clk.waitTimerAt(t, 8*time.Second)

	// DefendInterval after the takeback, one claim is defended, the next ones not.
	h.clk.Advance(5 * time.Second)
	for range 10 {
		c.deliver(t, foreignGARP(vip4, otherMAC))
	}
	garp(t, c, vip4, mac0)
	answered(t, c, vip4, true) // the reply, no second burst before it
	h.noConflict()
	h.wantGauges(vip4.String() + " " + otherMAC.String())
	if got := value(h.a.metrics.ConflictTakebacks); got != 1 {
		t.Fatalf("takebacks = %v, want still 1", got)
	}

	// The device is gone: the next round goes unanswered and the conflict clears.
	h.clk.waitTimerAt(t, 3*time.Second)
	h.clk.Advance(3 * time.Second)
	arpProbe(t, c, vip4, mac0)
	h.clk.Advance(DefaultProbeWait / 2)
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, DefaultProbeWait/2)
	h.clk.Advance(DefaultProbeWait / 2)
	if cl := h.nextCleared(); !bytes.Equal(cl.MAC, otherMAC) || cl.Contested.IsZero() || !cl.Cleared.Equal(h.clk.Now()) {
		t.Fatalf("cleared %+v", cl)
	}
	garp(t, c, vip4, mac0) // the schedule from its start
	h.wantGauges()
	if _, ok := h.a.Conflict(vip4); ok {
		t.Fatal("Conflict reported after it cleared")
	}
	answered(t, c, vip4, true)
	h.clk.waitTimerAt(t, time.Hour)

	// Back to the RFC 5227 rules: a claim is defended, a second one yields.
	c.deliver(t, foreignGARP(vip4, otherMAC))
	garp(t, c, vip4, mac0)
	arpProbe(t, c, vip4, mac0)
	c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
	if conf := h.nextConflict(); !conf.Contested.IsZero() {
		t.Fatalf("conflict %+v, want a fresh yield", conf)
	}
	answered(t, c, vip4, false)
}

// TestOnClaim: what a foreign claim does in each state, by the time since the last
// defence.
func TestOnClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const interval = 10 * time.Second
	for _, tc := range []struct {
		state    conflictState
		defended time.Time
		at       time.Duration // after t0
		want     claimAction
	}{
		{answering, time.Time{}, 0, defendClaim},
		{answering, t0, time.Second, yieldClaim},
		{answering, t0, interval - 1, yieldClaim},
		{answering, t0, interval, defendClaim},
		{quietYielded, time.Time{}, 0, ignoreClaim},
		{quietYielded, t0, time.Hour, ignoreClaim},
		{contested, time.Time{}, 0, defendClaim},
		{contested, t0, time.Second, ignoreClaim},
		{contested, t0, interval - 1, ignoreClaim},
		{contested, t0, interval, defendClaim},
	} {
		if got := onClaim(tc.state, tc.defended, t0.Add(tc.at), interval); got != tc.want {
			t.Errorf("state %v defended %v claim at +%v: %v, want %v", tc.state, tc.defended, tc.at, got, tc.want)
		}
	}
}
