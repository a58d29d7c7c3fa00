package nftables

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"herald.dev/herald/proxy/model"
)

// DefaultMasqueradeBit is kube-proxy's default mark bit: 0x00004000.
const DefaultMasqueradeBit = 14

// Node holds the per-node settings of kube-proxy's nftables proxier, plus what it
// probes from the host, so that generation stays pure.
type Node struct {
	// Name is the node name; endpoints whose NodeName equals it are local.
	Name string
	// Zone is the node's topology.kubernetes.io/zone label, for topology hints.
	Zone string
	// IPs are the node's IPs; the first of the family is kube-proxy's nodeIP, which
	// decides whether a loadBalancerSourceRange also lets the node's own traffic through.
	IPs []netip.Addr
	// LocalDetector says how pod traffic is told apart (--detect-local-mode).
	LocalDetector model.LocalDetector
	// MasqueradeBit is the mark bit, 0-31 (kube-proxy's default is DefaultMasqueradeBit).
	MasqueradeBit int
	// MasqueradeAll masquerades every ClusterIP packet.
	MasqueradeAll bool
	// NodePortAddresses is --nodeport-addresses, both families; empty means NodePorts on
	// every local address but loopback.
	NodePortAddresses []netip.Prefix
	// InterfaceAddrs are the node's interface addresses; those inside NodePortAddresses
	// accept NodePort traffic.
	InterfaceAddrs []netip.Addr
	// ServiceCIDRs are the cluster's ServiceCIDRs, both families: traffic to an address
	// inside them that is no Service's ClusterIP is dropped. Empty: no such rule.
	ServiceCIDRs []netip.Prefix
}

// ErrInvalidNode reports node settings that cannot be expressed.
var ErrInvalidNode = errors.New("invalid node settings")

// nodeRules is Node resolved for one family: the words rules are made of.
type nodeRules struct {
	family   model.Family
	topology model.Topology
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	// noLocalhost keeps NodePorts off the loopback addresses.
	noLocalhost string
	nodeIP      netip.Addr // invalid when the node has no IP of the family
	mark        string     // e.g. 0x004000
	masquerade  string     // "mark set mark or 0x004000"
	// ifLocal and ifNotLocal match pod traffic and the rest; empty without a detector.
	ifLocal, ifNotLocal []string
	masqueradeAll       bool
	// nodePortIPs is nil when NodePorts match every local address.
	nodePortIPs  []netip.Addr
	serviceCIDRs string // "10.96.0.0/16,..." or ""
}

func resolveNode(n *Node, family model.Family) (*nodeRules, error) {
	if family != model.IPv4 && family != model.IPv6 {
		return nil, fmt.Errorf("%w: family %d", ErrInvalidNode, int(family))
	}
	if n.MasqueradeBit < 0 || n.MasqueradeBit > 31 {
		return nil, fmt.Errorf("%w: masquerade bit %d outside 0-31", ErrInvalidNode, n.MasqueradeBit)
	}
	r := &nodeRules{
		family:        family,
		topology:      model.Topology{Node: n.Name, Zone: n.Zone},
		ipX:           "ip",
		addrType:      "ipv4_addr",
		noLocalhost:   "ip daddr != 127.0.0.0/8",
		mark:          fmt.Sprintf("%#08x", uint32(1)<<n.MasqueradeBit),
		masqueradeAll: n.MasqueradeAll,
	}
	if family == model.IPv6 {
		r.ipX, r.addrType, r.noLocalhost = "ip6", "ipv6_addr", "ip6 daddr != ::1"
	}
	r.masquerade = "mark set mark or " + r.mark
	for _, ip := range n.IPs {
		if ip = ip.Unmap(); family.Contains(ip) {
			r.nodeIP = ip
			break
		}
	}
	if err := r.resolveDetector(&n.LocalDetector); err != nil {
		return nil, err
	}
	r.resolveNodePorts(n)
	var cidrs []string
	for _, p := range n.ServiceCIDRs {
		if p.IsValid() && family.Contains(p.Addr().Unmap()) {
			cidrs = append(cidrs, model.UnmapPrefix(p).String())
		}
	}
	r.serviceCIDRs = strings.Join(cidrs, ",")
	return r, nil
}

func (r *nodeRules) resolveDetector(d *model.LocalDetector) error {
	set := 0
	for _, on := range []bool{len(d.PodCIDRs) > 0, d.BridgeInterface != "", d.InterfaceNamePrefix != ""} {
		if on {
			set++
		}
	}
	switch {
	case set > 1:
		return fmt.Errorf("%w: more than one local-traffic detector set", ErrInvalidNode)
	case len(d.PodCIDRs) > 0:
		for _, p := range d.PodCIDRs {
			if !p.IsValid() {
				return fmt.Errorf("%w: invalid pod CIDR", ErrInvalidNode)
			}
			if r.family.Contains(p.Addr().Unmap()) {
				cidr := model.UnmapPrefix(p).String()
				r.ifLocal, r.ifNotLocal = []string{r.ipX, "saddr", cidr}, []string{r.ipX, "saddr", "!=", cidr}
				break
			}
		}
	case d.BridgeInterface != "":
		if !validInterfaceName(d.BridgeInterface) {
			return fmt.Errorf("%w: bridge interface %q", ErrInvalidNode, d.BridgeInterface)
		}
		r.ifLocal, r.ifNotLocal = []string{"iifname", d.BridgeInterface}, []string{"iifname", "!=", d.BridgeInterface}
	case d.InterfaceNamePrefix != "":
		if !validInterfaceName(d.InterfaceNamePrefix) {
			return fmt.Errorf("%w: interface name prefix %q", ErrInvalidNode, d.InterfaceNamePrefix)
		}
		match := d.InterfaceNamePrefix + "*"
		r.ifLocal, r.ifNotLocal = []string{"iifname", match}, []string{"iifname", "!=", match}
	}
	return nil
}

// resolveNodePorts mirrors proxyutil.NodePortAddresses: the CIDRs of the family decide
// whether NodePorts match every local address, or only the interface addresses inside
// them (never loopback: kube-proxy's nftables mode has no localhost NodePorts).
func (r *nodeRules) resolveNodePorts(n *Node) {
	var match []netip.Prefix
	for _, p := range n.NodePortAddresses {
		if !p.IsValid() || !r.family.Contains(p.Addr().Unmap()) {
			continue
		}
		if p = model.UnmapPrefix(p); p.Bits() == 0 {
			return
		}
		match = append(match, p)
	}
	if len(match) == 0 {
		return
	}
	r.nodePortIPs = []netip.Addr{}
	seen := map[netip.Addr]bool{}
	for _, p := range match {
		for _, ip := range n.InterfaceAddrs {
			if ip = ip.Unmap(); p.Contains(ip) && !seen[ip] && !ip.IsLoopback() {
				seen[ip] = true
				r.nodePortIPs = append(r.nodePortIPs, ip)
			}
		}
	}
}

// validInterfaceName accepts what the kernel accepts as an interface name: 1-15 bytes,
// no "/", whitespace or quotes, which would break the nft input.
func validInterfaceName(name string) bool {
	if len(name) == 0 || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	return !strings.ContainsAny(name, "/ \t\n\r\"':;{}*")
}
