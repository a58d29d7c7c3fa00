package ipam

import (
	"testing"
)

// TestExistingAllocation covers a Service that already holds IPs: it keeps them unless it
// asks for something else.
func TestExistingAllocation(t *testing.T) {
	p := func(name string, addrs []string, opts ...poolOpt) Pool { return mkPool(t, name, addrs, opts...) }
	dual := func(t *testing.T) []Pool {
		return []Pool{p("a-dual", []string{"10.0.1.0/24", "fc00:1::/120"}), p("b-dual", []string{"10.0.2.0/24", "fc00:2::/120"}, noAutoAssign)}
	}
	runTable(t, []tableCase{
		{name: "requested IP changes", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "p", wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.6"))), want: []string{"10.0.0.6"}, wantPool: "p", wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "p"},
		}},
		{name: "requested IP removed keeps the IP", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.5"))), want: []string{"10.0.0.5"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.5"}, wantPool: "p", wantChanged: no()},
		}},
		{name: "requested IP we cannot give releases the old one", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.9"))), want: []string{"10.0.0.9"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.9"))), wantErr: ErrIPInUse, wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/3", requested("10.0.0.0"))), want: []string{"10.0.0.0"}, wantPool: "p"},
		}},
		{name: "malformed request releases", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.1", "10.0.0.2"))), wantErr: ErrInvalidService, wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.1"}, wantPool: "p", wantChanged: yes()},
		}},
		{name: "pool annotation changes", pools: dual, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "a-dual"},
			{alloc: alloc(mkSvc("ns/1", inPool("a-dual"))), want: []string{"10.0.1.0"}, wantPool: "a-dual", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/1", inPool("b-dual"))), want: []string{"10.0.2.0"}, wantPool: "b-dual", wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.2.0"}, wantPool: "b-dual", wantChanged: no()},
		}},
		{name: "dual-stack becomes single-stack", pools: dual, steps: []step{
			{alloc: alloc(mkSvc("ns/1", families(RequireDualStack, IPv4, IPv6))), want: []string{"10.0.1.0", "fc00:1::"}, wantPool: "a-dual"},
			{alloc: alloc(mkSvc("ns/1", families(SingleStack, IPv4))), want: []string{"10.0.1.0"}, wantPool: "a-dual", wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/2", families(SingleStack, IPv6))), want: []string{"fc00:1::1"}, wantPool: "a-dual"},
			{alloc: alloc(mkSvc("ns/1", families(SingleStack, IPv6))), want: []string{"fc00:1::2"}, wantPool: "a-dual", wantChanged: yes()},
		}},
		{name: "primary family flips", pools: dual, steps: []step{
			{alloc: alloc(mkSvc("ns/1", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.1.0", "fc00:1::"}, wantPool: "a-dual"},
			{alloc: alloc(mkSvc("ns/1", families(PreferDualStack, IPv6, IPv4))), want: []string{"fc00:1::", "10.0.1.0"}, wantPool: "a-dual", wantChanged: no()},
		}},
		{name: "PreferDualStack adds the missing family from its own pool", pools: onePool("a", []string{"10.0.1.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.1.0"}, wantPool: "a"},
			{setPools: []Pool{p("a", []string{"10.0.1.0/24"}), p("other", []string{"fc00:9::/120"})}},
			{alloc: alloc(mkSvc("ns/1", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.1.0"}, wantPool: "a", wantChanged: no()},
			{setPools: []Pool{p("a", []string{"10.0.1.0/24", "fc00:1::/120"}), p("other", []string{"fc00:9::/120"})}},
			{alloc: alloc(mkSvc("ns/1", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.1.0", "fc00:1::"}, wantPool: "a", wantChanged: yes()},
		}},
		{name: "PreferDualStack adds the missing family even from an autoAssign=false pool", pools: onePool("m", []string{"10.0.1.0/24"}, noAutoAssign), steps: []step{
			{alloc: alloc(mkSvc("ns/1", inPool("m"), families(SingleStack, IPv4))), want: []string{"10.0.1.0"}, wantPool: "m"},
			{setPools: []Pool{p("m", []string{"10.0.1.0/24", "fc00:1::/127"}, noAutoAssign)}},
			{alloc: alloc(mkSvc("ns/1", families(PreferDualStack, IPv6, IPv4))), want: []string{"fc00:1::", "10.0.1.0"}, wantPool: "m", wantChanged: yes()},
		}},
		{name: "RequireDualStack holding one family moves to a pool with both", pools: func(t *testing.T) []Pool {
			return []Pool{p("a-v4", []string{"10.0.1.0/24"}), p("b-dual", []string{"10.0.2.0/24", "fc00:2::/120"})}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "a-v4"},
			{alloc: alloc(mkSvc("ns/1", families(RequireDualStack, IPv4, IPv6))), want: []string{"10.0.2.0", "fc00:2::"}, wantPool: "b-dual", wantChanged: yes()},
		}},
		{name: "RequireDualStack without any way releases", pools: onePool("a-v4", []string{"10.0.1.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "a-v4"},
			{alloc: alloc(mkSvc("ns/1", families(RequireDualStack, IPv4, IPv6))), wantErr: ErrNoUsablePool, wantChanged: yes()},
		}},
		{name: "sole holder changes its sharing key and ports in place", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/1", sharing("k"), ports("TCP/81"), backend("app=x"))), want: []string{"10.0.0.0"}, wantPool: "p", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/80"), backend("app=x"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/3", sharing("k"), ports("TCP/81"), backend("app=x"))), want: []string{"10.0.0.1"}, wantPool: "p"},
		}},
		{name: "a co-holder changing its sharing key moves", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", sharing("k2"), ports("TCP/81"))), want: []string{"10.0.0.1"}, wantPool: "p", wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/1", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "p", wantChanged: no()},
		}},
		{name: "a co-holder whose ports now collide moves", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81", "TCP/82"))), want: []string{"10.0.0.0"}, wantPool: "p", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.1"}, wantPool: "p", wantChanged: yes()},
		}},
		{name: "a co-holder switching backend moves", pools: onePool("p", []string{"10.0.0.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81"), backend("app=y"))), want: []string{"10.0.0.1"}, wantPool: "p", wantChanged: yes()},
		}},
		{name: "a Service asking for a pool that does not exist keeps its IP until it does", pools: dual, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "a-dual"},
			{alloc: alloc(mkSvc("ns/1", inPool("later"))), want: []string{"10.0.1.0"}, wantPool: "a-dual", wantChanged: no(),
				wantErr: ErrNoUsablePool, errText: `pool "later" does not exist; the Service keeps 10.0.1.0 until it does`},
			{setPools: []Pool{p("a-dual", []string{"10.0.1.0/24", "fc00:1::/120"}), p("later", []string{"10.0.3.0/24"}, noAutoAssign)}},
			{alloc: alloc(mkSvc("ns/1", inPool("later"))), want: []string{"10.0.3.0"}, wantPool: "later", wantChanged: yes()},
		}},
		{name: "a restored Service naming a missing pool keeps an IP in no pool", pools: dual, steps: []step{
			{restore: alloc(mkSvc("ns/1", inPool("gone"))), ips: []string{"192.0.2.7"}, pool: "gone"},
			{alloc: alloc(mkSvc("ns/1", inPool("gone"))), want: []string{"192.0.2.7"}, wantPool: "", wantChanged: no(),
				wantErr: ErrNoUsablePool, errText: `pool "gone" does not exist`},
		}},
		{name: "a Service asking for another pool that is full loses its IP", pools: dual, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "a-dual"},
			{setPools: []Pool{p("a-dual", []string{"10.0.1.0/24", "fc00:1::/120"}), p("b-full", []string{"10.0.2.0/32"}, noAutoAssign)}},
			{alloc: alloc(mkSvc("ns/2", inPool("b-full"))), want: []string{"10.0.2.0"}, wantPool: "b-full"},
			{alloc: alloc(mkSvc("ns/1", inPool("b-full"))), wantErr: ErrNoAvailableIPs, wantChanged: yes()},
		}},
	})
}

