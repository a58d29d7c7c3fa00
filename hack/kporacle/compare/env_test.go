//go:build linux

package compare

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"

	"herald.dev/herald/hack/kporacle/oracle"
	"herald.dev/herald/proxy/iptables"
	"herald.dev/herald/proxy/model"
)

// env is one node's configuration and host facts, the same for both families. Every
// choice kube-proxy makes from its flags or by probing the host is made here once and
// handed to both sides: to the oracle as oracle.Options, to herald as iptables.Node.
type env struct {
	nodeIPs []netip.Addr
	// One local-traffic detector at most (--detect-local-mode).
	clusterCIDRs        []string
	bridgeInterface     string
	interfaceNamePrefix string
	masqueradeBit       int // 1..31
	masqueradeAll       bool
	// nodePortAddresses is --nodeport-addresses as kube-proxy takes it: CIDRs or "primary".
	nodePortAddresses  []string
	localhostNodePorts bool
	randomFully        bool
	nfacct             bool
	tcpBeLiberal       bool
	zone               string // the node's topology.kubernetes.io/zone label, "" for none
}

var (
	nodeIPv4  = netip.MustParseAddr("192.168.0.2")
	nodeIPv6  = netip.MustParseAddr("fd00::2")
	nodeIPv4b = netip.MustParseAddr("192.168.1.2")
	nodeIPv6b = netip.MustParseAddr("fd00:1::2")
)

// randomEnv draws a node configuration. Most seeds use kube-proxy's defaults for the
// fields that rarely change; each non-default value still comes up in a fair share of
// the default 50 seeds.
func randomEnv(r *rand.Rand) env {
	e := env{
		masqueradeBit:      14,
		localhostNodePorts: chance(r, 50),
		randomFully:        chance(r, 50),
		nfacct:             chance(r, 50),
		tcpBeLiberal:       chance(r, 25),
		masqueradeAll:      chance(r, 15),
	}
	switch weighted(r, 70, 10, 10, 10) {
	case 0:
		e.nodeIPs = []netip.Addr{nodeIPv4, nodeIPv6}
	case 1:
		e.nodeIPs = []netip.Addr{nodeIPv6, nodeIPv4, nodeIPv4b, nodeIPv6b}
	case 2:
		// No IPv6 node IP: kube-proxy's IPv6 proxier falls back to ::1 as its node IP.
		e.nodeIPs = []netip.Addr{nodeIPv4}
	case 3:
		e.nodeIPs = []netip.Addr{nodeIPv6}
	}
	switch weighted(r, 40, 15, 15, 30) {
	case 0:
		e.clusterCIDRs = pick(r, []string{"10.0.0.0/8", "fd00:10::/64"}, []string{"10.0.0.0/8"},
			[]string{"fd00:10::/64"}, []string{"fd00:10::/64", "10.0.0.0/8", "10.1.0.0/16"})
	case 1:
		e.bridgeInterface = "cbr0"
	case 2:
		e.interfaceNamePrefix = "veth"
	}
	if chance(r, 20) {
		e.masqueradeBit = 1 + r.IntN(31)
	}
	if chance(r, 50) {
		e.nodePortAddresses = pick(r,
			[]string{oracle.NodePortAddressesPrimary},
			[]string{"192.168.0.0/16"},
			[]string{"127.0.0.0/8"},
			[]string{"127.0.0.1/32", "192.168.0.0/24", "fd00::/64"},
			[]string{"0.0.0.0/0"},
			[]string{"::/0", "192.168.1.0/24"},
			[]string{"10.99.0.0/16"},
			[]string{"::1/128", "fd00::/16"},
		)
	}
	if chance(r, 30) {
		e.zone = zoneA
	}
	return e
}

func (e env) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nodeIPs=%v", e.nodeIPs)
	switch {
	case len(e.clusterCIDRs) > 0:
		fmt.Fprintf(&b, " clusterCIDRs=%v", e.clusterCIDRs)
	case e.bridgeInterface != "":
		fmt.Fprintf(&b, " bridge=%s", e.bridgeInterface)
	case e.interfaceNamePrefix != "":
		fmt.Fprintf(&b, " ifPrefix=%s", e.interfaceNamePrefix)
	default:
		b.WriteString(" detector=none")
	}
	fmt.Fprintf(&b, " masqBit=%d masqAll=%v nodePortAddresses=%q localhostNodePorts=%v randomFully=%v nfacct=%v tcpBeLiberal=%v zone=%q",
		e.masqueradeBit, e.masqueradeAll, e.nodePortAddresses, e.localhostNodePorts, e.randomFully, e.nfacct, e.tcpBeLiberal, e.zone)
	return b.String()
}

