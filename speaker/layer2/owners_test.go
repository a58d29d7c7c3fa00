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