// TestRestore covers rebuilding state from Service.status at start.
func TestRestore(t *testing.T) {
	p := func(name string, addrs []string, opts ...poolOpt) Pool { return mkPool(t, name, addrs, opts...) }
	kind := onePool("default", []string{"172.18.255.200-172.18.255.250"})
	runTable(t, []tableCase{
		{name: "restored IPs are skipped, never-used order kept", pools: kind, steps: []step{
			{restore: alloc(mkSvc("ns/old")), ips: []string{"172.18.255.201"}, pool: "default"},
			{alloc: alloc(mkSvc("ns/old")), want: []string{"172.18.255.201"}, wantPool: "default", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"172.18.255.200"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"172.18.255.202"}, wantPool: "default"},
		}},
		{name: "conflict: the first restored keeps the IP", pools: kind, steps: []step{
			{restore: alloc(mkSvc("ns/old")), ips: []string{"172.18.255.200"}, pool: "default"},
			{restore: alloc(mkSvc("ns/young")), ips: []string{"172.18.255.200"}, pool: "default", wantErr: ErrIPInUse,
				errText: `restoring ns/young: IP 172.18.255.200 is in use by ns/old with sharing key ""`},
			{alloc: alloc(mkSvc("ns/young")), want: []string{"172.18.255.201"}, wantPool: "default", wantChanged: yes()},
		}},
		{name: "conflict on the second IP records nothing", pools: onePool("d", []string{"10.0.0.0/24", "fc00::/120"}), steps: []step{
			{restore: alloc(mkSvc("ns/old", families(SingleStack, IPv6))), ips: []string{"fc00::1"}},
			{restore: alloc(mkSvc("ns/young", families(RequireDualStack, IPv4, IPv6))), ips: []string{"10.0.0.1", "fc00::1"}, wantErr: ErrIPInUse},
			{release: "ns/young"},
			{alloc: alloc(mkSvc("ns/new", requested("10.0.0.1"))), want: []string{"10.0.0.1"}, wantPool: "d"},
		}},
		{name: "compatible sharing Services restore onto one IP", pools: kind, steps: []step{
			{restore: alloc(mkSvc("ns/a", sharing("k"), ports("TCP/80"))), ips: []string{"172.18.255.210"}, pool: "default"},
			{restore: alloc(mkSvc("ns/b", sharing("k"), ports("TCP/81"))), ips: []string{"172.18.255.210"}, pool: "default"},
			{restore: alloc(mkSvc("ns/c", sharing("k"), ports("TCP/81"))), ips: []string{"172.18.255.210"}, pool: "default", wantErr: ErrIPInUse,
				errText: "port TCP/81 already used by ns/b on 172.18.255.210"},
		}},
		{name: "IPs outside every pool are kept", pools: kind, steps: []step{
			{restore: alloc(mkSvc("ns/a")), ips: []string{"192.0.2.1"}, pool: "gone"},
			{alloc: alloc(mkSvc("ns/a")), want: []string{"192.0.2.1"}, wantPool: "", wantChanged: no()},
			{restore: alloc(mkSvc("ns/b")), ips: []string{"192.0.2.1"}, wantErr: ErrIPInUse},
		}},
		{name: "stale or empty pool names are re-homed", pools: func(t *testing.T) []Pool {
			return []Pool{p("a", []string{"10.0.0.0/24"}), p("b", []string{"10.0.1.0/24"})}
		}, steps: []step{
			{restore: alloc(mkSvc("ns/1")), ips: []string{"10.0.0.1"}, pool: "b"},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.1"}, wantPool: "a", wantChanged: no()},
			{restore: alloc(mkSvc("ns/2")), ips: []string{"10.0.1.1"}},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.1.1"}, wantPool: "b", wantChanged: no()},
		}},
		{name: "a recorded pool that still contains the IP is kept, also when disabled", steps: []step{
			{setPools: []Pool{p("old", []string{"10.0.0.0/24"}, createdAt(1)), p("new", []string{"10.0.0.0/25"}, createdAt(2))},
				problems: []string{`new:Overlap:older pool "old"`}},
			{restore: alloc(mkSvc("ns/1")), ips: []string{"10.0.0.1"}, pool: "new"},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.1"}, wantPool: "new", wantChanged: no()},
		}},
		{name: "restore ignores autoAssign, serviceAllocation, terminating", pools: onePool("x", []string{"10.0.0.0/24"},
			noAutoAssign, terminating, allocateTo(1, []string{"elsewhere"}, nil, nil)), steps: []step{
			{restore: alloc(mkSvc("ns/1")), ips: []string{"10.0.0.7"}, pool: "x"},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.7"}, wantPool: "x", wantChanged: no()},
		}},
		{name: "restore then family change drops the unwanted IP", pools: onePool("d", []string{"10.0.0.0/24", "fc00::/120"}), steps: []step{
			{restore: alloc(mkSvc("ns/1")), ips: []string{"fc00::3", "10.0.0.3"}, pool: "d"},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.3"}, wantPool: "d", wantChanged: yes()},
		}},
		{name: "restore replaces what the Service held", pools: kind, steps: []step{
			{restore: alloc(mkSvc("ns/1")), ips: []string{"172.18.255.220"}},
			{restore: alloc(mkSvc("ns/1")), ips: []string{"172.18.255.221"}},
			{alloc: alloc(mkSvc("ns/2", requested("172.18.255.220"))), want: []string{"172.18.255.220"}, wantPool: "default"},
		}},
		{name: "malformed status", pools: kind, steps: []step{
			{restore: alloc(mkSvc("ns/1")), ips: nil, wantErr: ErrInvalidService},
			{restore: alloc(mkSvc("ns/1")), ips: []string{"10.0.0.1", "10.0.0.2"}, wantErr: ErrInvalidService, errText: "two IPv4 addresses"},
			{restore: alloc(mkSvc("")), ips: []string{"10.0.0.1"}, wantErr: ErrInvalidService},
		}},
	})
}
