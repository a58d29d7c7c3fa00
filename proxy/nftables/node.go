package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"herald.dev/herald/proxy/model"
)

// DefaultMasqueradeBit is kube-proxy's default mark bit: 0x00004000.
const DefaultMasqueradeBit = model.DefaultMasqueradeBit

// Node holds the per-node settings of kube-proxy's nftables proxier, plus what it
// probes from the host; the iptables generator reads the same type, and the fields
// only it reads (LocalhostNodePorts, RandomFully, ConntrackTCPLiberal, NFAcct,
// LargeClusterEndpoints) are ignored here.
type Node = model.Node

// ErrInvalidNode reports node settings that cannot be expressed.
var ErrInvalidNode = model.ErrInvalidNode

// nodeRules is Node resolved for one family: the words rules are made of.
type nodeRules struct {
	family   model.Family
	topology model.Topology
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	// noLocalhost keeps NodePorts off the loopback addresses.
	noLocalhost string
	nodeIP      netip.Addr // invalid when the node has no IP of the family
	mark        string     // e.g. 0x00004000
	masquerade  string     // "mark set mark or 0x00004000"
	// ifLocal and ifNotLocal match pod traffic and the rest; empty without a detector.
	ifLocal, ifNotLocal []string
	masqueradeAll       bool
	// nodePortIPs is nil when NodePorts match every local address.
	nodePortIPs  []netip.Addr
	serviceCIDRs string // "10.96.0.0/16,..." or ""
}

func resolveNode(n *Node, family model.Family) (*nodeRules, error) {
	if err := n.Check(family); err != nil {
		return nil, err
	}
	r := &nodeRules{
		family:        family,
		topology:      model.Topology{Node: n.Name, Zone: n.Zone},
		ipX:           "ip",
		addrType:      "ipv4_addr",
		noLocalhost:   "ip daddr != 127.0.0.0/8",
		nodeIP:        n.NodeIP(family),
		mark:          n.Mark(),
		masqueradeAll: n.MasqueradeAll,
	}
	if family == model.IPv6 {
		r.ipX, r.addrType, r.noLocalhost = "ip6", "ipv6_addr", "ip6 daddr != ::1"
	}
	r.masquerade = "mark set mark or " + r.mark
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

// resolveDetector writes the detector's matches; Node.Check allowed one detector at most.
func (r *nodeRules) resolveDetector(d *model.LocalDetector) error {
	switch {
	case len(d.PodCIDRs) > 0:
		cidr, err := d.PodCIDR(r.family)
		if err != nil {
			return err
		}
		if cidr.IsValid() {
			r.ifLocal, r.ifNotLocal = []string{r.ipX, "saddr", cidr.String()}, []string{r.ipX, "saddr", "!=", cidr.String()}
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
	for _, p := range n.NodePortCIDRs(r.family) {
		if p.Bits() == 0 {
			return
		}
		match = append(match, p)
	}
	if len(match) == 0 {
		return
	}
	r.nodePortIPs = slices.DeleteFunc(n.InterfaceAddrsIn(match), netip.Addr.IsLoopback)
}

// validInterfaceName accepts what the kernel accepts as an interface name, without
// quotes, ";", braces or "*", which would break the nft input.
func validInterfaceName(name string) bool {
	return model.ValidInterfaceName(name) && !strings.ContainsAny(name, "\"';{}*")
}
