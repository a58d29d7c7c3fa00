package ipam

import (
	"strconv"
	"testing"
)

type tableCase struct {
	name  string
	pools func(t *testing.T) []Pool
	steps []step
}

func runTable(t *testing.T, cases []tableCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New()
			if c.pools != nil {
				if probs := a.SetPools(c.pools(t)); len(probs) != 0 {
					t.Fatal(probs)
				}
			}
			runSteps(t, a, c.steps)
		})
	}
}

func onePool(name string, addrs []string, opts ...poolOpt) func(t *testing.T) []Pool {
	return func(t *testing.T) []Pool { return []Pool{mkPool(t, name, addrs, opts...)} }
}

// TestPoolAllocation covers allocation from the pool named by the herald.dev/address-pool
// annotation, ordering of free addresses and exhaustion (MetalLB's TestPoolAllocation).
func TestPoolAllocation(t *testing.T) {
	kind := []string{"172.18.255.200-172.18.255.250"}
	runTable(t, []tableCase{
		{name: "fresh pool gives ascending addresses", pools: onePool("default", kind), steps: []step{
			{alloc: alloc(mkSvc("default/s1", inPool("default"))), want: []string{"172.18.255.200"}, wantPool: "default", wantChanged: yes()},
			{alloc: alloc(mkSvc("default/s2", inPool("default"))), want: []string{"172.18.255.201"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/s3")), want: []string{"172.18.255.202"}, wantPool: "default"},
			{alloc: alloc(mkSvc("default/s1", inPool("default"))), want: []string{"172.18.255.200"}, wantPool: "default", wantChanged: no()},
		}},
		{name: "freed addresses come back last, least recently freed first", pools: onePool("p", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/a")), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/b")), want: []string{"10.0.0.1"}, wantPool: "p"},
			{release: "ns/b", want: []string{"10.0.0.1"}},
			{release: "ns/a", want: []string{"10.0.0.0"}},
			{alloc: alloc(mkSvc("ns/c")), want: []string{"10.0.0.2"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/d")), want: []string{"10.0.0.3"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/e")), want: []string{"10.0.0.1"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/f")), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/g")), wantErr: ErrNoAvailableIPs, errText: `no available IPs in pool "p" (IPv4: 4 of 4 in use)`},
			{release: "ns/nobody"},
		}},
		{name: "exhausted pool", pools: onePool("default", kind), steps: exhaust("default", 51, "172.18.255.", 200,
			step{alloc: alloc(mkSvc("default/last")), wantErr: ErrNoAvailableIPs, errText: `no available IPs in pool "default" (IPv4: 51 of 51 in use)`})},
		{name: "annotation on an autoAssign=false pool", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "manual", []string{"10.0.1.0/24"}, noAutoAssign), mkPool(t, "auto", []string{"10.0.0.0/24"})}
		}, steps: []step{
			{alloc: alloc(mkSvc("ns/a", inPool("manual"))), want: []string{"10.0.1.0"}, wantPool: "manual"},
			{alloc: alloc(mkSvc("ns/b")), want: []string{"10.0.0.0"}, wantPool: "auto"},
		}},
		{name: "annotation on an unknown pool", pools: onePool("default", kind), steps: []step{
			{alloc: alloc(mkSvc("ns/a", inPool("nope"))), wantErr: ErrNoUsablePool, errText: `pool "nope" does not exist`},
		}},
		{name: "annotation honours serviceAllocation", pools: onePool("team", kind, allocateTo(0, []string{"team"}, nil, nil)), steps: []step{
			{alloc: alloc(mkSvc("ns/a", inPool("team"))), wantErr: ErrNoUsablePool, errText: `the serviceAllocation of pool "team" does not select this Service`},
			{alloc: alloc(mkSvc("team/a", inPool("team"))), want: []string{"172.18.255.200"}, wantPool: "team"},
		}},
		{name: "annotation on a terminating pool", pools: onePool("old", kind, terminating), steps: []step{
			{alloc: alloc(mkSvc("ns/a", inPool("old"))), wantErr: ErrNoUsablePool, errText: `pool "old" is being deleted`},
		}},
		{name: "annotation on a pool without the family", pools: onePool("v4", kind), steps: []step{
			{alloc: alloc(mkSvc("ns/a", inPool("v4"), families(SingleStack, IPv6))), wantErr: ErrNoUsablePool, errText: `pool "v4" has no IPv6 addresses`},
			{alloc: alloc(mkSvc("ns/a", inPool("v4"), families(RequireDualStack, IPv4, IPv6))), wantErr: ErrNoUsablePool,
				errText: `RequireDualStack needs a pool with both IPv4 and IPv6 addresses; pool "v4" has no IPv6 addresses`},
			{alloc: alloc(mkSvc("ns/a", inPool("v4"), families(PreferDualStack, IPv4, IPv6))), want: []string{"172.18.255.200"}, wantPool: "v4"},
		}},
		{name: "sharing Services are packed onto one IP", pools: onePool("default", kind), steps: []step{
			{alloc: alloc(mkSvc("ns/a", sharing("k"), ports("TCP/80"))), want: []string{"172.18.255.200"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/solo")), want: []string{"172.18.255.201"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/b", sharing("k"), ports("TCP/443"))), want: []string{"172.18.255.200"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/c", sharing("k"), ports("TCP/80"))), want: []string{"172.18.255.202"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/d", sharing("k"), ports("UDP/53"))), want: []string{"172.18.255.200"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/e", sharing("k"), ports("TCP/80"), backend("app=x"))), want: []string{"172.18.255.203"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/f", sharing("other"), ports("TCP/80"))), want: []string{"172.18.255.204"}, wantPool: "default"},
			{release: "ns/a", want: []string{"172.18.255.200"}},
			{alloc: alloc(mkSvc("ns/g")), want: []string{"172.18.255.205"}, wantPool: "default"},
			{alloc: alloc(mkSvc("ns/h", sharing("k"), ports("TCP/80"))), want: []string{"172.18.255.200"}, wantPool: "default"},
		}},
		{name: "sharing Service in a full pool still packs", pools: onePool("p", []string{"10.0.0.0/31"}), steps: []step{
			{alloc: alloc(mkSvc("ns/a", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/b")), want: []string{"10.0.0.1"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/c", sharing("k"), ports("TCP/81"))), want: []string{"10.0.0.0"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/d", sharing("k"), ports("TCP/81"))), wantErr: ErrNoAvailableIPs},
		}},
		{name: "huge IPv6 pool", pools: onePool("v6", []string{"fc00::/64"}), steps: []step{
			{alloc: alloc(mkSvc("ns/a", families(SingleStack, IPv6))), want: []string{"fc00::"}, wantPool: "v6"},
			{alloc: alloc(mkSvc("ns/b", families(SingleStack, IPv6), requested("fc00::ffff:ffff:ffff:fffe"))), want: []string{"fc00::ffff:ffff:ffff:fffe"}, wantPool: "v6"},
			{alloc: alloc(mkSvc("ns/c", families(SingleStack, IPv6))), want: []string{"fc00::1"}, wantPool: "v6"},
		}},
	})
}

// exhaust allocates n Services ns/sI from pool, expecting prefix+(first+I), then runs more.
func exhaust(pool string, n int, prefix string, first int, more ...step) []step {
	var steps []step
	for i := range n {
		steps = append(steps, step{alloc: alloc(mkSvc("default/s"+strconv.Itoa(i), inPool(pool))), want: []string{prefix + strconv.Itoa(first+i)}, wantPool: pool})
	}
	return append(steps, more...)
}
