package ipam

import (
	"net/netip"
	"slices"

	"go4.org/netipx"
)

// Reserved is a range of addresses that the network or the cluster already uses: no
// pool gives any of them out.
type Reserved struct {
	Range netipx.IPRange
	// Why names the use, for the pool's status: "loopback", "Service CIDR",
	// "InternalIP of node w1", ...
	Why string
}

// String is the range and its use: "10.96.0.0/12 (Service CIDR)".
func (r Reserved) String() string { return rangeString(r.Range) + " (" + r.Why + ")" }

// specialPurpose are the addresses that can never be a LoadBalancer IP, whatever the
// cluster: a host does not answer ARP/NDP for them or does not route them.
var specialPurpose = []Reserved{
	{netipx.IPRangeFrom(netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("0.255.255.255")), "unspecified"},
	{netipx.IPRangeFrom(netip.MustParseAddr("127.0.0.0"), netip.MustParseAddr("127.255.255.255")), "loopback"},
	{netipx.IPRangeFrom(netip.MustParseAddr("169.254.0.0"), netip.MustParseAddr("169.254.255.255")), "link-local"},
	{netipx.IPRangeFrom(netip.MustParseAddr("224.0.0.0"), netip.MustParseAddr("239.255.255.255")), "multicast"},
	{netipx.IPRangeFrom(netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("255.255.255.255")), "broadcast"},
	{netipx.IPRangeFrom(netip.MustParseAddr("::"), netip.MustParseAddr("::")), "unspecified"},
	{netipx.IPRangeFrom(netip.MustParseAddr("::1"), netip.MustParseAddr("::1")), "loopback"},
	{netipx.IPRangeFrom(netip.MustParseAddr("fe80::"), netip.MustParseAddr("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff")), "link-local"},
	{netipx.IPRangeFrom(netip.MustParseAddr("ff00::"), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")), "multicast"},
}

// reservedSet holds the reserved ranges sorted by first address (they may overlap: a
// node's address inside a pod CIDR) and, per family, their merged union.
type reservedSet struct {
	list   []Reserved
	merged [2][]netipx.IPRange
}

func newReservedSet(rs []Reserved) reservedSet {
	list := slices.Concat(specialPurpose, rs)
	list = slices.DeleteFunc(list, func(r Reserved) bool { return !r.Range.IsValid() })
	slices.SortStableFunc(list, func(x, y Reserved) int { return x.Range.From().Compare(y.Range.From()) })
	list = slices.CompactFunc(list, func(x, y Reserved) bool { return x == y })
	s := reservedSet{list: list}
	var byFamily [2][]netipx.IPRange
	for _, r := range list {
		i := familyIndex(FamilyOf(r.Range.From()))
		byFamily[i] = append(byFamily[i], r.Range)
	}
	for i := range byFamily {
		s.merged[i] = mergeRanges(byFamily[i])
	}
	return s
}

func (s *reservedSet) contains(a netip.Addr) bool {
	return rangesContain(s.merged[familyIndex(FamilyOf(a))], a)
}

// why names the first use of a, or "" when a is not reserved.
func (s *reservedSet) why(a netip.Addr) string {
	for _, r := range s.list {
		if r.Range.Contains(a) {
			return r.Why
		}
	}
	return ""
}

// within lists the reserved ranges that overlap rs (sorted, disjoint), clipped to them.
func (s *reservedSet) within(rs []netipx.IPRange) []Reserved {
	var out []Reserved
	for _, r := range s.list {
		for _, p := range rs {
			if r.Range.Overlaps(p) {
				out = append(out, Reserved{Range: overlapOf(r.Range, p), Why: r.Why})
			}
		}
	}
	return out
}

// SetReserved replaces the ranges the cluster uses (node addresses, pod and Service
// CIDRs) and reports whether that changed anything. They are reserved beside the
// special-purpose addresses, which always are: reserved addresses leave the free sets
// and the capacity of every pool, and a request for one fails. A Service holding one
// keeps it (an assigned IP is never taken away). O(IPs in use + ranges) when it changes.
func (a *Allocator) SetReserved(rs []Reserved) bool {
	next := newReservedSet(rs)
	if slices.Equal(next.list, a.reserved.list) {
		return false
	}
	a.reserved = next
	pools := make([]Pool, len(a.byAge))
	for i, p := range a.byAge {
		pools[i] = p.Pool
	}
	byAge, _ := checkPools(pools)
	a.rebuild(byAge)
	return true
}

// ReservedIn lists the reserved addresses of pool, each with its use, sorted.
func (a *Allocator) ReservedIn(pool string) []Reserved {
	p := a.pools[pool]
	if p == nil {
		return nil
	}
	return a.reserved.within(slices.Concat(p.merged[0], p.merged[1]))
}

// intersectRanges returns the addresses both rs and other hold (each sorted, disjoint).
func intersectRanges(rs, other []netipx.IPRange) []netipx.IPRange {
	var a, b netipx.IPSetBuilder
	for _, r := range rs {
		a.AddRange(r)
	}
	for _, r := range other {
		b.AddRange(r)
	}
	bs, _ := b.IPSet()
	a.Intersect(bs)
	set, _ := a.IPSet()
	return set.Ranges()
}

// AllReserved reports whether every address of pool is reserved: it can give out none.
func (a *Allocator) AllReserved(pool string) bool {
	p := a.pools[pool]
	return p != nil && len(p.giving[0]) == 0 && len(p.giving[1]) == 0 && (len(p.merged[0]) > 0 || len(p.merged[1]) > 0)
}

// subtractRanges returns the sorted, disjoint ranges rs without the addresses of cut
// (sorted, disjoint).
func subtractRanges(rs, cut []netipx.IPRange) []netipx.IPRange {
	var b netipx.IPSetBuilder
	for _, r := range rs {
		b.AddRange(r)
	}
	for _, r := range cut {
		b.RemoveRange(r)
	}
	set, _ := b.IPSet()
	return set.Ranges()
}
