//go:build linux

package oracle

import (
	"herald.dev/herald/hack/kporacle/internal/kphost"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kpiptables "k8s.io/kubernetes/pkg/proxy/iptables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	"k8s.io/kubernetes/pkg/proxy/util/nfacct"
)

// useFakeHost replaces the host handles NewProxier created for itself (see
// inject.go) with fakes: conntrack with kube-proxy's in-memory fake (UDP
// cleanup finds nothing to delete), nfacct with fakeNFAcct, the health-check
// server with kube-proxy's fake (no port is opened for healthCheckNodePorts),
// and the interface list with the addresses in Options.
func useFakeHost(p *kpiptables.Proxier, opts Options) error {
	if _, err := kphost.Replace(p, "conntrack", conntrack.NewFake()); err != nil {
		return err
	}
	probe, err := kphost.Replace[nfacct.Interface](p, "nfacct", newFakeNFAcct(!opts.NoNFAcct))
	if err != nil {
		return err
	}
	closeNFAcctProbeSocket(probe)
	if _, err := kphost.Replace(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer()); err != nil {
		return err
	}
	network, err := kphost.FakeNetwork(opts.NodeIPs)
	if err != nil {
		return err
	}
	if _, err := kphost.Replace[proxyutil.NetworkInterfacer](p, "networkInterfacer", network); err != nil {
		return err
	}
	return nil
}
