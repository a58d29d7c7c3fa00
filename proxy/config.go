package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"herald.dev/herald/proxy/iptables"
	"herald.dev/herald/proxy/runner"
)

// Mode is --proxy.
type Mode string

const (
	// ModeIPTables programs kube-proxy's iptables rules (unless kube-proxy already does).
	ModeIPTables Mode = "iptables"
	// ModeNFTables programs kube-proxy's nftables rules, in nftables tables "herald"
	// (ip and ip6), unless kube-proxy already programs the node.
	ModeNFTables Mode = "nftables"
	// ModeNone leaves the node's iptables alone: kube-proxy or another CNI proxies.
	ModeNone Mode = "none"
)

// NodePortPrimary is the --nodeport-addresses value kube-proxy spells "primary": the
// node's own IPs (NodeIPs), one per family.
const NodePortPrimary = "primary"

// Config is what New needs. The first fields are flags (AddFlags); the rest are set by
// the caller. Build it with DefaultConfig.
type Config struct {
	// Mode is --proxy (default iptables).
	Mode Mode
	// ClusterCIDRs is --cluster-cidr: the pod CIDRs, at most one per family. Traffic
	// from them is pod traffic (kube-proxy's --detect-local-mode=ClusterCIDR), which
	// ClusterIP rules do not masquerade and which reaches every endpoint even under
	// externalTrafficPolicy Local. Empty turns the rules that need it off, as in a
	// kube-proxy started without --cluster-cidr.
	ClusterCIDRs []string
	// MasqueradeBit is --masquerade-bit (kube-proxy's --iptables-masquerade-bit): the
	// fwmark bit of packets to masquerade, 0-31 (default 14, mark 0x4000). It must
	// agree with every other agent on the node that uses KUBE-MARK-MASQ.
	MasqueradeBit int
	// NodePortAddresses is --nodeport-addresses: CIDRs, or "primary" for the node's
	// IPs. NodePorts and health check ports answer only on local addresses inside
	// them; empty means every local address.
	NodePortAddresses []string
	// MinSyncPeriod is --iptables-min-sync-period (default 1 s): changes arriving
	// faster are batched into one sync.
	MinSyncPeriod time.Duration
	// SyncPeriod is --iptables-sync-period (default 1 h): a full resync at least this
	// often, which repairs anything changed behind the proxier's back that the canary
	// did not reveal.
	SyncPeriod time.Duration
	// HealthzBindAddress is --healthz-bind-address, kube-proxy's flag of the same name:
	// where the proxier answers /healthz and /livez (default 0.0.0.0:10256, kube-proxy's
	// port, so that load balancers and probes set up for kube-proxy work unchanged).
	// "" or "0" turns the server off; an IP without port gets 10256.
	HealthzBindAddress string
	// NFTNetlink is --nftables-netlink (default true): in nftables mode, partial syncs
	// made only of chain rewrites (an endpoint change) go to the kernel over netlink
	// instead of through nft, whose cache fetch of every chain on the node makes each
	// run cost more the more Services there are. Everything else, and any batch the kernel
	// refuses, runs with nft. false: always nft.
	NFTNetlink bool

	// NodeName is this node's Node name: endpoints with this nodeName are local.
	NodeName string
	// NodeIPs are the node's IPs, one per family it has; they select the families the
	// proxier programs (iptables for IPv4, ip6tables for IPv6).
	NodeIPs []netip.Addr
	// NodeZone is the node's topology.kubernetes.io/zone label, for topology hints.
	NodeZone string
	// CanaryPeriod is how often the canary chains are checked (default 30 s, kube-proxy's
	// monitor interval): a missing HERALD-PROXY-CANARY means the tables were flushed
	// and forces a full resync; a KUBE-PROXY-CANARY means kube-proxy took over the node.
	// A check is four iptables calls per family; with iptables-legacy each reads its
	// whole table, about a second for the nat table of 10,000 Services.
	CanaryPeriod time.Duration
	// Backend picks the iptables binaries: default (iptables-restore as installed),
	// legacy or nft. It must be the backend the node's kubelet and CNI use: rules of
	// one are invisible to the other (see kube-proxy.md §7).
	Backend runner.Backend
	// HealthTimeout is how long a change may wait for its sync before the health check
	// node ports report serviceProxyHealthy false (default 60 s, kube-proxy's 2 × its
	// default sync period).
	HealthTimeout time.Duration
	// Node returns this node's Node as the caller's cache holds it (nil: not known),
	// for /healthz, which answers 503 while the Node is being deleted. nil skips that
	// check (every node eligible).
	Node func(context.Context) *corev1.Node
	// Registerer receives the herald_proxy_* metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Log is the proxier's logger; quiet at level 0 except for what needs a human.
	Log logr.Logger
	// InNetNS runs fn with the calling OS thread in the node's network namespace;
	// every command, sysctl read and health check listener goes through it. nil runs
	// fn as is, which is right for the speaker (hostNetwork). Tests pass a netlab
	// Host's Do.
	InNetNS runner.Do
}

// DefaultConfig returns kube-proxy's defaults where it has them.
func DefaultConfig() Config {
	return Config{
		Mode:          ModeIPTables,
		MasqueradeBit: iptables.DefaultMasqueradeBit,
		MinSyncPeriod: time.Second,
		SyncPeriod:    time.Hour,
		CanaryPeriod:  30 * time.Second,
		HealthTimeout: 60 * time.Second,
		NFTNetlink:    true,

		HealthzBindAddress: "0.0.0.0:" + strconv.Itoa(HealthzPort),
	}
}

