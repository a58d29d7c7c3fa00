package iptables

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"herald.dev/herald/proxy/model"
)

// Defaults of kube-proxy's configuration (pkg/proxy/apis/config/v1alpha1/defaults.go and
// pkg/proxy/iptables/proxier.go).
const (
	// DefaultMasqueradeBit is --iptables-masquerade-bit's default: mark 0x00004000.
	DefaultMasqueradeBit = 14
	// DefaultLargeClusterEndpoints is largeClusterEndpointsThreshold: above this many
	// endpoints, endpoint rules are written without comments.
	DefaultLargeClusterEndpoints = 1000
)

// Node holds the per-node settings kube-proxy's NewProxier receives, plus the facts it
// probes from the host (iptables features, sysctls, interface addresses), so that the
// generator stays pure.
type Node struct {
	// Name is the node name; endpoints whose NodeName equals it are local.
	Name string
	// Zone is the node's topology.kubernetes.io/zone label, for topology hints.
	Zone string
	// IPs are the node's IPs (--node-ip / Node status). The first one of the
	// generated family is kube-proxy's nodeIP: when a loadBalancerSourceRange contains
	// it, traffic looping back from the VIP is allowed through KUBE-FW. Unlike
	// kube-proxy, which falls back to 127.0.0.1 or ::1, a family without an IP here has
	// no node IP; herald's runner never programs such a family.
	IPs []netip.Addr
	// LocalDetector says how pod traffic is told apart (--detect-local-mode).
	LocalDetector model.LocalDetector
	// MasqueradeBit is --iptables-masquerade-bit, 0-31. The zero value is bit 0, not
	// kube-proxy's default; use DefaultMasqueradeBit (or DefaultNode).
	MasqueradeBit int
	// MasqueradeAll is --masquerade-all: every ClusterIP packet is masqueraded.
	MasqueradeAll bool
	// LocalhostNodePorts is --iptables-localhost-nodeports (kube-proxy's default is true).
	// It only takes effect for IPv4 and when NodePortAddresses includes 127.0.0.0/8;
	// it adds the KUBE-FIREWALL anti-martian rule and, with NFAcct, the localhost
	// NodePort counting rules, and drops the "! -d 127.0.0.0/8" NodePort guard.
	// The shell is responsible for setting net.ipv4.conf.all.route_localnet=1.
	LocalhostNodePorts bool
	// NodePortAddresses is --nodeport-addresses, both families. Empty (or containing a
	// zero-length prefix of the family) means NodePorts on every local address.
	NodePortAddresses []netip.Prefix
	// InterfaceAddrs are the addresses on the node's interfaces. They are only read when
	// NodePortAddresses restricts NodePorts: those inside NodePortAddresses become the
	// "-d <ip>" destinations of the KUBE-NODEPORTS jump.
	InterfaceAddrs []netip.Addr
	// RandomFully says iptables supports MASQUERADE --random-fully (iptables >= 1.6.2).
	RandomFully bool
	// ConntrackTCPLiberal is sysctl net.netfilter.nf_conntrack_tcp_be_liberal != 0, in
	// which case kube-proxy does not install the KUBE-FORWARD INVALID-drop rule.
	ConntrackTCPLiberal bool
	// NFAcct says the nfacct counters exist (ct_state_invalid_dropped_pkts,
	// localhost_nps_accepted_pkts), which adds "-m nfacct" matches.
	NFAcct bool
	// LargeClusterEndpoints is the endpoint count above which endpoint rules are written
	// without comments. 0 means DefaultLargeClusterEndpoints; negative never drops them.
	LargeClusterEndpoints int
}

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
var ErrInvalidNode = errors.New("invalid node settings")

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
	if family != model.IPv4 && family != model.IPv6 {
		return nil, fmt.Errorf("%w: family %d", ErrInvalidNode, int(family))
	}
	if n.MasqueradeBit < 0 || n.MasqueradeBit > 31 {
		return nil, fmt.Errorf("%w: masquerade bit %d outside 0-31", ErrInvalidNode, n.MasqueradeBit)
	}
	r := &nodeRules{
		family:        family,
		name:          n.Name,
		zone:          n.Zone,
		mark:          fmt.Sprintf("%#08x", uint32(1)<<n.MasqueradeBit),
		masqueradeAll: n.MasqueradeAll,
		randomFully:   n.RandomFully,
		invalidDrop:   !n.ConntrackTCPLiberal,
		nfacct:        n.NFAcct,
		largeAbove:    n.LargeClusterEndpoints,
	}
	if r.largeAbove == 0 {
		r.largeAbove = DefaultLargeClusterEndpoints
	}
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
	return r, nil
}

func (r *nodeRules) resolveDetector(d *model.LocalDetector) error {
	set := 0
	for _, on := range []bool{len(d.PodCIDRs) > 0, d.BridgeInterface != "", d.InterfaceNamePrefix != ""} {
		if on {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("%w: more than one local-traffic detector set", ErrInvalidNode)
	}
	switch {
	case len(d.PodCIDRs) > 0:
		for _, p := range d.PodCIDRs {
			if !p.IsValid() {
				return fmt.Errorf("%w: invalid pod CIDR", ErrInvalidNode)
			}
			if r.family.Contains(p.Addr().Unmap()) {
				cidr := model.UnmapPrefix(p).String()
				r.ifLocal, r.notLocal = "-s "+cidr, "! -s "+cidr
				break
			}
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
	var cidrs []netip.Prefix
	for _, p := range n.NodePortAddresses {
		if p.IsValid() && r.family.Contains(p.Addr().Unmap()) {
			cidrs = append(cidrs, model.UnmapPrefix(p))
		}
	}
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
	r.nodePortIPs = []netip.Addr{}
	seen := map[netip.Addr]bool{}
	for _, p := range match {
		for _, ip := range n.InterfaceAddrs {
			ip = ip.Unmap()
			if p.Contains(ip) && !seen[ip] {
				seen[ip] = true
				r.nodePortIPs = append(r.nodePortIPs, ip)
			}
		}
	}
}

// validInterfaceName accepts what the kernel accepts as an interface name: 1-15 bytes,
// no "/", no whitespace, not "." or "..". Anything else would break the restore input.
func validInterfaceName(name string) bool {
	if len(name) == 0 || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	return !strings.ContainsAny(name, "/ \t\n\r\"':")
}
