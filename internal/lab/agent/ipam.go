package agent

import (
	"fmt"
	"net/netip"
)

// ipam hands out pod addresses from one of the node's pod CIDRs (one per family), as a
// host-local IPAM plugin would. The first address is the pods' IPv4 gateway (on the
// node) and is never handed out, in an IPv6 CIDR too, so that both families number
// their pods alike (10.244.1.2 and fd00:10:244:1::2).
type ipam struct {
	cidr netip.Prefix
	used map[netip.Addr]bool
}

func newIPAM(cidr netip.Prefix) (*ipam, error) {
	if cidr != cidr.Masked() || cidr.Addr().BitLen()-cidr.Bits() < 2 || cidr.Addr().Zone() != "" {
		return nil, fmt.Errorf("pod CIDR %s: want a network of at least 4 addresses", cidr)
	}
	return &ipam{cidr: cidr, used: map[netip.Addr]bool{}}, nil
}

// gateway is the address IPv4 pods route through: the CIDR's first host address.
func (a *ipam) gateway() netip.Addr { return a.cidr.Addr().Next() }

// allocate returns the lowest free address, skipping the gateway and the last address
// (IPv4's broadcast address), so that a fresh node's first pod gets .2 as in most
// clusters.
func (a *ipam) allocate() (netip.Addr, error) {
	for ip := a.gateway().Next(); a.cidr.Contains(ip); ip = ip.Next() {
		if !a.cidr.Contains(ip.Next()) { // the broadcast address
			break
		}
		if !a.used[ip] {
			a.used[ip] = true
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod CIDR %s is full", a.cidr)
}

func (a *ipam) release(ip netip.Addr) { delete(a.used, ip) }
