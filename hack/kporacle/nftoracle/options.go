//go:build linux

package nftoracle

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/go-logr/logr"
	"herald.dev/herald/hack/kporacle/internal/kphost"
	v1 "k8s.io/api/core/v1"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	"sigs.k8s.io/knftables"
)

// Options configure the kube-proxy nftables proxier run by an Oracle. The zero
// value of every field but NodeName and NodeIP is kube-proxy's default.
type Options struct {
	// NodeName is kube-proxy's --hostname-override: endpoints whose nodeName
	// equals it are local. Required.
	NodeName string
	// NodeIP is the node's primary IP; its family selects the proxier's
	// (kube-proxy runs one proxier per family). kube-proxy uses it when a
	// loadBalancerSourceRanges CIDR contains it (the LB IP is then allowed as
	// a source too). Required.
	NodeIP net.IP

	// ClusterCIDRs is --cluster-cidr for --detect-local-mode=ClusterCIDR: the
	// first CIDR of the proxier's family is pod traffic. With none of the
	// family, nothing is detected as local, as in kube-proxy.
	ClusterCIDRs []string
	// BridgeInterface is --detect-local-mode=BridgeInterface's bridge: traffic
	// coming in on it is pod traffic. At most one of ClusterCIDRs,
	// BridgeInterface and InterfaceNamePrefix.
	BridgeInterface string
	// InterfaceNamePrefix is --detect-local-mode=InterfaceNamePrefix's prefix.
	InterfaceNamePrefix string
	// MasqueradeBit is --iptables-masquerade-bit (kube-proxy uses it for the
	// nftables mark too), 1 to 31; 0 means kube-proxy's default 14 (mark
	// 0x00004000). Bit 0 cannot be selected.
	MasqueradeBit int
	// MasqueradeAll is --masquerade-all.
	MasqueradeAll bool
	// NodePortAddresses is --nodeport-addresses: CIDRs, or just "primary"
	// (NodeIP). Empty accepts NodePorts on every local address.
	NodePortAddresses []string
	// ServiceCIDRs go to the proxier's OnServiceCIDRsChanged before the first
	// sync (those of other families are dropped by kube-proxy); they fill the
	// cluster-ips-check chain's "service-cidrs" rule. Empty: no such rule.
	ServiceCIDRs []string
	// InterfaceAddrs are the addresses the fake host reports on eth0 (as host
	// prefixes, beside 127.0.0.1/8 and ::1/128 on lo); kube-proxy reads them
	// only to resolve NodePortAddresses CIDRs. Empty means NodeIP alone.
	InterfaceAddrs []net.IP

	// NFT is the nftables the proxier writes to. Nil means a new
	// knftables.NewFake(family, "kube-proxy"); otherwise it is used as is,
	// e.g. knftables.New(family, "kube-proxy") run inside a network namespace
	// (see InNetNS). Its family and table must be the proxier's.
	NFT knftables.Interface

	// Logger receives kube-proxy's log lines; the zero value discards them.
	Logger logr.Logger
}

// proxierParams are Options resolved into NewProxier's arguments.
type proxierParams struct {
	family            v1.IPFamily
	nftFamily         knftables.Family
	nodeIP            net.IP
	localDetector     proxyutil.LocalTrafficDetector
	masqueradeBit     int
	nodePortAddresses []string
	interfaceAddrs    []netip.Addr
}

// resolve validates opts and applies kube-proxy's defaults.
func (opts Options) resolve() (proxierParams, error) {
	var params proxierParams
	if opts.NodeName == "" {
		return params, errors.New("NodeName is required")
	}
	nodeIP, ok := netip.AddrFromSlice(opts.NodeIP)
	if !ok {
		return params, fmt.Errorf("NodeIP %q is not an IP address (it is required: it selects the family)", opts.NodeIP)
	}
	nodeIP = nodeIP.Unmap()
	params.nodeIP = net.IP(nodeIP.AsSlice())
	params.family, params.nftFamily = v1.IPv4Protocol, knftables.IPv4Family
	if nodeIP.Is6() {
		params.family, params.nftFamily = v1.IPv6Protocol, knftables.IPv6Family
	}
	var err error
	if params.masqueradeBit, err = kphost.MasqueradeBit(opts.MasqueradeBit); err != nil {
		return params, err
	}
	if params.localDetector, err = kphost.LocalDetector(nodeIP.Is6(), opts.ClusterCIDRs, opts.BridgeInterface, opts.InterfaceNamePrefix); err != nil {
		return params, err
	}
	if params.nodePortAddresses, err = kphost.NodePortAddresses(opts.NodePortAddresses, params.nodeIP); err != nil {
		return params, err
	}
	for _, cidr := range opts.ServiceCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			return params, fmt.Errorf("ServiceCIDRs: %w", err)
		}
	}
	params.interfaceAddrs = []netip.Addr{nodeIP}
	if len(opts.InterfaceAddrs) > 0 {
		params.interfaceAddrs = params.interfaceAddrs[:0]
		for _, ip := range opts.InterfaceAddrs {
			addr, ok := netip.AddrFromSlice(ip)
			if !ok {
				return params, fmt.Errorf("InterfaceAddrs: %q is not an IP address", ip)
			}
			params.interfaceAddrs = append(params.interfaceAddrs, addr.Unmap())
		}
	}
	return params, nil
}
