package ipam

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"go4.org/netipx"
)

// checkInvariants verifies the allocator's bookkeeping against itself: no IP held by
// incompatible Services, every IP in use counted once in the right pool, free sets
// disjoint from IPs in use and adding up to the capacity, user counts right.
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	for key, al := range a.allocs {
		if al.key != key || len(al.ips) == 0 || len(al.ips) > 2 {
			t.Fatalf("allocation %s: bad shape %+v", key, al)
		}
		if len(al.ips) == 2 && FamilyOf(al.ips[0]) == FamilyOf(al.ips[1]) {
			t.Fatalf("allocation %s holds two %s IPs", key, FamilyOf(al.ips[0]))
		}
		for _, ip := range al.ips {
			st := a.ips[ip]
			if st == nil || !slices.Contains(st.holders, al) {
				t.Fatalf("allocation %s holds %s but the IP does not list it", key, ip)
			}
		}
	}
	var inUse, counted = map[*poolState][2]int64{}, map[*poolState][2]int64{}
	for ip, st := range a.ips {
		if st.addr != ip || len(st.holders) == 0 {
			t.Fatalf("IP %s: bad state %+v", ip, st)
		}
		wantPorts := map[Port]string{}
		for _, h := range st.holders {
			if a.allocs[h.key] != h || !slices.Contains(h.ips, ip) {
				t.Fatalf("IP %s lists holder %s which does not hold it", ip, h.key)
			}
			if h.sharingKey != st.sharingKey || h.backendKey != st.backendKey {
				t.Fatalf("IP %s: holder %s has keys %q/%q, IP has %q/%q", ip, h.key, h.sharingKey, h.backendKey, st.sharingKey, st.backendKey)
			}
			for _, p := range h.ports {
				if other, ok := wantPorts[p]; ok && other != h.key {
					t.Fatalf("IP %s: port %v used by %s and %s", ip, p, other, h.key)
				}
				wantPorts[p] = h.key
			}
		}
		if len(st.holders) > 1 && st.sharingKey == "" {
			t.Fatalf("IP %s shared by %d Services without a sharing key", ip, len(st.holders))
		}
		if !maps.Equal(wantPorts, st.ports) && !(len(wantPorts) == 0 && len(st.ports) == 0) {
			t.Fatalf("IP %s: ports %v, want %v", ip, st.ports, wantPorts)
		}
		if st.home != a.homeOf(ip) {
			t.Fatalf("IP %s counted in %v, want %v", ip, st.home, a.homeOf(ip))
		}
		if g := a.sharing[st.sharingKey][groupKey(st)]; (st.sharingKey != "") != (g != nil && g.ips.Has(st) && st.indexed && st.group == groupKey(st)) {
			t.Fatalf("IP %s: sharing index out of date", ip)
		}
		if p := st.home; p != nil {
			i := familyIndex(FamilyOf(ip))
			c := inUse[p]
			c[i]++
			inUse[p] = c
			if p.countsInCapacity(ip) {
				c := counted[p]
				c[i]++
				counted[p] = c
			}
		}
		if p := a.givers.lookup(ip); p != nil && p.free[familyIndex(FamilyOf(ip))].contains(ip) {
			t.Fatalf("IP %s is in use and free in pool %s", ip, p.Name)
		}
	}
	for key, groups := range a.sharing {
		for gk, g := range groups {
			g.ips.Ascend(func(st *ipState) bool {
				if a.ips[st.addr] != st || st.sharingKey != key || groupKey(st) != gk || canShareGroup(g, st) != nil {
					t.Fatalf("sharing index %q group %q lists %s wrongly: %v %q %q %q %v", key, gk, st.addr, a.ips[st.addr] != st, st.sharingKey, groupKey(st), st.backendKey, canShareGroup(g, st))
				}
				return true
			})
		}
	}
	for name, p := range a.pools {
		if p.inUse != inUse[p] || p.counted != counted[p] {
			t.Fatalf("pool %s: inUse %v counted %v, want %v %v", name, p.inUse, p.counted, inUse[p], counted[p])
		}
		st := a.Stats(name)
		if st.AssignedIPv4 != p.inUse[0] || st.AssignedIPv6 != p.inUse[1] {
			t.Fatalf("pool %s: stats %+v", name, st)
		}
		if !p.enabled() {
			if p.free != [2]*freeSet{} {
				t.Fatalf("disabled pool %s has free sets", name)
			}
			continue
		}
		for i, s := range p.free {
			free := s.usableSize()
			if got := free.addSat(u128From(uint64(p.counted[i] + int64(len(s.withheld))))); got != p.capacity[i] {
				t.Fatalf("pool %s family %d: free %v + counted %d + withheld %d = %v, capacity %v", name, i, free, p.counted[i], len(s.withheld), got, p.capacity[i])
			}
			for w := range s.withheld {
				if !a.conflicts[w] || a.ips[w] != nil || a.givers.lookup(w) != p || !p.countsInCapacity(w) || s.inNeverUsed(w) || s.inRecycled[w] != nil {
					t.Fatalf("pool %s: withheld %s is not a free conflicting address of the pool, or is also free", name, w)
				}
			}
			for _, r := range s.recycledAddrs() {
				if s.inNeverUsed(r.addr) || !p.contains(r.addr) || !p.countsInCapacity(r.addr) {
					t.Fatalf("pool %s: recycled %s is also never-used, outside or buggy", name, r.addr)
				}
			}
			s.neverUsed.Ascend(func(r netipx.IPRange) bool {
				if !p.contains(r.From()) || !p.contains(r.To()) {
					t.Fatalf("pool %s: free range %s outside the pool", name, r)
				}
				return true
			})
		}
	}
	for ip := range a.conflicts {
		if p := a.givers.lookup(ip); p != nil && a.ips[ip] == nil && p.countsInCapacity(ip) {
			if _, ok := p.free[familyIndex(FamilyOf(ip))].withheld[ip]; !ok {
				t.Fatalf("conflicting %s is free in pool %s but not withheld", ip, p.Name)
			}
		}
	}
	users := map[string]int{}
	for _, al := range a.allocs {
		names := map[string]bool{al.pool: true}
		for _, ip := range al.ips {
			if h := a.ips[ip].home; h != nil {
				names[h.Name] = true
			}
		}
		delete(names, "")
		for n := range names {
			users[n]++
		}
		if want := a.resolvePool(al.pool, al.ips); want != al.pool {
			t.Fatalf("allocation %s in pool %q, want %q", al.key, al.pool, want)
		}
	}
	if !maps.Equal(users, a.users) {
		t.Fatalf("users %v, want %v", a.users, users)
	}
}

// contains reports whether a is free here, withheld or not (test helper).
func (s *freeSet) contains(a netip.Addr) bool {
	_, recycled := s.inRecycled[a]
	_, withheld := s.withheld[a]
	return recycled || withheld || s.inNeverUsed(a)
}

func (s *freeSet) inNeverUsed(a netip.Addr) bool {
	found := false
	s.neverUsed.DescendLessOrEqual(netipx.IPRangeFrom(a, a), func(r netipx.IPRange) bool {
		found = !r.To().Less(a)
		return false
	})
	return found
}

// usableSize counts free addresses that can be handed out (not .0/.255 when avoided).
func (s *freeSet) usableSize() u128 {
	n := u128From(uint64(s.recycled.Len()))
	s.neverUsed.Ascend(func(r netipx.IPRange) bool {
		n = n.addSat(rangeSize(r))
		if s.avoidBuggy {
			n = n.subSat(u128From(buggyCount(r)))
		}
		return true
	})
	return n
}

// canShareGroup checks a group's summary against the IP it files.
func canShareGroup(g *shareGroup, st *ipState) error {
	if g.backendKey != st.backendKey || !slices.Equal(g.ports, sortedPorts(st.ports)) {
		return errors.New("group summary differs")
	}
	return nil
}
