package ipam

import (
	"net/netip"
	"slices"
	"strings"
)

// Namespaces are tenants. A Service shares an IP only with Services of its own
// namespace, unless the IP's pool allows sharing across namespaces; a sharing key is
// therefore scoped to its namespace. And no error tells a Service anything about
// another namespace's Services: their names, keys or ports.

// mayShareAcross is the one rule of tenancy: whether a Service of namespace ns may share
// an IP of pool home that namespace owner holds. An IP outside every pool is shared
// within its namespace only.
func mayShareAcross(home *poolState, owner, ns string) bool {
	return owner == ns || (home != nil && home.CrossNamespaceSharing)
}

// ownerNamespace is the namespace an IP in use belongs to, as svc sees it: that of its
// first holder, svc's own when svc is that holder. So when a pool stops allowing
// sharing across namespaces, the first holder keeps the IP and the others move.
func ownerNamespace(st *ipState, svc Service) string {
	if first := st.holders[0].key; first != svc.Key {
		return namespaceOf(first)
	}
	return svc.Namespace
}

// namespaceOf returns the namespace of a Service key (namespace/name).
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// notAvailableError refuses svc an IP it may not have for a reason that lies with
// another namespace or with the pools it may use. It reads the same in every such case,
// so that asking for IPs tells a tenant nothing about other namespaces. kind says when
// to retry; it is not shown.
func notAvailableError(kind error, ip netip.Addr) error {
	return newError(kind, "IP %s is not available to this Service: no pool it may use gives it out, or a Service of another namespace holds it", ip)
}

// NotAllowedToShare lists, sorted, the Services that share an IP with another
// namespace's Service in a pool that does not allow it (any more): their next
// Allocate moves them, and the IP stays with its first holder. O(IPs in use).
func (a *Allocator) NotAllowedToShare() []string {
	var out []string
	for _, st := range a.ips {
		owner := namespaceOf(st.holders[0].key)
		for _, h := range st.holders[1:] {
			if !mayShareAcross(st.home, owner, namespaceOf(h.key)) {
				out = append(out, h.key)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