// oracleOptions is e for kube-proxy's proxier of one family.
func (e env) oracleOptions(fam model.Family) oracle.Options {
	return oracle.Options{
		NodeName:                  localNode,
		IPv6:                      fam == model.IPv6,
		NodeIPs:                   e.nodeIPs,
		ClusterCIDRs:              e.clusterCIDRs,
		BridgeInterface:           e.bridgeInterface,
		InterfaceNamePrefix:       e.interfaceNamePrefix,
		MasqueradeBit:             e.masqueradeBit,
		MasqueradeAll:             e.masqueradeAll,
		NodePortAddresses:         e.nodePortAddresses,
		DisableLocalhostNodePorts: !e.localhostNodePorts,
		NoRandomFully:             !e.randomFully,
		NoNFAcct:                  !e.nfacct,
		ConntrackTCPBeLiberal:     e.tcpBeLiberal,
	}
}

// heraldNode is e for herald's generator (both families: the Snapshot selects one).
func (e env) heraldNode() iptables.Node {
	// kube-proxy's server always has a node IP per family: without a detected one it
	// uses 127.0.0.1 or ::1 (cmd/kube-proxy detectNodeIPs), and the oracle does the same.
	// The loopback shows in KUBE-FW chains when a source range contains it. herald's
	// generator has no such fallback, so the shell must pass it (see
	// deliberateDifferences).
	ips := slices.Clone(e.nodeIPs)
	for _, fam := range []model.Family{model.IPv4, model.IPv6} {
		if _, ok := primaryIP(e.nodeIPs, fam); !ok && os.Getenv("HERALD_ORACLE_NO_LOOPBACK_NODEIP") == "" {
			ips = append(ips, map[model.Family]netip.Addr{model.IPv4: netip.MustParseAddr("127.0.0.1"), model.IPv6: netip.IPv6Loopback()}[fam])
		}
	}
	n := iptables.DefaultNode(localNode, ips...)
	n.Zone = e.zone
	n.MasqueradeBit = e.masqueradeBit
	n.MasqueradeAll = e.masqueradeAll
	n.LocalhostNodePorts = e.localhostNodePorts
	n.RandomFully = e.randomFully
	n.NFAcct = e.nfacct
	n.ConntrackTCPLiberal = e.tcpBeLiberal
	for _, c := range e.clusterCIDRs {
		n.LocalDetector.PodCIDRs = append(n.LocalDetector.PodCIDRs, netip.MustParsePrefix(c))
	}
	n.LocalDetector.BridgeInterface = e.bridgeInterface
	n.LocalDetector.InterfaceNamePrefix = e.interfaceNamePrefix
	// "primary" is kube-proxy's server expanding to the primary node IP of each family
	// (nothing for a family without one: NodePorts then match every local address).
	for _, c := range e.nodePortAddresses {
		if c == oracle.NodePortAddressesPrimary {
			for _, fam := range []model.Family{model.IPv4, model.IPv6} {
				if ip, ok := primaryIP(e.nodeIPs, fam); ok {
					n.NodePortAddresses = append(n.NodePortAddresses, netip.PrefixFrom(ip, ip.BitLen()))
				}
			}
			continue
		}
		n.NodePortAddresses = append(n.NodePortAddresses, netip.MustParsePrefix(c))
	}
	// The oracle's simulated host: lo with 127.0.0.1 and ::1, eth0 with the node IPs.
	n.InterfaceAddrs = append([]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, e.nodeIPs...)
	return n
}

func primaryIP(ips []netip.Addr, fam model.Family) (netip.Addr, bool) {
	for _, ip := range ips {
		if ip.Is4() == (fam == model.IPv4) {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// topologyLabels are the node labels the oracle gets through OnTopologyChange.
func (e env) topologyLabels() map[string]string {
	if e.zone == "" {
		return nil
	}
	return map[string]string{"topology.kubernetes.io/zone": e.zone}
}