// AddFlags registers the proxier's flags, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.Var((*modeValue)(&c.Mode), "proxy", "service proxy: iptables (kube-proxy's iptables mode), nftables (kube-proxy's nftables mode, in table ip/ip6 herald) or none; iptables and nftables stay off where kube-proxy runs")
	fs.StringSliceVar(&c.ClusterCIDRs, "cluster-cidr", c.ClusterCIDRs, "pod CIDRs, at most one per family, to tell pod traffic from external traffic (empty: no local-traffic detection)")
	fs.IntVar(&c.MasqueradeBit, "masquerade-bit", c.MasqueradeBit, "fwmark bit (0-31) of packets to masquerade, as kube-proxy's --iptables-masquerade-bit")
	fs.StringSliceVar(&c.NodePortAddresses, "nodeport-addresses", c.NodePortAddresses, `CIDRs (or "primary" for the node IPs) of the local addresses NodePorts answer on (empty: all)`)
	fs.DurationVar(&c.MinSyncPeriod, "iptables-min-sync-period", c.MinSyncPeriod, "minimum time between two iptables syncs; changes in between are batched")
	fs.DurationVar(&c.SyncPeriod, "iptables-sync-period", c.SyncPeriod, "maximum time between two full iptables resyncs")
	fs.BoolVar(&c.NFTNetlink, "nftables-netlink", c.NFTNetlink, "nftables mode: write endpoint changes (chain rewrites) over netlink, without nft's fetch of every chain; false: always run nft")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress,
		`ip:port of the proxier's /healthz and /livez, as kube-proxy's ("" or "0" turns them off; served only while the proxier is on)`)
}

type modeValue Mode

func (m *modeValue) String() string { return string(*m) }
func (m *modeValue) Type() string   { return "mode" }
func (m *modeValue) Set(s string) error {
	switch Mode(s) {
	case ModeIPTables, ModeNFTables, ModeNone:
		*m = modeValue(s)
		return nil
	}
	return fmt.Errorf("want %s, %s or %s", ModeIPTables, ModeNFTables, ModeNone)
}

// settings are the parsed flags.
type settings struct {
	podCIDRs          []netip.Prefix
	nodePortAddresses []netip.Prefix
	healthzAddr       string // "": off
}

// HealthzPort is kube-proxy's health port, the default of --healthz-bind-address.
const HealthzPort = 10256

// Validate reports every invalid flag, joined. It does not look at the fields the
// caller fills in later (node name and IPs): New checks those too.
func (c *Config) Validate() error {
	_, err := c.parse(false)
	return err
}

// parse checks the flags and, with node set, the caller's fields.
func (c *Config) parse(node bool) (settings, error) {
	var s settings
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch c.Mode {
	case ModeIPTables, ModeNFTables:
	case ModeNone:
		return s, nil // nothing else is used
	default:
		bad("--proxy %q: want %s, %s or %s", c.Mode, ModeIPTables, ModeNFTables, ModeNone)
	}
	families := map[bool]bool{}
	for _, cidr := range c.ClusterCIDRs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			bad("--cluster-cidr %q: %v", cidr, err)
			continue
		}
		if families[p.Addr().Is4()] {
			bad("--cluster-cidr: more than one CIDR of the family of %s", p)
		}
		families[p.Addr().Is4()] = true
		s.podCIDRs = append(s.podCIDRs, p.Masked())
	}
	for _, cidr := range c.NodePortAddresses {
		if cidr == NodePortPrimary {
			for _, ip := range c.NodeIPs {
				s.nodePortAddresses = append(s.nodePortAddresses, netip.PrefixFrom(ip, ip.BitLen()))
			}
			continue
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			bad("--nodeport-addresses %q: want CIDRs or %q: %v", cidr, NodePortPrimary, err)
			continue
		}
		s.nodePortAddresses = append(s.nodePortAddresses, p)
	}
	if addr, err := healthzAddr(c.HealthzBindAddress); err != nil {
		bad("--healthz-bind-address %q: %v", c.HealthzBindAddress, err)
	} else {
		s.healthzAddr = addr
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		bad("--masquerade-bit %d: want 0-31", c.MasqueradeBit)
	}
	if c.MinSyncPeriod < 0 {
		bad("--iptables-min-sync-period %v must not be negative", c.MinSyncPeriod)
	}
	if c.SyncPeriod <= 0 {
		bad("--iptables-sync-period %v must be positive", c.SyncPeriod)
	} else if c.SyncPeriod < c.MinSyncPeriod {
		bad("--iptables-sync-period %v is shorter than --iptables-min-sync-period %v", c.SyncPeriod, c.MinSyncPeriod)
	}
	if c.CanaryPeriod <= 0 {
		bad("canary period %v must be positive", c.CanaryPeriod)
	}
	if c.HealthTimeout <= 0 {
		bad("health timeout %v must be positive", c.HealthTimeout)
	}
	if node {
		if c.NodeName == "" {
			bad("node name is empty")
		}
		if len(c.NodeIPs) == 0 {
			bad("no node IPs: they decide which families (iptables, ip6tables) are programmed")
		}
		for _, ip := range c.NodeIPs {
			if !ip.IsValid() || ip.Zone() != "" {
				bad("node IP %q is not a plain IP address", ip)
			}
		}
	}
	return s, errors.Join(errs...)
}

// healthzAddr checks --healthz-bind-address and returns the address to listen on ("":
// off).
func healthzAddr(flag string) (string, error) {
	if flag == "" || flag == "0" {
		return "", nil
	}
	if ip, err := netip.ParseAddr(flag); err == nil {
		return netip.AddrPortFrom(ip, HealthzPort).String(), nil
	}
	host, port, err := net.SplitHostPort(flag)
	if err != nil {
		return "", fmt.Errorf("want ip:port, an IP, or \"\" to turn it off: %w", err)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return "", fmt.Errorf("%q is not an IP address", host)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q: want 1-65535", port)
	}
	return flag, nil
}
