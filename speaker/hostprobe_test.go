package speaker

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

func TestHostProberTellsLiveHostsFromSilentOnes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	open := ln.Addr().(*net.TCPAddr).Port
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := closed.Addr().(*net.TCPAddr).Port
	closed.Close() // nothing listens there any more: the kernel refuses

	loop := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	var changes atomic.Int32
	for _, tt := range []struct {
		name string
		port int
	}{{"accepting", open}, {"refusing", refusing}} {
		p := newHostProber(0, func() { changes.Add(1) })
		p.ports = []int{tt.port}
		p.targets = map[string]netip.Addr{"n": loop}
		before := time.Now()
		p.round(ctx, p.targets)
		alive, silent := p.answers()
		if at, ok := alive["n"]; !ok || at.Before(before) {
			t.Errorf("%s host: alive %v, silent %v; want alive since the probe", tt.name, alive, silent)
		}
	}
	if changes.Load() != 2 {
		t.Errorf("%d change notices, want one per prober", changes.Load())
	}

	// A host that answers nothing: the dial waits until the timeout.
	p := newHostProber(0, func() { changes.Add(1) })
	p.timeout = 50 * time.Millisecond
	p.dial = func(ctx context.Context, string string) error { <-ctx.Done(); return ctx.Err() }
	p.targets = map[string]netip.Addr{"n": loop}
	sent := time.Now()
	p.round(ctx, p.targets)
	alive, silent := p.answers()
	if _, ok := alive["n"]; ok || silent["n"].Before(sent) {
		t.Errorf("silent host: alive %v, silent %v; want silent since %v", alive, silent, sent)
	}

	// A node no longer probed is forgotten.
	p.set(map[string]netip.Addr{})
	if alive, silent := p.answers(); len(alive)+len(silent) != 0 {
		t.Errorf("after the target went: alive %v, silent %v; want nothing", alive, silent)
	}
}
