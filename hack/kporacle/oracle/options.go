//go:build linux

package oracle

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"herald.dev/herald/hack/kporacle/internal/kphost"
	v1 "k8s.io/api/core/v1"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
)

// Defaults of kube-proxy's configuration (pkg/proxy/apis/config/v1alpha1).
const (
	DefaultMasqueradeBit = kphost.DefaultMasqueradeBit
	DefaultSyncPeriod    = kphost.DefaultSyncPeriod
	DefaultMinSyncPeriod = kphost.DefaultMinSyncPeriod
)

// NodePortAddressesPrimary is the special --nodeport-addresses value meaning
// "the node's primary IP of each family".
const NodePortAddressesPrimary = kphost.NodePortAddressesPrimary

// Options configure the kube-proxy iptables proxier run by an Oracle. The zero
// value of every field but NodeName is kube-proxy's default flag value on a
// host with iptables >= 1.6.2, nfacct and nf_conntrack_tcp_be_liberal=0.
type Options struct {
	// NodeName is kube-proxy's --hostname-override: endpoints whose nodeName
	// equals it are local. Required.
	NodeName string

	// IPv6 selects the IPv6 proxier; kube-proxy runs one proxier per family.
	IPv6 bool

	// NodeIPs are the addresses of the simulated host's interfaces (besides
	// 127.0.0.1/8 and ::1/128 on lo). The first one of the proxier's family is
	// kube-proxy's primary node IP (a KUBE-FW chain gets "-s <LB IP>" rules
	// when a source range contains it); all of them are matched against
	// NodePortAddresses. With none of the family, the primary node IP is
	// 127.0.0.1 or ::1, kube-proxy's fallback when it cannot find one.
	NodeIPs []netip.Addr

	// ClusterCIDRs is --cluster-cidr for --detect-local-mode=ClusterCIDR (the
	// default mode; NodeCIDR mode is the same with the node's pod CIDRs). The
	// first CIDR of the proxier's family selects pod traffic as "-s <cidr>".
	// With none of the family, nothing is detected as local, as in kube-proxy.
	ClusterCIDRs []string
	// BridgeInterface selects --detect-local-mode=BridgeInterface ("-i <name>").
	BridgeInterface string
	// InterfaceNamePrefix selects --detect-local-mode=InterfaceNamePrefix
	// ("-i <prefix>+"). At most one of the three detectors may be set.
	InterfaceNamePrefix string

	// MasqueradeBit is --iptables-masquerade-bit, 1 to 31; 0 means the
	// default 14 (mark 0x00004000).
	MasqueradeBit int
	// MasqueradeAll is --masquerade-all.
	MasqueradeAll bool
	// NodePortAddresses is --nodeport-addresses: CIDRs, or just "primary".
	// Empty (the default) accepts NodePorts on every local address.
	NodePortAddresses []string
	// DisableLocalhostNodePorts is --iptables-localhost-nodeports=false.
	// Localhost NodePorts exist only for IPv4 and only when NodePortAddresses
	// includes 127.0.0.1.
	DisableLocalhostNodePorts bool
	// SyncPeriod is --iptables-sync-period (0 means 30s). It matters only in
	// large-cluster mode (over 1000 endpoints), where stale chains are deleted
	// at most once per period.
	SyncPeriod time.Duration

	// NoRandomFully makes the fake iptables report no --random-fully support
	// (iptables < 1.6.2): the MASQUERADE rule then lacks --random-fully.
	NoRandomFully bool
	// NoNFAcct makes nfacct unavailable: no "-m nfacct" matches.
	NoNFAcct bool
	// ConntrackTCPBeLiberal sets the sysctl nf_conntrack_tcp_be_liberal=1,
	// which drops the KUBE-FORWARD rule that discards INVALID packets.
	ConntrackTCPBeLiberal bool

	// Logger receives kube-proxy's log lines; the zero value discards them.
	Logger logr.Logger
}

// proxierParams are Options resolved into NewProxier's arguments.
type proxierParams struct {
	family             v1.IPFamily
	primaryNodeIP      net.IP
	localDetector      proxyutil.LocalTrafficDetector
	masqueradeBit      int
	nodePortAddresses  []string
	localhostNodePorts bool
	syncPeriod         time.Duration
}

// resolve validates opts and applies kube-proxy's defaults.
func (opts Options) resolve() (proxierParams, error) {
	params := proxierParams{
		family:             v1.IPv4Protocol,
		primaryNodeIP:      net.IPv4(127, 0, 0, 1),
		masqueradeBit:      opts.MasqueradeBit,
		localhostNodePorts: !opts.DisableLocalhostNodePorts,
		syncPeriod:         opts.SyncPeriod,
	}
	if opts.IPv6 {
		params.family, params.primaryNodeIP = v1.IPv6Protocol, net.IPv6loopback
	}
	if opts.NodeName == "" {
		return params, errors.New("NodeName is required")
	}
	var err error
	if params.masqueradeBit, err = kphost.MasqueradeBit(opts.MasqueradeBit); err != nil {
		return params, err
	}
	if params.syncPeriod == 0 {
		params.syncPeriod = DefaultSyncPeriod
	}
	if params.syncPeriod < 0 {
		return params, fmt.Errorf("SyncPeriod %s is negative", opts.SyncPeriod)
	}
	for _, ip := range opts.NodeIPs {
		if !ip.IsValid() {
			return params, errors.New("NodeIPs holds an invalid address")
		}
		if ip.Unmap().Is6() == opts.IPv6 {
			params.primaryNodeIP = net.IP(ip.Unmap().AsSlice())
			break
		}
	}
	if params.localDetector, err = kphost.LocalDetector(opts.IPv6, opts.ClusterCIDRs, opts.BridgeInterface, opts.InterfaceNamePrefix); err != nil {
		return params, err
	}
	if params.nodePortAddresses, err = kphost.NodePortAddresses(opts.NodePortAddresses, params.primaryNodeIP); err != nil {
		return params, err
	}
	return params, nil
}
