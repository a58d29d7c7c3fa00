package ipam

import (
	"testing"
)

// TestConfigReload covers SetPools with allocations in place (MetalLB's TestConfigReload,
// except that we never drop an allocation).
func TestConfigReload(t *testing.T) {
	p := func(name string, addrs []string, opts ...poolOpt) Pool { return mkPool(t, name, addrs, opts...) }
	runTable(t, []tableCase{
		{name: "allocations survive removal of every pool", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{setNone: true},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2")), wantErr: ErrNoUsablePool},
			{setPools: []Pool{p("a", []string{"10.0.0.0/30"})}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "a"},
		}},
		{name: "an IP outside every pool is still given to no one", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{setPools: []Pool{p("a", []string{"10.0.0.1/32"})}},
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.0"))), wantErr: ErrNoUsablePool},
			{setPools: []Pool{p("a", []string{"10.0.0.0/31"})}},
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.0"))), wantErr: ErrIPInUse},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "a"},
		}},
		{name: "allocations are re-homed to the pool now containing them", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{setPools: []Pool{p("b", []string{"10.0.0.0/29"})}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "b", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "b"},
		}},
		{name: "a pool annotation on a renamed pool keeps the IP, with an error", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", inPool("a"))), want: []string{"10.0.0.0"}, wantPool: "a"},
			{setPools: []Pool{p("b", []string{"10.0.0.0/29"})}},
			{alloc: alloc(mkSvc("ns/1", inPool("a"))), want: []string{"10.0.0.0"}, wantPool: "b", wantErr: ErrNoUsablePool, wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "b"},
		}},
		{name: "a new pool overlapping an old one gives out nothing", pools: onePool("old", []string{"10.0.0.0/30"}, createdAt(1)), steps: []step{
			{setPools: []Pool{p("old", []string{"10.0.0.0/30"}, createdAt(1)), p("new", []string{"10.0.0.2-10.0.0.9"}, createdAt(2), noAutoAssign)},
				problems: []string{`new:Overlap:addresses 10.0.0.2-10.0.0.9 overlap 10.0.0.0/30 of the older pool "old" (10.0.0.2/31)`}},
			{alloc: alloc(mkSvc("ns/1", inPool("new"))), wantErr: ErrNoUsablePool, errText: `pool "new" gives out no addresses: addresses 10.0.0.2-10.0.0.9 overlap`},
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.8"))), wantErr: ErrNoUsablePool, errText: `requested IP 10.0.0.8 is not in any pool the Service may use (pool "new" gives out no addresses`},
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.2"))), want: []string{"10.0.0.2"}, wantPool: "old"},
		}},
		{name: "equal creation times: the name decides", steps: []step{
			{setPools: []Pool{p("b", []string{"10.0.0.0/30"}), p("a", []string{"10.0.0.3/32"})},
				problems: []string{`b:Overlap:the older pool "a"`}},
		}},
		{name: "a pool overlapping itself", steps: []step{
			{setPools: []Pool{p("self", []string{"10.0.0.0/24", "10.0.0.5-10.0.0.9"}), p("fine", []string{"10.0.1.0/24"})},
				problems: []string{`self:Overlap:addresses 10.0.0.0/24 and 10.0.0.5-10.0.0.9 of this pool overlap (10.0.0.5-10.0.0.9)`}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "fine"},
		}},
		{name: "overlap with a disabled older pool still disables", steps: []step{
			{setPools: []Pool{
				p("a", []string{"10.0.0.0/24"}, createdAt(1)),
				p("b", []string{"10.0.0.128/25", "10.0.1.0/24"}, createdAt(2)),
				p("c", []string{"10.0.1.0/25"}, createdAt(3)),
			}, problems: []string{`b:Overlap:older pool "a"`, `c:Overlap:older pool "b"`}},
		}},
		{name: "invalid ranges and duplicate names", steps: []step{
			{setPools: []Pool{{Name: "bad", Ranges: nil}, {Name: "bad2", Ranges: append(p("x", []string{"10.0.0.0/24"}).Ranges, mappedIPv4)},
				p("dup", []string{"10.0.1.0/24"}, createdAt(1)), p("dup", []string{"10.0.2.0/24"}, createdAt(2))},
				problems: []string{`dup:DuplicateName:same name`, `bad2:InvalidAddresses:IPv4-mapped`}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.1.0"}, wantPool: "dup"},
		}},
		{name: "the older pool keeps its addresses when the overlap goes", pools: onePool("old", []string{"10.0.0.0/30"}, createdAt(1)), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "old"},
			{setPools: []Pool{p("old", []string{"10.0.0.0/30"}, createdAt(1)), p("new", []string{"10.0.0.0/29"}, createdAt(2))},
				problems: []string{`new:Overlap:older pool "old"`}},
			{setPools: []Pool{p("new", []string{"10.0.0.0/29"}, createdAt(2))}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "new", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "new"},
		}},
		{name: "recycled order survives SetPools", pools: onePool("a", []string{"10.0.0.0/29"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.0.2"}, wantPool: "a"},
			{release: "ns/3", want: []string{"10.0.0.2"}},
			{release: "ns/1", want: []string{"10.0.0.0"}},
			// Flags only: the fast path.
			{setPools: []Pool{p("a", []string{"10.0.0.0/29"}, allocateTo(1, nil, nil, nil))}},
			// Ranges change: a rebuild; 10.0.0.2 and 10.0.0.0 keep their order, .8-.9 are new.
			{setPools: []Pool{p("a", []string{"10.0.0.0/29", "10.0.0.8/31"})}},
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.0.3"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/5", requested("10.0.0.9"))), want: []string{"10.0.0.9"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/6")), want: []string{"10.0.0.4"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/7")), want: []string{"10.0.0.5"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/8")), want: []string{"10.0.0.6"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/9")), want: []string{"10.0.0.7"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/10")), want: []string{"10.0.0.8"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/11")), want: []string{"10.0.0.2"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/12")), want: []string{"10.0.0.0"}, wantPool: "a"},
		}},
		{name: "recycled addresses move with their range to another pool", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{release: "ns/1", want: []string{"10.0.0.0"}},
			{setPools: []Pool{p("a", []string{"10.0.0.2/31"}), p("b", []string{"10.0.0.0/31"})}},
			{alloc: alloc(mkSvc("ns/2", inPool("b"))), want: []string{"10.0.0.1"}, wantPool: "b"},
			{alloc: alloc(mkSvc("ns/3", inPool("b"))), want: []string{"10.0.0.0"}, wantPool: "b"},
		}},
		{name: "a recycled address that leaves every pool is never-used when it returns", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{release: "ns/1", want: []string{"10.0.0.0"}},
			{setPools: []Pool{p("a", []string{"10.0.0.1-10.0.0.3"})}},
			{setPools: []Pool{p("a", []string{"10.0.0.0/30"})}},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.0"}, wantPool: "a"},
		}},
		{name: "a terminating pool keeps its Services and gives nothing new", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{setPools: []Pool{p("a", []string{"10.0.0.0/30"}, terminating)}},
			{alloc: alloc(mkSvc("ns/1", inPool("a"))), want: []string{"10.0.0.0"}, wantPool: "a", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/2")), wantErr: ErrNoUsablePool},
			{alloc: alloc(mkSvc("ns/2", inPool("a"))), wantErr: ErrNoUsablePool, errText: "being deleted"},
		}},
		{name: "a serviceAllocation that stops selecting a Service does not take its IP", pools: onePool("a", []string{"10.0.0.0/30"}, allocateTo(1, []string{"ns"}, nil, nil)), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{setPools: []Pool{p("a", []string{"10.0.0.0/30"}, allocateTo(1, []string{"other"}, nil, nil))}},
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a", wantChanged: no()},
		}},
	})
}

