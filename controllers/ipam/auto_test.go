package ipam

import (
	"testing"
)

// TestAllocation covers automatic allocation: pool order, serviceAllocation and
// dual-stack (MetalLB's TestAllocation).
func TestAllocation(t *testing.T) {
	runTable(t, []tableCase{
		{name: "no pools", steps: []step{
			{alloc: alloc(mkSvc("ns/a")), wantErr: ErrNoUsablePool, errText: "no IP address pool with autoAssign may be used for this Service"},
		}},
		{name: "pools without serviceAllocation by name, next when full", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "b", []string{"10.0.2.0/31"}), mkPool(t, "a", []string{"10.0.1.0/32"}), mkPool(t, "c", []string{"10.0.3.0/32"}, noAutoAssign)}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.2.0"}, wantPool: "b"},
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.2.1"}, wantPool: "b"},
			{alloc: alloc(mkSvc("ns/4")), wantErr: ErrNoAvailableIPs,
				errText: `no available IPs in pools "a" (IPv4: 1 of 1 in use), "b" (IPv4: 2 of 2 in use)`},
			{release: "ns/1", want: []string{"10.0.1.0"}},
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.1.0"}, wantPool: "a"},
		}},
		{name: "serviceAllocation priority order", pools: func(t *testing.T) []Pool {
			return []Pool{
				mkPool(t, "aaa-plain", []string{"10.0.0.0/32"}),
				mkPool(t, "prio-0", []string{"10.0.1.0/32"}, allocateTo(0, []string{"ns"}, nil, nil)),
				mkPool(t, "prio-2", []string{"10.0.2.0/32"}, allocateTo(2, []string{"ns"}, nil, nil)),
				mkPool(t, "prio-1", []string{"10.0.3.0/32"}, allocateTo(1, []string{"ns"}, nil, nil)),
				mkPool(t, "prio-1-b", []string{"10.0.4.0/32"}, allocateTo(1, []string{"ns"}, nil, nil)),
			}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.3.0"}, wantPool: "prio-1"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.4.0"}, wantPool: "prio-1-b"},
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.2.0"}, wantPool: "prio-2"},
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.1.0"}, wantPool: "prio-0"},
			{alloc: alloc(mkSvc("ns/5")), want: []string{"10.0.0.0"}, wantPool: "aaa-plain"},
		}},
		{name: "a serviceAllocation that does not select the Service is never used", pools: func(t *testing.T) []Pool {
			return []Pool{
				mkPool(t, "team", []string{"10.0.1.0/24"}, allocateTo(1, []string{"team"}, nil, nil)),
				mkPool(t, "shared", []string{"10.0.2.0/32"}),
			}
		}, steps: []step{
			{alloc: alloc(mkSvc("other/1")), want: []string{"10.0.2.0"}, wantPool: "shared"},
			{alloc: alloc(mkSvc("other/2")), wantErr: ErrNoAvailableIPs, errText: `no available IPs in pool "shared"`},
			{alloc: alloc(mkSvc("team/1")), want: []string{"10.0.1.0"}, wantPool: "team"},
		}},
		{name: "a serviceAllocation with only a priority selects everything", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "a-plain", []string{"10.0.0.0/24"}), mkPool(t, "z-prio", []string{"10.0.1.0/24"}, allocateTo(5, nil, nil, nil))}
		}, steps: []step{
			{alloc: alloc(mkSvc("any/1")), want: []string{"10.0.1.0"}, wantPool: "z-prio"},
		}},
		{name: "namespaces and namespaceSelectors are a union", pools: func(t *testing.T) []Pool {
			return []Pool{
				mkPool(t, "picky", []string{"10.0.1.0/24"}, allocateTo(1, []string{"listed"}, []string{"env=prod"}, nil)),
				mkPool(t, "rest", []string{"10.0.2.0/24"}),
			}
		}, steps: []step{
			{alloc: alloc(mkSvc("listed/1")), want: []string{"10.0.1.0"}, wantPool: "picky"},
			{alloc: alloc(mkSvc("prodns/1", namespaceLabels("env=prod"))), want: []string{"10.0.1.1"}, wantPool: "picky"},
			{alloc: alloc(mkSvc("devns/1", namespaceLabels("env=dev"))), want: []string{"10.0.2.0"}, wantPool: "rest"},
		}},
		{name: "serviceSelectors are OR-ed and AND-ed with namespaces", pools: func(t *testing.T) []Pool {
			return []Pool{
				mkPool(t, "web", []string{"10.0.1.0/24"}, allocateTo(1, []string{"shop"}, nil, []string{"app=web", "tier=front"})),
				mkPool(t, "anyns", []string{"10.0.3.0/24"}, allocateTo(2, nil, nil, []string{"app=db"})),
				mkPool(t, "rest", []string{"10.0.2.0/24"}),
			}
		}, steps: []step{
			{alloc: alloc(mkSvc("shop/1", svcLabels("app=web"))), want: []string{"10.0.1.0"}, wantPool: "web"},
			{alloc: alloc(mkSvc("shop/2", svcLabels("tier=front"))), want: []string{"10.0.1.1"}, wantPool: "web"},
			{alloc: alloc(mkSvc("shop/3", svcLabels("app=api"))), want: []string{"10.0.2.0"}, wantPool: "rest"},
			{alloc: alloc(mkSvc("blog/1", svcLabels("app=web"))), want: []string{"10.0.2.1"}, wantPool: "rest"},
			{alloc: alloc(mkSvc("blog/2", svcLabels("app=db"))), want: []string{"10.0.3.0"}, wantPool: "anyns"},
		}},
		{name: "autoAssign=false pinned pool is not used automatically", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "pinned", []string{"10.0.1.0/24"}, noAutoAssign, allocateTo(1, []string{"ns"}, nil, nil))}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), wantErr: ErrNoUsablePool},
			{alloc: alloc(mkSvc("ns/1", inPool("pinned"))), want: []string{"10.0.1.0"}, wantPool: "pinned"},
		}},
		{name: "overlapping and terminating pools are skipped", steps: []step{
			{setPools: []Pool{
				mkPool(t, "a-young", []string{"10.0.0.0/24"}, createdAt(5)),
				mkPool(t, "b-old", []string{"10.0.0.128/25"}, createdAt(1)),
				mkPool(t, "c-leaving", []string{"10.0.1.0/24"}, terminating),
				mkPool(t, "d", []string{"10.0.2.0/24"}),
			}, problems: []string{`a-young:Overlap:addresses 10.0.0.0/24 overlap 10.0.0.128/25 of the older pool "b-old" (10.0.0.128/25)`}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.128"}, wantPool: "b-old"},
		}},
		{name: "dual-stack", pools: func(t *testing.T) []Pool {
			return []Pool{
				mkPool(t, "a-v4", []string{"10.0.1.0/24"}),
				mkPool(t, "b-v6", []string{"fc00:1::/120"}),
				mkPool(t, "c-dual", []string{"10.0.3.0/24", "fc00:3::/120"}),
			}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/single4")), want: []string{"10.0.1.0"}, wantPool: "a-v4"},
			{alloc: alloc(mkSvc("ns/single6", families(SingleStack, IPv6))), want: []string{"fc00:1::"}, wantPool: "b-v6"},
			{alloc: alloc(mkSvc("ns/require", families(RequireDualStack, IPv4, IPv6))), want: []string{"10.0.3.0", "fc00:3::"}, wantPool: "c-dual"},
			{alloc: alloc(mkSvc("ns/prefer", families(PreferDualStack, IPv6, IPv4))), want: []string{"fc00:3::1", "10.0.3.1"}, wantPool: "c-dual"},
			{alloc: alloc(mkSvc("ns/single-of-two", families(SingleStack, IPv6, IPv4))), want: []string{"fc00:1::1"}, wantPool: "b-v6"},
		}},
		{name: "RequireDualStack without a dual pool", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "a-v4", []string{"10.0.1.0/24"}), mkPool(t, "b-v6", []string{"fc00:1::/120"})}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/require", families(RequireDualStack, IPv4, IPv6))), wantErr: ErrNoUsablePool,
				errText: "RequireDualStack needs a pool with both IPv4 and IPv6 addresses"},
			{alloc: alloc(mkSvc("ns/prefer", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.1.0"}, wantPool: "a-v4"},
			{alloc: alloc(mkSvc("ns/prefer6", families(PreferDualStack, IPv6, IPv4))), want: []string{"fc00:1::"}, wantPool: "b-v6"},
		}},
		{name: "RequireDualStack with one family exhausted", pools: onePool("dual", []string{"10.0.0.0/32", "fc00::/120"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "dual"},
			{alloc: alloc(mkSvc("ns/2", families(RequireDualStack, IPv6, IPv4))), wantErr: ErrNoAvailableIPs,
				errText: `no available IPs in pool "dual" (IPv4: 1 of 1 in use)`},
			{alloc: alloc(mkSvc("ns/3", families(PreferDualStack, IPv6, IPv4))), want: []string{"fc00::"}, wantPool: "dual"},
		}},
		{name: "PreferDualStack takes the first pool with both families", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "a-v4", []string{"10.0.1.0/24"}), mkPool(t, "b-dual", []string{"10.0.2.0/24", "fc00:2::/120"})}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/prefer", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.2.0", "fc00:2::"}, wantPool: "b-dual"},
		}},
		{name: "PreferDualStack with no pool of the primary family takes the other", pools: onePool("v4", []string{"10.0.1.0/24"}), steps: []step{
			{alloc: alloc(mkSvc("ns/prefer", families(PreferDualStack, IPv6, IPv4))), want: []string{"10.0.1.0"}, wantPool: "v4"},
		}},
		{name: "single-stack family missing everywhere", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "a", []string{"10.0.1.0/24"}), mkPool(t, "b", []string{"10.0.2.0/24"})}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/v6", families(SingleStack, IPv6))), wantErr: ErrNoUsablePool, errText: "no pool the Service may use has IPv6 addresses"},
		}},
	})
}

