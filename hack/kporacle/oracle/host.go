//go:build linux

package oracle

import (
	"fmt"
	"net"
	"net/netip"

	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kpiptables "k8s.io/kubernetes/pkg/proxy/iptables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	"k8s.io/kubernetes/pkg/proxy/util/nfacct"
	proxyutiltest "k8s.io/kubernetes/pkg/proxy/util/testing"
)

// useFakeHost replaces the host handles NewProxier created for itself (see
// inject.go) with fakes: conntrack with kube-proxy's in-memory fake (UDP
// cleanup finds nothing to delete), nfacct with fakeNFAcct, the health-check
// server with kube-proxy's fake (no port is opened for healthCheckNodePorts),
// and the interface list with the addresses in Options.
func useFakeHost(p *kpiptables.Proxier, opts Options) error {
	if _, err := replaceProxierField(p, "conntrack", conntrack.NewFake()); err != nil {
		return err
	}
	probe, err := replaceProxierField[nfacct.Interface](p, "nfacct", newFakeNFAcct(!opts.NoNFAcct))
	if err != nil {
		return err
	}
	closeNFAcctProbeSocket(probe)
	if _, err := replaceProxierField(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer()); err != nil {
		return err
	}
	network, err := fakeNetwork(opts.NodeIPs)
	if err != nil {
		return err
	}
	if _, err := replaceProxierField[proxyutil.NetworkInterfacer](p, "networkInterfacer", network); err != nil {
		return err
	}
	return nil
}

// fakeNetwork is a host with lo (127.0.0.1/8, ::1/128) and eth0 holding
// nodeIPs. kube-proxy reads it only to resolve --nodeport-addresses.
func fakeNetwork(nodeIPs []netip.Addr) (*proxyutiltest.FakeNetwork, error) {
	network := proxyutiltest.NewFakeNetwork()
	network.AddInterfaceAddr(&net.Interface{Index: 1, Name: "lo", Flags: net.FlagUp | net.FlagLoopback}, []net.Addr{
		&net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
	})
	addrs := make([]net.Addr, 0, len(nodeIPs))
	for _, ip := range nodeIPs {
		if !ip.IsValid() {
			return nil, fmt.Errorf("node IP %v is not a valid address", ip)
		}
		ip = ip.Unmap()
		addrs = append(addrs, &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())})
	}
	network.AddInterfaceAddr(&net.Interface{Index: 2, Name: "eth0", Flags: net.FlagUp}, addrs)
	return network, nil
}
