package ipam

import "net/netip"

// PoolIndex answers which pool an address belongs to, by the rule the allocator counts
// addresses with (homeIn). The speakers take a Service's pool from it, so that the pool
// of an IP follows from the IP and the pools, never from anything the Service's owner
// may edit.
type PoolIndex struct {
	givers rangeIndex
	byAge  []*poolState
}

// NewPoolIndex indexes pools as SetPools would check them: overlaps and invalid ranges
// disable a pool the same way.
func NewPoolIndex(pools []Pool) *PoolIndex {
	byAge, _ := checkPools(pools)
	return &PoolIndex{givers: newRangeIndex(byAge), byAge: byAge}
}

// PoolOf names the pool of ip, or "" when no pool contains it.
func (x *PoolIndex) PoolOf(ip netip.Addr) string {
	if p := homeIn(x.givers, x.byAge, ip.Unmap()); p != nil {
		return p.Name
	}
	return ""
}

// homeIn returns the pool that counts ip: the enabled pool containing it (enabled pools
// never overlap), else the oldest pool containing it, else nil.
func homeIn(givers rangeIndex, byAge []*poolState, ip netip.Addr) *poolState {
	if p := givers.lookup(ip); p != nil {
		return p
	}
	for _, p := range byAge {
		if !p.enabled() && p.contains(ip) {
			return p
		}
	}
	return nil
}
