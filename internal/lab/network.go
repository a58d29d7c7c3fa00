package lab

import (
	"context"
	"fmt"
	"os"
	"strings"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
)

// routeWorker makes worker h a router for pods: it forwards (a new namespace does not;
// the proxier's DNAT and pod traffic need it) and reaches every other worker's pod CIDR
// through that worker's address on the bridge, as kind's kindnet installs routes, in
// both families in a dual-stack lab. The
// client gets no such routes: like the walkthrough's netshoot, it reaches pods only
// through the LoadBalancer IPs.
func routeWorker(ctx context.Context, h HostInfo, all []HostInfo) error {
	err := netns.Do(h.Namespace, func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
			return err
		}
		if !h.Addr6.IsValid() {
			return nil
		}
		// "all" sets every interface's and the default, so pods' veths inherit it.
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0)
	})
	if err != nil {
		return fmt.Errorf("lab: forwarding on %s: %w", h.Name, err)
	}
	for _, o := range all {
		if o.Name == h.Name {
			continue
		}
		routes := [][2]string{{o.PodCIDR.String(), o.Addr.String()}}
		if h.Addr6.IsValid() && o.PodCIDR6.IsValid() {
			routes = append(routes, [2]string{o.PodCIDR6.String(), o.Addr6.String()})
		}
		for _, r := range routes {
			if _, err := netlab.Run(ctx, "ip", "-n", h.Namespace, "route", "add", r[0], "via", r[1], "dev", "eth0"); err != nil {
				return fmt.Errorf("lab: route on %s to %s's pods: %w", h.Name, o.Name, err)
			}
		}
	}
	return nil
}

// linkUp reports whether host h's cable is plugged in: the bridge-side end of its veth
// pair, v<name> in the bridge namespace (netlab's naming), is administratively up.
func linkUp(ctx context.Context, s *State, h HostInfo) (bool, error) {
	out, err := netlab.Run(ctx, "ip", "-n", s.BridgeNamespace(), "-o", "link", "show", "v"+h.Name)
	if err != nil {
		return false, err
	}
	// "5: vworker@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu ..."
	flags := string(out)
	if i, j := strings.Index(flags, "<"), strings.Index(flags, ">"); i >= 0 && j > i {
		flags = flags[i+1 : j]
	}
	for _, f := range strings.Split(flags, ",") {
		if f == "UP" {
			return true, nil
		}
	}
	return false, nil
}

// setLink pulls or plugs host h's cable, as netlab's Host.LinkDown and LinkUp do.
func setLink(ctx context.Context, s *State, h HostInfo, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if _, err := netlab.Run(ctx, "ip", "-n", s.BridgeNamespace(), "link", "set", "v"+h.Name, state); err != nil {
		return fmt.Errorf("lab: link %s of %s: %w", state, h.Name, err)
	}
	return nil
}
