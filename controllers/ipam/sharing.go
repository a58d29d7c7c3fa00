package ipam

import (
	"fmt"
	"net/netip"
)

// ipState is one IP in use. All holders have the same sharing and backend key (only a
// sole holder may change them) and disjoint ports.
type ipState struct {
	addr       netip.Addr
	holders    []*allocation // oldest first
	sharingKey string
	backendKey string
	ports      map[Port]string // port -> key of the Service using it
	// home is the pool that counts this IP in its stats, nil if none contains it.
	home *poolState
	// group is where shareIndex files the IP, if indexed.
	group   string
	indexed bool
}

// sharingAnnotation is named in errors so the user knows what to change: the
// annotation the Service set its key with, or herald's when it set none.
func sharingAnnotation(svc Service) string {
	if svc.SharingKeyFrom != "" {
		return svc.SharingKeyFrom
	}
	return "herald.dev/allow-shared-ip"
}

// canShare reports why svc may not hold st's IP alongside its other holders (nil when
// it may). svc's own holding does not count: a sole holder may change its keys. Errors
// name other Services only when they are of svc's namespace.
func canShare(st *ipState, svc Service) error {
	var other *allocation
	for _, h := range st.holders {
		if h.key != svc.Key {
			other = h
			break
		}
	}
	if other == nil {
		return nil
	}
	if !mayShareAcross(st.home, ownerNamespace(st, svc), svc.Namespace) {
		return notAvailableError(ErrIPInUse, st.addr)
	}
	// Past here the pool may let namespaces share; a refusal because of another
	// namespace's Service still says nothing about it.
	foreign := func(key string) bool { return namespaceOf(key) != svc.Namespace }
	if svc.SharingKey == "" || svc.SharingKey != st.sharingKey {
		if foreign(other.key) {
			return notAvailableError(ErrIPInUse, st.addr)
		}
		return newError(ErrIPInUse, "IP %s is in use by %s with sharing key %q (need the same non-empty %s key)",
			st.addr, other.key, st.sharingKey, sharingAnnotation(svc))
	}
	if svc.BackendKey != st.backendKey {
		if foreign(other.key) {
			return notAvailableError(ErrIPInUse, st.addr)
		}
		return newError(ErrIPInUse, "IP %s is in use by %s with %s, this Service has %s (Services sharing an IP need the same externalTrafficPolicy, and for Local the same selector)",
			st.addr, other.key, describeBackend(st.backendKey), describeBackend(svc.BackendKey))
	}
	for _, p := range svc.Ports {
		if user, ok := st.ports[p]; ok && user != svc.Key {
			if foreign(user) {
				return notAvailableError(ErrIPInUse, st.addr)
			}
			return newError(ErrIPInUse, "port %s/%d already used by %s on %s", p.Protocol, p.Port, user, st.addr)
		}
	}
	return nil
}

func describeBackend(backendKey string) string {
	if backendKey == "" {
		return "externalTrafficPolicy Cluster"
	}
	return fmt.Sprintf("externalTrafficPolicy Local and selector %q", backendKey)
}