// TestAutoAssign: autoAssign=false pools are only used on request (MetalLB's TestAutoAssign).
func TestAutoAssign(t *testing.T) {
	pools := func(t *testing.T) []Pool {
		return []Pool{mkPool(t, "auto", []string{"10.0.0.0/31"}), mkPool(t, "manual", []string{"10.0.1.0/31"}, noAutoAssign)}
	}
	runTable(t, []tableCase{
		{name: "auto pool fills, manual stays untouched", pools: pools, steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "auto"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "auto"},
			{alloc: alloc(mkSvc("ns/3")), wantErr: ErrNoAvailableIPs, errText: `pool "auto"`},
			{alloc: alloc(mkSvc("ns/3", inPool("manual"))), want: []string{"10.0.1.0"}, wantPool: "manual"},
			{alloc: alloc(mkSvc("ns/4", requested("10.0.1.1"))), want: []string{"10.0.1.1"}, wantPool: "manual"},
		}},
		{name: "turning autoAssign on", pools: pools, steps: []step{
			{setPools: []Pool{mkPool(t, "manual", []string{"10.0.1.0/31"})}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "manual"},
		}},
	})
}

// TestBuggyIPs: avoidBuggyIPs skips .0 and .255 (MetalLB's TestBuggyIPs).
func TestBuggyIPs(t *testing.T) {
	runTable(t, []tableCase{
		{name: "skips .255 and .0 across a /24 boundary", pools: onePool("p", []string{"10.0.0.254-10.0.1.1"}, avoidBuggy), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.254"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.1.1"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/3")), wantErr: ErrNoAvailableIPs, errText: `(IPv4: 2 of 2 in use)`},
		}},
		{name: "without avoidBuggyIPs every address", pools: onePool("p", []string{"10.0.0.254-10.0.1.1"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.254"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.255"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.1.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.1.1"}, wantPool: "p"},
		}},
		{name: "a pool of only buggy addresses", pools: onePool("p", []string{"10.0.0.255-10.0.1.0"}, avoidBuggy), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), wantErr: ErrNoAvailableIPs, errText: `(IPv4: 0 of 0 in use)`},
		}},
		{name: "CIDR starts after .0", pools: onePool("p", []string{"10.0.0.0/24"}, avoidBuggy), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.1"}, wantPool: "p"},
		}},
		{name: "IPv6 is never buggy", pools: onePool("p", []string{"fc00::ff/128", "fc00::100/128"}, avoidBuggy), steps: []step{
			{alloc: alloc(mkSvc("ns/1", families(SingleStack, IPv6))), want: []string{"fc00::ff"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2", families(SingleStack, IPv6))), want: []string{"fc00::100"}, wantPool: "p"},
		}},
		{name: "a restored buggy IP is kept but not recycled", pools: onePool("p", []string{"10.0.0.255/32", "10.0.1.1/32"}, avoidBuggy), steps: []step{
			{restore: alloc(mkSvc("ns/old")), ips: []string{"10.0.0.255"}, pool: "p"},
			{alloc: alloc(mkSvc("ns/old")), want: []string{"10.0.0.255"}, wantPool: "p", wantChanged: no()},
			{release: "ns/old", want: []string{"10.0.0.255"}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.1"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/2")), wantErr: ErrNoAvailableIPs},
		}},
	})
}
