package netlab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"herald.dev/herald/internal/netns"
)

// buildBridge creates the bridge namespace with br0, the lab's switch.
func (l *Lab) buildBridge() error {
	ns := l.BridgeNamespace()
	if err := l.addNamespace(ns); err != nil {
		return err
	}
	// Addresses appear at once instead of after duplicate address detection (~1 s).
	if err := setSysctl(ns, "net/ipv6/conf/default/accept_dad", "0"); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// No multicast snooping: without a querier on the segment it may drop the
		// solicited-node multicasts IPv6 neighbour discovery depends on. STP is off by
		// default, so ports forward as soon as they are up.
		{"link", "add", bridgeName, "type", "bridge", "mcast_snooping", "0"},
		{"link", "set", bridgeName, "up"},
	} {
		if _, err := ip(append([]string{"-n", ns}, args...)...); err != nil {
			return fmt.Errorf("building the lab bridge: %w", err)
		}
	}
	return nil
}

// AddSubnet puts the subnet's first address on br0 as the gateway of hosts with
// addresses in it; New does it for the lab's first subnet. Call it for a second family,
// say fc00:f853:ccd:e793::/64 as kind uses, before giving hosts addresses there.
func (l *Lab) AddSubnet(subnet netip.Prefix) error {
	if !subnet.IsValid() || subnet != subnet.Masked() || subnet.Addr().Zone() != "" {
		return fmt.Errorf("netlab subnet %s: want a network prefix like 172.18.0.0/16", subnet)
	}
	gw := netip.PrefixFrom(subnet.Addr().Next(), subnet.Bits())
	args := []string{"-n", l.BridgeNamespace(), "addr", "add", gw.String(), "dev", bridgeName}
	if gw.Addr().Is6() {
		args = append(args, "nodad")
	}
	if _, err := ip(args...); err != nil {
		return fmt.Errorf("gateway for subnet %s: %w", subnet, err)
	}
	l.mu.Lock()
	l.subnets = append(l.subnets, subnet)
	l.mu.Unlock()
	return nil
}

// setSysctl writes a /proc/sys file as seen from inside the namespace ns (net sysctls
// are per namespace, chosen by the writing thread's namespace).
func setSysctl(ns, key, value string) error {
	return netns.Do(ns, func() error {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, ns, err)
		}
		return nil
	})
}
