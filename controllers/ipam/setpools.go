package ipam

import (
	"net/netip"
	"slices"

	"go4.org/netipx"
)

// SetPools replaces the pool set and returns the problems that keep pools from giving
// out addresses. A pool whose addresses overlap an older pool (Created, then name) gives
// out nothing; so does a pool whose own entries collide.
//
// Allocations always survive, even when their IPs leave every pool: such IPs are then
// counted in no pool and still given to no one else. An allocation keeps its pool name
// while that pool contains its IPs, else takes the pool that now counts them (or "").
// Recycled addresses that stay in a pool keep their place in the queue; addresses in
// conflict (SetConflicts) are withheld; everything else free is never-used.
func (a *Allocator) SetPools(pools []Pool) []PoolProblem {
	byAge, problems := checkPools(pools)
	if a.sameLayout(byAge) {
		// Only flags changed (autoAssign, terminating, serviceAllocation...): the free
		// sets and counters stay right, so a pool status update costs O(pools).
		for _, np := range byAge {
			p := a.pools[np.Name]
			p.Pool, p.problem = np.Pool, np.problem
		}
		a.sortPoolLists()
		return problems
	}
	a.rebuild(byAge)
	return problems
}

// sameLayout reports whether the new pools hold the same addresses in the same way as
// the current ones, so nothing about free or counted addresses changes.
func (a *Allocator) sameLayout(byAge []*poolState) bool {
	if len(byAge) != len(a.byAge) {
		return false
	}
	for i, np := range byAge {
		p := a.byAge[i]
		if p.Name != np.Name || !p.Created.Equal(np.Created) || p.AvoidBuggyIPs != np.AvoidBuggyIPs ||
			p.enabled() != np.enabled() || !sameMerged(p.merged, np.merged) {
			return false
		}
	}
	return true
}

func sameMerged(x, y [2][]netipx.IPRange) bool {
	return slices.Equal(x[0], y[0]) && slices.Equal(x[1], y[1])
}

// rebuild installs new pool states: it recomputes which pool counts each IP in use,
// rebuilds the free sets (keeping the recycled order, withholding conflicts), re-homes
// allocations and recounts users. O(IPs in use + ranges + conflicts).
func (a *Allocator) rebuild(byAge []*poolState) {
	recycled := a.recycledByAge()

	a.byAge = byAge
	a.pools = make(map[string]*poolState, len(byAge))
	for _, p := range byAge {
		a.pools[p.Name] = p
		p.applyReserved(&a.reserved)
	}
	a.givers = newRangeIndex(byAge)
	a.sortPoolLists()

	// Addresses that may not be never-used in each enabled pool: in use or recycled.
	taken := map[*poolState][]netip.Addr{}
	for ip, st := range a.ips {
		st.home = a.homeOf(ip)
		a.countIP(st, +1)
		if p := a.givers.lookup(ip); p != nil {
			taken[p] = append(taken[p], ip)
		}
	}
	var keepRecycled []recycledAddr
	for _, r := range recycled {
		if p := a.givers.lookup(r.addr); p != nil && a.ips[r.addr] == nil && p.countsInCapacity(r.addr) {
			taken[p] = append(taken[p], r.addr)
			keepRecycled = append(keepRecycled, r)
		}
	}
	for _, p := range byAge {
		if !p.enabled() {
			continue
		}
		points := taken[p]
		slices.SortFunc(points, func(x, y netip.Addr) int { return x.Compare(y) })
		for i := range p.free {
			p.free[i] = newFreeSet(p.AvoidBuggyIPs)
			for _, r := range subtractPoints(p.giving[i], points) {
				p.free[i].addNeverUsed(r)
			}
		}
	}
	for _, r := range keepRecycled { // oldest freed first
		p := a.givers.lookup(r.addr)
		p.free[familyIndex(FamilyOf(r.addr))].recycle(r.addr, r.seq)
	}
	for ip := range a.conflicts {
		a.withholdIfFree(ip)
	}

	clear(a.users)
	for _, al := range a.allocs {
		al.pool = a.resolvePool(al.pool, al.ips)
		a.countUsers(al, +1)
	}
}

// recycledByAge lists the recycled addresses of all current pools, least recently freed
// first.
func (a *Allocator) recycledByAge() []recycledAddr {
	var out []recycledAddr
	for _, p := range a.byAge {
		for _, s := range p.free {
			if s != nil {
				out = append(out, s.recycledAddrs()...)
			}
		}
	}
	slices.SortFunc(out, func(x, y recycledAddr) int {
		switch {
		case x.seq < y.seq:
			return -1
		case x.seq > y.seq:
			return 1
		}
		return 0
	})
	return out
}

// subtractPoints returns the sorted, disjoint ranges rs without the addresses points
// (sorted; may hold duplicates and addresses outside rs).
func subtractPoints(rs []netipx.IPRange, points []netip.Addr) []netipx.IPRange {
	var out []netipx.IPRange
	j := 0
	for _, r := range rs {
		from := r.From()
		for j < len(points) && points[j].Less(r.From()) {
			j++
		}
		exhausted := false
		for ; j < len(points) && !r.To().Less(points[j]); j++ {
			pt := points[j]
			if pt.Less(from) { // duplicate point
				continue
			}
			if from.Less(pt) {
				out = append(out, netipx.IPRangeFrom(from, pt.Prev()))
			}
			if pt == r.To() {
				exhausted = true
				j++
				break
			}
			from = pt.Next()
		}
		if !exhausted {
			out = append(out, netipx.IPRangeFrom(from, r.To()))
		}
	}
	return out
}
