package ipam

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// selects reports whether a pool's serviceAllocation lets svc use the pool, as MetalLB
// does: namespaces and namespaceSelectors together define the allowed namespaces,
// serviceSelectors are OR-ed, and when both kinds are set both must match. A nil
// Allocation, or one with only a priority, selects every Service.
func selects(al *Allocation, svc Service) bool {
	if al == nil {
		return true
	}
	if len(al.Namespaces) > 0 || len(al.NamespaceSelectors) > 0 {
		if !slices.Contains(al.Namespaces, svc.Namespace) && !anySelectorMatches(al.NamespaceSelectors, svc.NamespaceLabels) {
			return false
		}
	}
	if len(al.ServiceSelectors) > 0 && !anySelectorMatches(al.ServiceSelectors, svc.Labels) {
		return false
	}
	return true
}

func anySelectorMatches(sels []labels.Selector, set map[string]string) bool {
	for _, s := range sels {
		if s != nil && s.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

// priorityRank puts priority 0 ("none") after every other priority.
func priorityRank(al *Allocation) int {
	if al.Priority == 0 {
		return math.MaxInt
	}
	return al.Priority
}

// sortPoolLists orders the pools for automatic allocation: pools with a
// serviceAllocation by priority then name, the others by name.
func (a *Allocator) sortPoolLists() {
	a.pinned, a.unpinned = a.pinned[:0], a.unpinned[:0]
	for _, p := range a.byAge {
		if p.Allocation != nil {
			a.pinned = append(a.pinned, p)
		} else {
			a.unpinned = append(a.unpinned, p)
		}
	}
	slices.SortFunc(a.pinned, func(x, y *poolState) int {
		if c := cmp.Compare(priorityRank(x.Allocation), priorityRank(y.Allocation)); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	slices.SortFunc(a.unpinned, func(x, y *poolState) int { return strings.Compare(x.Name, y.Name) })
}

// autoCandidates lists, in preference order, the pools svc may get an address from
// without asking: autoAssign pools whose serviceAllocation selects it, then autoAssign
// pools without serviceAllocation. A pool whose serviceAllocation does not select svc is
// never used for it.
func (a *Allocator) autoCandidates(svc Service) []*poolState {
	var out []*poolState
	for _, p := range a.pinned {
		if p.AutoAssign && p.givesAddresses() && selects(p.Allocation, svc) {
			out = append(out, p)
		}
	}
	for _, p := range a.unpinned {
		if p.AutoAssign && p.givesAddresses() {
			out = append(out, p)
		}
	}
	return out
}

// usableBy explains why svc may not get new addresses from p (nil when it may). It does
// not look at autoAssign: that only matters for automatic allocation.
func usableBy(p *poolState, svc Service) error {
	switch {
	case p.problem != nil:
		return newError(ErrNoUsablePool, "pool %q gives out no addresses: %s", p.Name, p.problem.Message)
	case p.Terminating:
		return newError(ErrNoUsablePool, "pool %q is being deleted", p.Name)
	case !selects(p.Allocation, svc):
		return newError(ErrNoUsablePool, "the serviceAllocation of pool %q does not select this Service", p.Name)
	}
	return nil
}
