package layer2

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
)

func TestTable(t *testing.T) {
	ip := netip.MustParseAddr("192.0.2.10")
	type step struct {
		op     string // set, withdraw
		key    string
		ip     netip.Addr
		ifaces []string
		change Change
		// after the step:
		owned bool
		on    map[string]bool // interface → allowed
	}
	steps := []step{
		{op: "withdraw", key: "a", ip: ip, change: Unchanged, on: map[string]bool{"eth0": false}},
		{op: "set", key: "a", ip: ip, ifaces: []string{"eth1"}, change: Added, owned: true, on: map[string]bool{"eth0": false, "eth1": true}},
		{op: "set", key: "a", ip: ip, ifaces: []string{"eth1", "eth1", ""}, change: Unchanged, owned: true, on: map[string]bool{"eth1": true}},
		{op: "set", key: "b", ip: ip, ifaces: []string{"eth2"}, change: Updated, owned: true, on: map[string]bool{"eth0": false, "eth1": true, "eth2": true}},
		{op: "set", key: "c", ip: ip, change: Updated, owned: true, on: map[string]bool{"eth0": true, "eth9": true}},
		{op: "withdraw", key: "c", ip: ip, change: Updated, owned: true, on: map[string]bool{"eth0": false, "eth2": true}},
		{op: "withdraw", key: "nobody", ip: ip, change: Unchanged, owned: true},
		{op: "withdraw", key: "a", ip: ip, change: Updated, owned: true, on: map[string]bool{"eth1": false, "eth2": true}},
		{op: "set", key: "b", ip: ip, ifaces: []string{"eth2"}, change: Unchanged, owned: true},
		{op: "withdraw", key: "b", ip: ip, change: Removed, owned: false, on: map[string]bool{"eth2": false}},
		{op: "set", key: "a", ip: netip.MustParseAddr("::ffff:192.0.2.10"), change: Added, owned: true, on: map[string]bool{"eth0": true}},
		{op: "withdraw", key: "a", ip: ip, change: Removed},
		{op: "set", key: "a", ip: netip.Addr{}, change: Unchanged},
	}
	tab := NewTable()
	for i, s := range steps {
		var got Change
		if s.op == "set" {
			got = tab.Set(s.key, s.ip, s.ifaces)
		} else {
			got = tab.Withdraw(s.key, s.ip)
		}
		if got != s.change {
			t.Fatalf("step %d %s %s: change %v, want %v", i, s.op, s.key, got, s.change)
		}
		if tab.Owned(ip) != s.owned {
			t.Fatalf("step %d: owned %v, want %v", i, tab.Owned(ip), s.owned)
		}
		for name, want := range s.on {
			if tab.Allowed(ip, name) != want {
				t.Fatalf("step %d: allowed on %s = %v, want %v", i, name, !want, want)
			}
		}
	}
}

func TestTableLookupNormalizes(t *testing.T) {
	tab := NewTable()
	tab.Set("a", netip.MustParseAddr("fe80::1%eth0"), nil)
	if !tab.Owned(netip.MustParseAddr("fe80::1")) {
		t.Fatal("zone not dropped")
	}
	tab.Set("a", netip.MustParseAddr("192.0.2.1"), nil)
	if !tab.Owned(netip.MustParseAddr("::ffff:192.0.2.1")) {
		t.Fatal("IPv4-mapped lookup missed")
	}
	if got := tab.IPs(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("fe80::1")}) {
		t.Fatalf("IPs %v", got)
	}
	tab.Set("b", netip.MustParseAddr("192.0.2.1"), []string{"eth1"})
	if names, all, ok := tab.Interfaces(netip.MustParseAddr("192.0.2.1")); !ok || !all || names != nil {
		t.Fatalf("Interfaces = %v %v %v, want all", names, all, ok)
	}
	tab.Withdraw("a", netip.MustParseAddr("192.0.2.1"))
	if names, all, ok := tab.Interfaces(netip.MustParseAddr("192.0.2.1")); !ok || all || !slices.Equal(names, []string{"eth1"}) {
		t.Fatalf("Interfaces = %v %v %v, want [eth1]", names, all, ok)
	}
}

// TestTableConcurrent runs readers against writers under the race detector.
func TestTableConcurrent(t *testing.T) {
	tab := NewTable()
	ip := netip.MustParseAddr("192.0.2.10")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					tab.Lookup(ip, "eth0")
				}
			}
		}()
	}
	for i := range 1000 {
		tab.Set("a", ip, []string{"eth0"})
		tab.Set("b", ip, nil)
		tab.Withdraw("a", ip)
		if i%2 == 0 {
			tab.Withdraw("b", ip)
		}
	}
	close(stop)
	wg.Wait()
}

// TestTableQuiet: a quiet IP stays owned and allowed where it was, is reported quiet
// to responders on those interfaces only, keeps its state while holders come and go,
// and a new ownership starts quiet only when asked.
func TestTableQuiet(t *testing.T) {
	tab := NewTable()
	ip := netip.MustParseAddr("192.0.2.10")
	other := netip.MustParseAddr("192.0.2.99")
	if got := tab.set("a", ip, []string{"eth0"}, true); got != Added {
		t.Fatalf("set = %v, want added", got)
	}
	check := func(step string, want0, want1 status, quiet bool) {
		t.Helper()
		if got := tab.status(ip, "eth0"); got != want0 {
			t.Errorf("%s: eth0 status %v, want %v", step, got, want0)
		}
		if got := tab.status(ip, "eth1"); got != want1 {
			t.Errorf("%s: eth1 status %v, want %v", step, got, want1)
		}
		if tab.Quiet(ip) != quiet {
			t.Errorf("%s: Quiet = %v, want %v", step, !quiet, quiet)
		}
		if !tab.Allowed(ip, "eth0") {
			t.Errorf("%s: quiet changed where the IP is allowed", step)
		}
	}
	check("added quiet", statusQuiet, statusWrongInterface, true)
	tab.Set("b", ip, []string{"eth0", "eth1"}) // a second holder does not wake it
	check("second holder", statusQuiet, statusQuiet, true)
	tab.Withdraw("b", ip)
	if !tab.setQuiet(ip, false) {
		t.Fatal("setQuiet on an owned IP reported not owned")
	}
	check("answering", statusAnswering, statusWrongInterface, false)
	if tab.setQuiet(other, true) {
		t.Fatal("setQuiet on an IP not owned reported owned")
	}
	if s, tg := tab.statusPair(other, ip, "eth0"); s != statusNotOwned || tg != statusAnswering {
		t.Fatalf("statusPair = %v %v", s, tg)
	}
	tab.setQuiet(ip, true)
	tab.Withdraw("a", ip)
	if tab.set("a", ip, nil, false) != Added || tab.Quiet(ip) {
		t.Fatal("a new ownership inherited the quiet state of the last one")
	}
	if !statusQuiet.here() || !statusAnswering.here() || statusWrongInterface.here() || statusNotOwned.here() {
		t.Fatal("here() wrong")
	}
}

// BenchmarkTableStatusPair is the table's part of an ARP request for an IP not owned.
func BenchmarkTableStatusPair(b *testing.B) {
	tab := NewTable()
	for i := range 1000 {
		tab.Set("svc", netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), nil)
	}
	sender, target := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.99")
	b.ReportAllocs()
	for b.Loop() {
		tab.statusPair(sender, target, "eth0")
	}
}
