package ipam

import (
	"container/list"
	"maps"
	"net/netip"
	"slices"

	"github.com/google/btree"
	"go4.org/netipx"
)

// freeSet holds the free addresses of one family of one pool in two tiers:
//   - neverUsed: disjoint ranges in a btree ordered by first address, so the lowest
//     never-used address is found in O(log n) and a /64 costs one node;
//   - recycled: addresses freed since the allocator started, least recently freed
//     first, with O(1) removal of any member (a requested IP may be taken from the
//     middle).
//
// Addresses are handed out from neverUsed while any is left, so a freed address is not
// given to the next Service at once.
//
// Free addresses that a device on the network claims (Allocator.SetConflicts) are kept
// aside in withheld, in neither tier, so that next never meets them: finding a free
// address stays O(log n) however many addresses are in conflict.
type freeSet struct {
	avoidBuggy bool
	neverUsed  *btree.BTreeG[netipx.IPRange]
	recycled   *list.List // of recycledAddr, front = least recently freed
	inRecycled map[netip.Addr]*list.Element
	withheld   map[netip.Addr]struct{}
}

// recycledAddr remembers when an address was freed (a global sequence number) so the
// order survives rebuilding the free sets in SetPools.
type recycledAddr struct {
	addr netip.Addr
	seq  uint64
}

func newFreeSet(avoidBuggy bool) *freeSet {
	return &freeSet{
		avoidBuggy: avoidBuggy,
		neverUsed: btree.NewG(32, func(a, b netipx.IPRange) bool {
			return a.From().Less(b.From())
		}),
		recycled:   list.New(),
		inRecycled: map[netip.Addr]*list.Element{},
		withheld:   map[netip.Addr]struct{}{},
	}
}

// addNeverUsed adds a range; the caller keeps ranges disjoint.
func (s *freeSet) addNeverUsed(r netipx.IPRange) {
	s.neverUsed.ReplaceOrInsert(r)
}

// next returns the address to hand out next without taking it: the lowest never-used
// one, else the least recently freed one.
func (s *freeSet) next() (netip.Addr, bool) {
	if a, ok := s.lowestNeverUsed(); ok {
		return a, true
	}
	if e := s.recycled.Front(); e != nil {
		return e.Value.(recycledAddr).addr, true
	}
	return netip.Addr{}, false
}

// lowestNeverUsed drops .0/.255 addresses from the front of the tree on the way when
// avoidBuggy is set: they can never be handed out, and each is dropped once.
func (s *freeSet) lowestNeverUsed() (netip.Addr, bool) {
	for {
		r, ok := s.neverUsed.Min()
		if !ok {
			return netip.Addr{}, false
		}
		if !s.avoidBuggy {
			return r.From(), true
		}
		first, ok := firstNonBuggy(r)
		if first == r.From() {
			return first, true
		}
		s.neverUsed.Delete(r)
		if ok {
			s.neverUsed.ReplaceOrInsert(netipx.IPRangeFrom(first, r.To()))
			return first, true
		}
	}
}

// firstNonBuggy returns the first address of r not ending in .0 or .255: at most two
// steps (x.x.x.255 then x.x.y.0).
func firstNonBuggy(r netipx.IPRange) (netip.Addr, bool) {
	a := r.From()
	for isBuggy(a) {
		if a == r.To() {
			return netip.Addr{}, false
		}
		a = a.Next()
	}
	return a, true
}

// take removes a from the set, withheld or not; it reports false if a was not free here.
func (s *freeSet) take(a netip.Addr) bool {
	if _, ok := s.withheld[a]; ok {
		delete(s.withheld, a)
		return true
	}
	if e, ok := s.inRecycled[a]; ok {
		s.recycled.Remove(e)
		delete(s.inRecycled, a)
		return true
	}
	var holder netipx.IPRange
	s.neverUsed.DescendLessOrEqual(netipx.IPRangeFrom(a, a), func(r netipx.IPRange) bool {
		holder = r
		return false
	})
	if !holder.IsValid() || holder.To().Less(a) {
		return false
	}
	s.neverUsed.Delete(holder)
	if holder.From() != a {
		s.neverUsed.ReplaceOrInsert(netipx.IPRangeFrom(holder.From(), a.Prev()))
	}
	if holder.To() != a {
		s.neverUsed.ReplaceOrInsert(netipx.IPRangeFrom(a.Next(), holder.To()))
	}
	return true
}

// recycle puts a freed address at the back of the recycled queue.
func (s *freeSet) recycle(a netip.Addr, seq uint64) {
	if _, ok := s.inRecycled[a]; ok {
		return
	}
	s.inRecycled[a] = s.recycled.PushBack(recycledAddr{addr: a, seq: seq})
}

// recycledAddrs lists the recycled queue, least recently freed first.
func (s *freeSet) recycledAddrs() []recycledAddr {
	out := make([]recycledAddr, 0, s.recycled.Len())
	for e := s.recycled.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(recycledAddr))
	}
	return out
}

// withhold moves a free address aside, out of reach of next; it reports false if a was
// not free here.
func (s *freeSet) withhold(a netip.Addr) bool {
	if !s.take(a) {
		return false
	}
	s.withheld[a] = struct{}{}
	return true
}

// addWithheld puts a freed address that is in conflict straight aside.
func (s *freeSet) addWithheld(a netip.Addr) {
	s.withheld[a] = struct{}{}
}

// unwithhold puts a withheld address back at the back of the recycled queue, so that it
// is handed out after every other free address: the device that claimed it may come
// back (a host switched off for the night). It reports false if a was not withheld.
func (s *freeSet) unwithhold(a netip.Addr, seq uint64) bool {
	if _, ok := s.withheld[a]; !ok {
		return false
	}
	delete(s.withheld, a)
	s.recycle(a, seq)
	return true
}

// withheldAddrs lists the withheld addresses in ascending order.
func (s *freeSet) withheldAddrs() []netip.Addr {
	return slices.SortedFunc(maps.Keys(s.withheld), netip.Addr.Compare)
}
