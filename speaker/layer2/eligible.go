package layer2

import (
	"net"
	"regexp"
)

// DefaultExcludeInterfaces is the default of the exclude-interfaces flag: a regular
// expression over interface names that are never answered on. It covers loopback and
// the devices container runtimes and CNI plugins create, whose addresses clients on the
// LAN never look for:
//
//	lo                              loopback
//	veth*                           container end of veth pairs (most CNIs)
//	cali*, vxlan.calico, tunl*      Calico workload devices, VXLAN and IPIP tunnels
//	flannel*                        flannel VXLAN device (flannel.1)
//	cni*, cbr*                      bridge and ptp CNI plugins, kubenet
//	docker*                         Docker bridge
//	lxc*, cilium_*                  Cilium endpoints and host devices
//	kube-ipvs*, nodelocaldns        kube-proxy IPVS dummy, NodeLocal DNSCache
//	virbr*, lxcbr*, dummy*          libvirt and LXC bridges, dummy devices
//
// The list follows MetalLB's default exclude list (plus Cilium's lxc and cilium_
// devices, https://github.com/metallb/metallb/issues/2864) with the devices the issue names first.
const DefaultExcludeInterfaces = `^(lo|veth.*|cali.*|flannel.*|cni.*|docker.*|cbr.*|lxc.*|cilium_.*|tunl.*|vxlan\.calico|kube-ipvs.*|nodelocaldns|virbr.*|lxcbr.*|dummy.*)$`

// defaultExclude is DefaultExcludeInterfaces compiled.
var defaultExclude = regexp.MustCompile(DefaultExcludeInterfaces)

// Facts is what eligibility needs to know about one interface. net.Interface gives the
// name, index, MAC and the up/running/broadcast/multicast/loopback flags; the rest
// comes from /sys/class/net (see ReadInterfaces).
type Facts struct {
	net.Interface
	// NoARP: the IFF_NOARP flag is set (/sys/class/net/<if>/flags & 0x80); such an
	// interface does no neighbour resolution, for IPv4 or IPv6.
	NoARP bool
	// Slave: the interface has a master (/sys/class/net/<if>/master exists): it is a
	// bond or bridge port (or OVS/team port), and its master is the device to answer on.
	Slave bool
	// IPv6: the interface has an IPv6 address (normally its fe80::/64 link-local), so
	// IPv6 is enabled on it and solicited-node groups can be joined.
	IPv6 bool
}

// Eligibility is the verdict on one interface: which responders it gets, or why none.
type Eligibility struct {
	ARP bool
	NDP bool
	// Reason is empty when eligible for at least one protocol, else one of:
	// excluded, loopback, down, noarp, slave, no-mac, no-broadcast-no-ipv6.
	Reason string
}

// Eligible decides whether to run responders on an interface. exclude matches names
// never used (nil means DefaultExcludeInterfaces). In order: excluded by name,
// loopback, not up and running, NOARP, bond/bridge slave, no 6-byte Ethernet MAC.
// An interface that passes gets an ARP responder if it has the broadcast flag, and an
// NDP responder if it has IPv6 and the multicast flag.
func Eligible(f Facts, exclude *regexp.Regexp) Eligibility {
	if exclude == nil {
		exclude = defaultExclude
	}
	switch {
	case exclude.MatchString(f.Name):
		return Eligibility{Reason: "excluded"}
	case f.Flags&net.FlagLoopback != 0:
		return Eligibility{Reason: "loopback"}
	case f.Flags&net.FlagUp == 0 || f.Flags&net.FlagRunning == 0:
		return Eligibility{Reason: "down"}
	case f.NoARP:
		return Eligibility{Reason: "noarp"}
	case f.Slave:
		return Eligibility{Reason: "slave"}
	case len(f.HardwareAddr) != 6:
		return Eligibility{Reason: "no-mac"}
	}
	e := Eligibility{
		ARP: f.Flags&net.FlagBroadcast != 0,
		NDP: f.IPv6 && f.Flags&net.FlagMulticast != 0,
	}
	if !e.ARP && !e.NDP {
		e.Reason = "no-broadcast-no-ipv6"
	}
	return e
}
