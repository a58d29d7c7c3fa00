package lab

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"time"
)

// The lab's addressing is kind's: its docker network, its pod subnet, and the
// walkthrough's netshoot container at .100.
var (
	Subnet      = netip.MustParsePrefix("172.18.0.0/16")
	ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	cpAddr      = netip.MustParseAddr("172.18.0.2")
	clientAddr  = netip.MustParseAddr("172.18.0.100")
)

// A dual-stack lab (Config.DualStack) adds kind's IPv6 network, kind's IPv6 pod subnet
// (a /64 per node) and an IPv6 ClusterIP range next to the walkthrough's
// 10.200.1.0/24, and numbers the hosts alike in both families: the control plane at
// ::2, the workers from ::3, the client at ::100.
var (
	Subnet6      = netip.MustParsePrefix("fc00:f853:ccd:e793::/64")
	ClusterCIDR6 = netip.MustParsePrefix("fd00:10:244::/56")
	ServiceCIDR  = netip.MustParsePrefix("10.200.1.0/24")
	ServiceCIDR6 = netip.MustParsePrefix("fd00:10:96::/112")
	cpAddr6      = netip.MustParseAddr("fc00:f853:ccd:e793::2")
	clientAddr6  = netip.MustParseAddr("fc00:f853:ccd:e793::100")
)

const (
	// DefaultPrefix names the namespaces of the lab the CLI runs; tests use others.
	DefaultPrefix = "hl-"
	// HeraldNamespace holds herald's pools, advertisements and memberlist Secret.
	HeraldNamespace = "herald-system"
	// CPHost and ClientHost are the control plane's and the client's host names.
	CPHost     = "cp"
	ClientHost = "client"
	// MaxWorkers keeps worker addresses below the client's and names within netlab's.
	MaxWorkers = 20

	speakerMetrics    = "0.0.0.0:7474" // every address: the lab's Prometheus scrapes it over the bridge, tests on loopback
	speakerProbe      = "127.0.0.1:7475"
	controllerMetrics = ":7472"
	controllerProbe   = "127.0.0.1:7473"

	agentHeartbeat = 10 * time.Second
	readyTimeout   = 2 * time.Minute
	stopTimeout    = 15 * time.Second
)

// Config says what lab Up builds.
type Config struct {
	Prefix  string // namespace prefix, DefaultPrefix for the CLI's lab
	RunDir  string // state, logs and binaries; made absolute
	Workers int    // worker nodes, 1..MaxWorkers
	// Assets holds etcd, kube-apiserver, kube-controller-manager and kubectl; empty means
	// $KUBEBUILDER_ASSETS, else what hack/setup-test-binaries.sh builds.
	Assets string
	// SpeakerArgs are added to every speaker's command line.
	SpeakerArgs []string
	// WithoutHerald leaves herald's controller and speakers stopped (its CRDs, RBAC
	// and ServiceAccounts installed all the same), as on a cluster where another load
	// balancer ran until now: State.StartHerald starts them.
	WithoutHerald bool
	// DualStack makes the lab dual-stack as kind's network is: every host gets an IPv6
	// address in Subnet6 too, Nodes both InternalIPs and pod CIDRs, pods both
	// addresses, kube-apiserver ClusterIP ranges in both families and the proxier
	// both cluster CIDRs. IPv4 stays the primary family.
	DualStack bool
	// Proxy is the speakers' --proxy: "iptables" (the default when empty) or
	// "nftables", kube-proxy's two modes.
	Proxy string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (c *Config) normalize() error {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	switch c.Proxy {
	case "":
		c.Proxy = "iptables"
	case "iptables", "nftables":
	default:
		return fmt.Errorf("lab: proxy %q, want iptables or nftables", c.Proxy)
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		return fmt.Errorf("lab: %d workers, want 1 to %d", c.Workers, MaxWorkers)
	}
	if c.RunDir == "" {
		return errors.New("lab: no run directory")
	}
	abs, err := filepath.Abs(c.RunDir)
	if err != nil {
		return fmt.Errorf("lab run directory: %w", err)
	}
	c.RunDir = abs
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// WorkerName is the i-th worker's (from 0) host and Node name, as kind names them:
// worker, worker2, worker3.
func WorkerName(i int) string {
	if i == 0 {
		return "worker"
	}
	return fmt.Sprintf("worker%d", i+1)
}

// workerAddr is the i-th worker's address: 172.18.0.3 onwards.
func workerAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 18, 0, byte(3 + i)})
}

// podCIDR is the i-th worker's pod CIDR: 10.244.1.0/24 onwards (kind gives .0 to the
// control-plane node, which is no Node here).
func podCIDR(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), 24)
}

// workerAddr6 is the i-th worker's IPv6 address: fc00:f853:ccd:e793::3 onwards.
func workerAddr6(i int) netip.Addr {
	a := Subnet6.Addr().As16()
	a[15] = byte(3 + i)
	return netip.AddrFrom16(a)
}

// podCIDR6 is the i-th worker's IPv6 pod CIDR: fd00:10:244:1::/64 onwards, as kind
// numbers them.
func podCIDR6(i int) netip.Prefix {
	a := ClusterCIDR6.Addr().As16()
	a[7] = byte(i + 1)
	return netip.PrefixFrom(netip.AddrFrom16(a), 64)
}
