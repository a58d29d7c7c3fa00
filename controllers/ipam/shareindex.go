package ipam

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"

	"github.com/google/btree"
)

// shareIndex finds an IP a sharing Service may join without scanning the IPs in use.
// IPs held with a sharing key are grouped by that key, then by the namespace owning
// them (ownerNamespace), backend key and the set of ports in use on them. The IPs of one group are alike for the sharing check, so it
// runs once per group, and each group keeps its IPs ordered by address. Groups are few
// in practice: Services sharing a key tend to use the same ports.
type shareIndex map[string]map[string]*shareGroup // sharing key -> group key -> group

type shareGroup struct {
	namespace  string
	backendKey string
	ports      []Port
	ips        *btree.BTreeG[*ipState]
}

func (ix shareIndex) add(st *ipState) {
	if st.sharingKey == "" {
		return
	}
	groups := ix[st.sharingKey]
	if groups == nil {
		groups = map[string]*shareGroup{}
		ix[st.sharingKey] = groups
	}
	st.group, st.indexed = groupKey(st), true
	g := groups[st.group]
	if g == nil {
		g = &shareGroup{
			namespace:  namespaceOf(st.holders[0].key),
			backendKey: st.backendKey,
			ports:      sortedPorts(st.ports),
			ips:        btree.NewG(16, func(x, y *ipState) bool { return x.addr.Less(y.addr) }),
		}
		groups[st.group] = g
	}
	g.ips.ReplaceOrInsert(st)
}

func (ix shareIndex) remove(st *ipState) {
	if !st.indexed {
		return
	}
	groups := ix[st.sharingKey]
	if g := groups[st.group]; g != nil {
		g.ips.Delete(st)
		if g.ips.Len() == 0 {
			delete(groups, st.group)
		}
	}
	if len(groups) == 0 {
		delete(ix, st.sharingKey)
	}
	st.group, st.indexed = "", false
}

// candidate returns the lowest IP of family f in pool p that svc may share, skipping
// the IPs in conflict (few: each costs one step of the walk). p counts every IP it
// walks, so p decides whether namespaces share.
func (ix shareIndex) candidate(p *poolState, svc Service, f Family, conflicts map[netip.Addr]bool) (netip.Addr, bool) {
	if svc.SharingKey == "" {
		return netip.Addr{}, false
	}
	var best netip.Addr
	for _, g := range ix[svc.SharingKey] {
		if !mayShareAcross(p, g.namespace, svc.Namespace) || g.backendKey != svc.BackendKey || slices.ContainsFunc(svc.Ports, func(x Port) bool { return slices.Contains(g.ports, x) }) {
			continue
		}
		if ip, ok := g.lowestIn(p, f, conflicts); ok && (!best.IsValid() || ip.Less(best)) {
			best = ip
		}
	}
	return best, best.IsValid()
}

// lowestIn returns the group's lowest IP inside p's ranges of family f that p may give
// and that is not in conflict.
func (g *shareGroup) lowestIn(p *poolState, f Family, conflicts map[netip.Addr]bool) (netip.Addr, bool) {
	var found netip.Addr
	for _, r := range p.merged[familyIndex(f)] {
		g.ips.AscendGreaterOrEqual(&ipState{addr: r.From()}, func(st *ipState) bool {
			if r.To().Less(st.addr) {
				return false
			}
			if p.countsInCapacity(st.addr) && !conflicts[st.addr] {
				found = st.addr
				return false
			}
			return true
		})
		if found.IsValid() {
			return found, true
		}
	}
	return netip.Addr{}, false
}

// groupKey names the group of an IP: owning namespace, backend key and sorted ports.
func groupKey(st *ipState) string {
	b := []byte(namespaceOf(st.holders[0].key))
	b = append(append(b, 0), st.backendKey...)
	for _, p := range sortedPorts(st.ports) {
		b = append(b, 0)
		b = append(b, p.Protocol...)
		b = strconv.AppendInt(append(b, '/'), int64(p.Port), 10)
	}
	return string(b)
}

func sortedPorts(m map[Port]string) []Port {
	out := make([]Port, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y Port) int {
		if c := cmp.Compare(x.Protocol, y.Protocol); c != 0 {
			return c
		}
		return cmp.Compare(x.Port, y.Port)
	})
	return out
}
