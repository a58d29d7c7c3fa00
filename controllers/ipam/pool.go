package ipam

import (
	"net/netip"
	"slices"
	"sort"

	"go4.org/netipx"
)

// poolState is a Pool plus what the allocator knows about it.
type poolState struct {
	Pool
	// problem is set when the pool gives out no addresses (overlap, invalid ranges).
	problem *PoolProblem
	// merged are the pool's ranges per family, sorted and merged (disjoint).
	merged [2][]netipx.IPRange
	// reserved are the addresses of merged that the cluster or the network uses
	// (Allocator.SetReserved), and giving the rest, which the pool may give out.
	reserved, giving [2][]netipx.IPRange
	// capacity counts giving per family, without .0/.255 when AvoidBuggyIPs.
	capacity [2]u128
	// free is nil for disabled pools: they hand out nothing.
	free [2]*freeSet
	// inUse counts the IPs in use that this pool counts (see Allocator.homeOf);
	// counted is the part of them that is included in capacity.
	inUse, counted [2]int64
}

// enabled pools may give out addresses: they overlap no older pool.
func (p *poolState) enabled() bool { return p.problem == nil }

// givesAddresses reports whether new addresses may come from the pool.
func (p *poolState) givesAddresses() bool { return p.enabled() && !p.Terminating }

func (p *poolState) hasFamily(f Family) bool { return len(p.merged[familyIndex(f)]) > 0 }

func (p *poolState) contains(a netip.Addr) bool {
	return rangesContain(p.merged[familyIndex(FamilyOf(a))], a)
}

// countsInCapacity reports whether a is part of the pool's capacity: reserved addresses
// are not, nor .0/.255 when the pool avoids them.
func (p *poolState) countsInCapacity(a netip.Addr) bool {
	return !(p.AvoidBuggyIPs && isBuggy(a)) && !rangesContain(p.reserved[familyIndex(FamilyOf(a))], a)
}

// applyReserved sets the pool's reserved addresses, what it may give and its capacity.
func (p *poolState) applyReserved(r *reservedSet) {
	for i := range p.merged {
		p.reserved[i] = intersectRanges(p.merged[i], r.merged[i])
		p.giving[i] = subtractRanges(p.merged[i], p.reserved[i])
		p.capacity[i] = u128{}
		for _, g := range p.giving[i] {
			p.capacity[i] = p.capacity[i].addSat(rangeSize(g))
			if p.AvoidBuggyIPs {
				p.capacity[i] = p.capacity[i].subSat(u128From(buggyCount(g)))
			}
		}
	}
}

// rangesContain searches sorted, disjoint ranges.
func rangesContain(rs []netipx.IPRange, a netip.Addr) bool {
	i := sort.Search(len(rs), func(i int) bool { return a.Less(rs[i].From()) })
	return i > 0 && !rs[i-1].To().Less(a)
}

// mergeRanges sorts ranges of one family and merges overlapping or adjacent ones.
func mergeRanges(rs []netipx.IPRange) []netipx.IPRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b netipx.IPRange) int { return a.From().Compare(b.From()) })
	var out []netipx.IPRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := out[n-1]
			if next := last.To().Next(); !last.To().Less(r.From()) || (next.IsValid() && next == r.From()) {
				if last.To().Less(r.To()) {
					out[n-1] = netipx.IPRangeFrom(last.From(), r.To())
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// olderPool orders pools by age: the older one keeps addresses they both claim.
func olderPool(a, b *poolState) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	if a.Name < b.Name {
		return -1
	}
	if a.Name > b.Name {
		return 1
	}
	return 0
}

// rangeIndex finds the enabled pool that gives out an address. Enabled pools never
// overlap, so the ranges are disjoint.
type rangeIndex []indexedRange

type indexedRange struct {
	r netipx.IPRange
	p *poolState
}

func newRangeIndex(pools []*poolState) rangeIndex {
	var ix rangeIndex
	for _, p := range pools {
		if !p.enabled() {
			continue
		}
		for _, rs := range p.merged {
			for _, r := range rs {
				ix = append(ix, indexedRange{r, p})
			}
		}
	}
	slices.SortFunc(ix, func(a, b indexedRange) int { return a.r.From().Compare(b.r.From()) })
	return ix
}

func (ix rangeIndex) lookup(a netip.Addr) *poolState {
	i := sort.Search(len(ix), func(i int) bool { return a.Less(ix[i].r.From()) })
	if i > 0 && !ix[i-1].r.To().Less(a) {
		return ix[i-1].p
	}
	return nil
}
