package iptables

import (
	"fmt"
	"net/netip"
	"strings"

	"herald.dev/herald/proxy/model"
)

// Defaults of kube-proxy's configuration (pkg/proxy/apis/config/v1alpha1/defaults.go and
// pkg/proxy/iptables/proxier.go).
const (
	// DefaultMasqueradeBit is --iptables-masquerade-bit's default: mark 0x00004000.
	DefaultMasqueradeBit = model.DefaultMasqueradeBit
	// DefaultLargeClusterEndpoints is largeClusterEndpointsThreshold: above this many
	// endpoints, endpoint rules are written without comments.
	DefaultLargeClusterEndpoints = 1000
)

// Node holds the per-node settings kube-proxy's NewProxier receives, plus the facts it
// probes from the host; the nftables generator reads the same type. Its
// LargeClusterEndpoints of 0 means DefaultLargeClusterEndpoints.
type Node = model.Node

// DefaultNode returns the settings of a kube-proxy started with default flags, except
// LocalhostNodePorts, which herald leaves off (it would need route_localnet=1).
func DefaultNode(name string, ips ...netip.Addr) Node {
	return Node{
		Name:          name,
		IPs:           ips,
		MasqueradeBit: DefaultMasqueradeBit,
	}
}

// ErrInvalidNode reports node settings the generator cannot express.
var ErrInvalidNode = model.ErrInvalidNode

// nodeRules is Node resolved for one family: the strings and switches rules are made of.
type nodeRules struct {
	family   model.Family
	name     string
	zone     string
	nodeIP   netip.Addr // invalid when the node has no IP of the family
	mark     string     // e.g. 0x00004000
	ifLocal  string     // e.g. "-s 10.0.0.0/8"; "" for the no-op detector
	notLocal string     // e.g. "! -s 10.0.0.0/8"
	// masqueradeAll, randomFully, invalidDrop, nfacct mirror the Node fields.
	masqueradeAll bool
	randomFully   bool
	invalidDrop   bool
	nfacct        bool
	// localhostNodePorts is LocalhostNodePorts after kube-proxy's own restrictions.
	localhostNodePorts bool
	// nodePortIPs is nil when NodePorts match every local address.
	nodePortIPs []netip.Addr
	largeAbove  int // negative: never
}

// resolveNode validates n and resolves it for family.
func resolveNode(n *Node, family model.Family) (*nodeRules, error) {
	if err := n.Check(family); err != nil {
		return nil, err
	}
	r := &nodeRules{
		family:        family,
		name:          n.Name,
		zone:          n.Zone,
		nodeIP:        n.NodeIP(family),
		mark:          n.Mark(),
		masqueradeAll: n.MasqueradeAll,
		randomFully:   n.RandomFully,
		invalidDrop:   !n.ConntrackTCPLiberal,
		nfacct:        n.NFAcct,
		largeAbove:    n.LargeClusterEndpoints,
	}
	if r.largeAbove == 0 {
		r.largeAbove = DefaultLargeClusterEndpoints
	}
	if err := r.resolveDetector(&n.LocalDetector); err != nil {
		return nil, err
	}
	r.resolveNodePorts(n)
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
			r.ifLocal, r.notLocal = "-s "+cidr.String(), "! -s "+cidr.String()
		}
	case d.BridgeInterface != "":
		if !validInterfaceName(d.BridgeInterface) {
			return fmt.Errorf("%w: bridge interface %q", ErrInvalidNode, d.BridgeInterface)
		}
		r.ifLocal, r.notLocal = "-i "+d.BridgeInterface, "! -i "+d.BridgeInterface
	case d.InterfaceNamePrefix != "":
		// iptables matches interface prefixes with a trailing "+"; the name including
		// it must still fit IFNAMSIZ.
		if !validInterfaceName(d.InterfaceNamePrefix + "+") {
			return fmt.Errorf("%w: interface name prefix %q", ErrInvalidNode, d.InterfaceNamePrefix)
		}
		match := d.InterfaceNamePrefix + "+"
		r.ifLocal, r.notLocal = "-i "+match, "! -i "+match
	}
	return nil
}

// resolveNodePorts mirrors proxyutil.NewNodePortAddresses and NewProxier: the CIDRs of
// the family decide whether NodePorts match all local addresses and whether localhost
// NodePorts stay enabled.
func (r *nodeRules) resolveNodePorts(n *Node) {
	cidrs := n.NodePortCIDRs(r.family)
	matchAll, hasLoopback := len(cidrs) == 0, len(cidrs) == 0 && r.family == model.IPv4
	var match []netip.Prefix
	for _, p := range cidrs {
		if r.family == model.IPv4 && (p.Addr().IsLoopback() || p.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 0}))) {
			hasLoopback = true
		}
		if p.Bits() == 0 {
			matchAll = true
			break
		}
		match = append(match, p)
	}
	r.localhostNodePorts = n.LocalhostNodePorts && r.family == model.IPv4 && hasLoopback
	if matchAll {
		return
	}
	r.nodePortIPs = n.InterfaceAddrsIn(match)
}

// validInterfaceName accepts what the kernel accepts as an interface name, without
// quotes, which would break the restore input.
func validInterfaceName(name string) bool {
	return model.ValidInterfaceName(name) && !strings.ContainsAny(name, "\"'")
}
