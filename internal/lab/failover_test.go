package lab

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestFailoverRequestAccounting: only requests that started once the fault was in
// effect can end the outage, and the failures counted are those after the last
// success before it.
func TestFailoverRequestAccounting(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fail := errors.New("connection refused")
	p := &HTTPProbe{results: []probeResult{
		{start: at(0), end: at(5), ok: true},
		{start: at(20), end: at(26), ok: true}, // the last success before the fault (at 30)
		{start: at(28), end: at(35), ok: true}, // started before the fault, ended after: not a recovery
		{start: at(40), end: at(340), err: fail},
		{start: at(360), end: at(660), err: fail},
		{start: at(680), end: at(690), ok: true}, // the first success started after the fault
		{start: at(700), end: at(705), err: fail},
	}}
	fault := at(30)

	end, start := p.lastSuccessBefore(fault)
	if !end.Equal(at(35)) || !start.Equal(at(28)) {
		t.Errorf("lastSuccessBefore = %v, %v; want the request started at +28ms, ended +35ms", end.Sub(t0), start.Sub(t0))
	}
	ok, err := p.firstSuccessAfter(context.Background(), fault, time.Second)
	if err != nil || !ok.Equal(at(690)) {
		t.Errorf("firstSuccessAfter = %v, %v; want +690ms", ok.Sub(t0), err)
	}
	if _, failed := p.Between(start, ok); len(failed) != 2 {
		t.Errorf("Between gives %d failures, want 2", len(failed))
	}

	// A fault that stops nothing: nothing fails, and the print says why requests
	// succeeded before the new owner answered ARP.
	var b strings.Builder
	FailoverResult{VIP: netip.MustParseAddr("172.18.255.200"), Fault: FaultKill, OldOwner: "worker3", NewOwner: "worker2",
		FaultTook: 3 * time.Millisecond, AnswerGap: 720 * time.Millisecond, HTTP: true, HTTPLastOK: -4 * time.Millisecond,
		HTTPRecovered: true, HTTPGap: 22 * time.Millisecond}.Print(&b)
	for _, want := range []string{"in effect 3ms after it was started", "answered 720ms after the fault",
		"ended 4ms after it", "succeeded 22ms after it; 0 failed", "the old owner's node still forwarded"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Print wrote %q, want it to say %q", b.String(), want)
		}
	}
}
