package ipam

import (
	"net/netip"
	"slices"
	"strings"
)

// SetConflicts replaces the set of addresses that devices on the network claim (the
// speakers saw a host that is no herald speaker answer ARP/NDP for them) and returns
// the addresses newly in conflict and those no longer in conflict, sorted.
//
// A conflicting address is given to no new allocation: automatic allocation skips it
// and a request for it fails with ErrIPConflict, since the IP would not work. A Service
// that holds it keeps it (an assigned IP is never taken away); the speakers announce it
// again once the device is gone. A conflicting address that becomes free is withheld
// too. When the conflict clears the address is handed out again, after every other free
// address of its pool. O(old + new conflicts).
func (a *Allocator) SetConflicts(ips []netip.Addr) (added, cleared []netip.Addr) {
	next := make(map[netip.Addr]bool, len(ips))
	for _, ip := range ips {
		if ip.IsValid() {
			next[normalizeAddr(ip)] = true
		}
	}
	for ip := range a.conflicts {
		if !next[ip] {
			cleared = append(cleared, ip)
		}
	}
	for ip := range next {
		if !a.conflicts[ip] {
			added = append(added, ip)
		}
	}
	slices.SortFunc(cleared, netip.Addr.Compare)
	slices.SortFunc(added, netip.Addr.Compare)
	for _, ip := range cleared { // in order, so that the recycled queue is deterministic
		delete(a.conflicts, ip)
		if p := a.givers.lookup(ip); p != nil {
			a.freeSeq++
			p.free[familyIndex(FamilyOf(ip))].unwithhold(ip, a.freeSeq)
		}
	}
	for _, ip := range added {
		a.conflicts[ip] = true
		a.withholdIfFree(ip)
	}
	return added, cleared
}

// InConflict reports whether ip is in the set SetConflicts gave.
func (a *Allocator) InConflict(ip netip.Addr) bool { return a.conflicts[normalizeAddr(ip)] }

// HeldIn reports whether a Service of namespace holds ip.
func (a *Allocator) HeldIn(ip netip.Addr, namespace string) bool {
	st := a.ips[normalizeAddr(ip)]
	if st == nil {
		return false
	}
	for _, h := range st.holders {
		if ns, _, _ := strings.Cut(h.key, "/"); ns == namespace {
			return true
		}
	}
	return false
}

// withholdIfFree sets a conflicting address aside when an enabled pool has it free.
func (a *Allocator) withholdIfFree(ip netip.Addr) {
	if p := a.givers.lookup(ip); p != nil && a.ips[ip] == nil && p.countsInCapacity(ip) {
		p.free[familyIndex(FamilyOf(ip))].withhold(ip)
	}
}

// conflictError refuses a requested IP that a device on the network claims.
func conflictError(ip netip.Addr) error {
	return newError(ErrIPConflict, "requested IP %s is in conflict with a device on the network (a host that is not a herald speaker answers for it); it is not assigned while the device holds it", ip)
}
