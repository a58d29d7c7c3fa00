package withhold

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

func TestHostProberTellsLiveHostsFromSilentOnes(t *testing.T) {
	// listen returns the port of a listener on loopback whose accepted connections
	// serve does what it likes with; nil serve never accepts (a frozen process: the
	// kernel completes the handshakes, nobody reads).
	listen := func(serve func(net.Conn)) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if serve != nil {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { defer c.Close(); serve(c) }()
				}
			}()
		}
		return ln.Addr().(*net.TCPAddr).Port
	}
	serving := listen(func(c net.Conn) {
		_, _ = c.Read(make([]byte, 64))
		_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nok"))
	})
	closing := listen(func(net.Conn) {}) // a listener that hangs up on what it does not speak
	frozen := listen(nil)
	refusing := listen(nil)
	// Nothing listens there any more: the kernel refuses.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	} else {
		refusing = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}

	loop := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	var changes atomic.Int32
	for _, tt := range []struct {
		name  string
		port  int
		ask   bool
		alive bool
	}{
		{"serving", serving, true, true}, {"closing", closing, true, true}, {"refusing", refusing, true, true},
		{"frozen", frozen, true, false},
		// A port not asked (memberlist's) answers only by refusing.
		{"refusing, not asked", refusing, false, true}, {"serving, not asked", serving, false, false},
	} {
		p := newHostProber(0, func() { changes.Add(1) })
		p.ports = []probePort{{tt.port, tt.ask}}
		p.timeout = 100 * time.Millisecond
		p.targets = map[string]netip.Addr{"n": loop}
		before := time.Now()
		p.round(ctx, p.targets)
		alive, silent := p.answers()
		at, isAlive := alive["n"]
		switch {
		case tt.alive && (!isAlive || at.Before(before)):
			t.Errorf("%s host: alive %v, silent %v; want alive since the probe", tt.name, alive, silent)
		case !tt.alive && (isAlive || silent["n"].Before(before)):
			t.Errorf("%s host: alive %v, silent %v; want silent since the probe (accepted, never answered)", tt.name, alive, silent)
		}
	}
	if changes.Load() != 6 {
		t.Errorf("%d change notices, want one per prober", changes.Load())
	}

	// A host that answers nothing: the dial waits until the timeout.
	p := newHostProber(0, func() { changes.Add(1) })
	p.timeout = 50 * time.Millisecond
	p.dial = func(ctx context.Context, string string, _ bool) error { <-ctx.Done(); return ctx.Err() }
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
