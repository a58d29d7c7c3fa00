package model

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// DefaultMasqueradeBit is kube-proxy's default mark bit (--iptables-masquerade-bit):
// mark 0x00004000.
const DefaultMasqueradeBit = 14

// ErrInvalidNode reports node settings the generators cannot express.
var ErrInvalidNode = errors.New("invalid node settings")

// Node holds the per-node settings kube-proxy's proxiers receive, plus the facts they
// probe from the host (features, sysctls, interface addresses), so that the generators
// stay pure. Both generators read every field but those marked (iptables) or
// (nftables), which only that one reads. The field order is that of the iptables
// snapshots' JSON (testdata), which does not change.
type Node struct {
	// Name is the node name; endpoints whose NodeName equals it are local.
	Name string
	// Zone is the node's topology.kubernetes.io/zone label, for topology hints.
	Zone string
	// IPs are the node's IPs (--node-ip / Node status). The first one of the
	// generated family is kube-proxy's nodeIP: when a loadBalancerSourceRange contains
	// it, traffic looping back from the VIP is allowed through. Unlike kube-proxy,
	// which falls back to 127.0.0.1 or ::1, a family without an IP here has no node IP;
	// herald's runner never programs such a family.
	IPs []netip.Addr
	// LocalDetector says how pod traffic is told apart (--detect-local-mode).
	LocalDetector LocalDetector
	// MasqueradeBit is the mark bit (--iptables-masquerade-bit), 0-31. The zero value
	// is bit 0, not kube-proxy's default; use DefaultMasqueradeBit.
	MasqueradeBit int
	// MasqueradeAll is --masquerade-all: every ClusterIP packet is masqueraded.
	MasqueradeAll bool
	// LocalhostNodePorts (iptables) is --iptables-localhost-nodeports (kube-proxy's
	// default is true). It only takes effect for IPv4 and when NodePortAddresses
	// includes 127.0.0.0/8; it adds the KUBE-FIREWALL anti-martian rule and, with
	// NFAcct, the localhost NodePort counting rules, and drops the "! -d 127.0.0.0/8"
	// NodePort guard. The shell is responsible for setting
	// net.ipv4.conf.all.route_localnet=1.
	LocalhostNodePorts bool
	// NodePortAddresses is --nodeport-addresses, both families. Empty (or containing a
	// zero-length prefix of the family) means NodePorts on every local address (but
	// loopback in nftables mode).
	NodePortAddresses []netip.Prefix
	// InterfaceAddrs are the addresses on the node's interfaces. They are only read when
	// NodePortAddresses restricts NodePorts: those inside NodePortAddresses accept
	// NodePort traffic.
	InterfaceAddrs []netip.Addr
	// RandomFully (iptables) says iptables supports MASQUERADE --random-fully
	// (iptables >= 1.6.2).
	RandomFully bool
	// ConntrackTCPLiberal (iptables) is sysctl net.netfilter.nf_conntrack_tcp_be_liberal
	// != 0, in which case kube-proxy does not install the KUBE-FORWARD INVALID-drop rule.
	ConntrackTCPLiberal bool
	// NFAcct (iptables) says the nfacct counters exist (ct_state_invalid_dropped_pkts,
	// localhost_nps_accepted_pkts), which adds "-m nfacct" matches.
	NFAcct bool
	// LargeClusterEndpoints (iptables) is the endpoint count above which endpoint rules
	// are written without comments. 0 means the generator's default; negative never
	// drops them.
	LargeClusterEndpoints int
	// ServiceCIDRs (nftables) are the cluster's ServiceCIDRs, both families: traffic to
	// an address inside them that is no Service's ClusterIP is dropped. Empty: no such
	// rule (and no JSON field, as in the iptables snapshots).
	ServiceCIDRs []netip.Prefix `json:",omitempty"`
}

// Check refuses what neither generator can express for family: another family, a
// mark bit outside 0-31, more than one local-traffic detector. The errors wrap
// ErrInvalidNode.
func (n *Node) Check(family Family) error {
	if family != IPv4 && family != IPv6 {
		return fmt.Errorf("%w: family %d", ErrInvalidNode, int(family))
	}
	if n.MasqueradeBit < 0 || n.MasqueradeBit > 31 {
		return fmt.Errorf("%w: masquerade bit %d outside 0-31", ErrInvalidNode, n.MasqueradeBit)
	}
	set := 0
	for _, on := range []bool{len(n.LocalDetector.PodCIDRs) > 0, n.LocalDetector.BridgeInterface != "", n.LocalDetector.InterfaceNamePrefix != ""} {
		if on {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("%w: more than one local-traffic detector set", ErrInvalidNode)
	}
	return nil
}

// Mark is the masquerade mark, as kube-proxy writes it: 0x00004000 for bit 14.
func (n *Node) Mark() string {
	return fmt.Sprintf("%#08x", uint32(1)<<n.MasqueradeBit)
}

// NodeIP is kube-proxy's nodeIP of family: the first of IPs in it, unmapped; invalid
// when there is none.
func (n *Node) NodeIP(family Family) netip.Addr {
	for _, ip := range n.IPs {
		if ip = ip.Unmap(); family.Contains(ip) {
			return ip
		}
	}
	return netip.Addr{}
}

// NodePortCIDRs are the valid NodePortAddresses of family, unmapped.
func (n *Node) NodePortCIDRs(family Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range n.NodePortAddresses {
		if p.IsValid() && family.Contains(p.Addr().Unmap()) {
			out = append(out, UnmapPrefix(p))
		}
	}
	return out
}

// PodCIDR is the detector's pod CIDR of family, like kube-proxy: the first of PodCIDRs
// in the family, unmapped; invalid when there is none. An invalid CIDR before it is an
// error wrapping ErrInvalidNode.
func (d *LocalDetector) PodCIDR(family Family) (netip.Prefix, error) {
	for _, p := range d.PodCIDRs {
		if !p.IsValid() {
			return netip.Prefix{}, fmt.Errorf("%w: invalid pod CIDR", ErrInvalidNode)
		}
		if family.Contains(p.Addr().Unmap()) {
			return UnmapPrefix(p), nil
		}
	}
	return netip.Prefix{}, nil
}

// InterfaceAddrsIn are the InterfaceAddrs inside match, unmapped, each once, in the
// order of match: the addresses NodePorts are restricted to. Never nil, since nil
// stands for every local address.
func (n *Node) InterfaceAddrsIn(match []netip.Prefix) []netip.Addr {
	out := []netip.Addr{}
	seen := map[netip.Addr]bool{}
	for _, p := range match {
		for _, ip := range n.InterfaceAddrs {
			if ip = ip.Unmap(); p.Contains(ip) && !seen[ip] {
				seen[ip] = true
				out = append(out, ip)
			}
		}
	}
	return out
}

// ValidInterfaceName says whether the kernel accepts name as an interface name: 1-15
// bytes, not "." or "..", no "/", ":" or whitespace. The generators refuse more,
// what would break their input.
func ValidInterfaceName(name string) bool {
	if len(name) == 0 || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	return !strings.ContainsAny(name, "/: \t\n\r")
}