// TestUsersAndStats covers the counts behind pool status, metrics and the finalizer
// (MetalLB's TestPoolCount and TestPoolMetrics).
func TestUsersAndStats(t *testing.T) {
	a := New()
	probs := a.SetPools([]Pool{
		mkPool(t, "kind", []string{"172.18.255.200-172.18.255.250"}),
		mkPool(t, "cidr", []string{"10.0.0.0/24"}, noAutoAssign),
		mkPool(t, "buggy", []string{"10.0.2.0/23"}, avoidBuggy, noAutoAssign),
		mkPool(t, "dual", []string{"10.0.4.0/30", "fc00::/124"}, noAutoAssign),
		mkPool(t, "huge", []string{"fd00::/64", "fd01::/63"}, noAutoAssign),
		mkPool(t, "exact", []string{"fe00::/66", "10.0.5.0/30"}, noAutoAssign),
		mkPool(t, "overlap", []string{"10.0.0.0/30"}, createdAt(9)),
	})
	if len(probs) != 1 || probs[0].Pool != "overlap" {
		t.Fatalf("problems %v", probs)
	}
	checkStats := func(pool string, want PoolStats, users int) {
		t.Helper()
		if got := a.Stats(pool); got != want {
			t.Errorf("Stats(%s) = %+v, want %+v", pool, got, want)
		}
		if got := a.Users(pool); got != users {
			t.Errorf("Users(%s) = %d, want %d", pool, got, users)
		}
	}
	const maxInt64 = 1<<63 - 1
	checkStats("kind", PoolStats{AvailableIPv4: 51}, 0)
	checkStats("cidr", PoolStats{AvailableIPv4: 256}, 0)
	checkStats("buggy", PoolStats{AvailableIPv4: 508}, 0)
	checkStats("dual", PoolStats{AvailableIPv4: 4, AvailableIPv6: 16}, 0)
	checkStats("huge", PoolStats{AvailableIPv6: maxInt64}, 0)
	checkStats("exact", PoolStats{AvailableIPv4: 4, AvailableIPv6: 1 << 62}, 0)
	checkStats("overlap", PoolStats{}, 0)
	checkStats("nope", PoolStats{}, 0)

	mustAlloc := func(s Service) Result {
		t.Helper()
		res, err := a.Allocate(s)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	mustAlloc(mkSvc("ns/1"))
	mustAlloc(mkSvc("ns/2", sharing("k"), ports("TCP/80")))
	mustAlloc(mkSvc("ns/3", sharing("k"), ports("TCP/81")))
	mustAlloc(mkSvc("ns/4", sharing("k"), ports("TCP/82")))
	checkStats("kind", PoolStats{AssignedIPv4: 2, AvailableIPv4: 49}, 4)
	mustAlloc(mkSvc("ns/5", inPool("dual"), families(RequireDualStack, IPv4, IPv6)))
	checkStats("dual", PoolStats{AssignedIPv4: 1, AssignedIPv6: 1, AvailableIPv4: 3, AvailableIPv6: 15}, 1)
	mustAlloc(mkSvc("ns/6", inPool("huge"), families(SingleStack, IPv6)))
	checkStats("huge", PoolStats{AssignedIPv6: 1, AvailableIPv6: maxInt64}, 1)
	mustAlloc(mkSvc("ns/7", inPool("buggy")))
	checkStats("buggy", PoolStats{AssignedIPv4: 1, AvailableIPv4: 507}, 1)
	if err := a.Restore(mkSvc("ns/8"), addrs("10.0.2.255"), "buggy"); err != nil {
		t.Fatal(err)
	}
	checkStats("buggy", PoolStats{AssignedIPv4: 2, AvailableIPv4: 507}, 2)
	mustAlloc(mkSvc("ns/9", inPool("exact"), families(SingleStack, IPv6)))
	checkStats("exact", PoolStats{AssignedIPv6: 1, AvailableIPv4: 4, AvailableIPv6: 1<<62 - 1}, 1)

	// An IP in the overlapping pool's range counts in the older pool only.
	mustAlloc(mkSvc("ns/10", requested("10.0.0.1")))
	checkStats("cidr", PoolStats{AssignedIPv4: 1, AvailableIPv4: 255}, 1)
	checkStats("overlap", PoolStats{}, 0)

	a.Release("ns/2")
	a.Release("ns/3")
	checkStats("kind", PoolStats{AssignedIPv4: 2, AvailableIPv4: 49}, 2)
	a.Release("ns/4")
	checkStats("kind", PoolStats{AssignedIPv4: 1, AvailableIPv4: 50}, 1)

	// Terminating: assigned still counted, nothing available, users kept.
	a.SetPools([]Pool{mkPool(t, "kind", []string{"172.18.255.200-172.18.255.250"}, terminating)})
	checkStats("kind", PoolStats{AssignedIPv4: 1}, 1)
	checkStats("cidr", PoolStats{}, 0)
	a.Release("ns/1")
	checkStats("kind", PoolStats{}, 0)
	checkInvariants(t, a)
}
