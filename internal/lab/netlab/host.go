package netlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// Host is a namespace on the lab's bridge: a kind node, a client, the control plane.
type Host struct {
	lab  *Lab
	name string
	ns   string
	addr netip.Addr
	mac  net.HardwareAddr

	mu    sync.Mutex
	addrs []netip.Addr // every address on eth0, addr first
}

// AddHost creates the namespace <prefix><name> with lo up and an eth0 cabled to the
// bridge: addr with the prefix length of the lab subnet holding it, the MAC MACFor(addr),
// and a default route through that subnet's gateway. addr may be IPv4 or IPv6 (IPv6
// addresses skip duplicate address detection, so they work at once).
func (l *Lab) AddHost(name string, addr netip.Addr) (*Host, error) {
	if err := checkHostName(name); err != nil {
		return nil, err
	}
	subnet, ok := l.subnetOf(addr)
	if !ok || addr == subnet.Addr() || addr == subnet.Addr().Next() {
		return nil, fmt.Errorf("netlab host %s: %s is not a host address of the lab's subnets", name, addr)
	}
	h := &Host{lab: l, name: name, ns: l.prefix + name, addr: addr, mac: MACFor(addr)}
	l.mu.Lock()
	_, taken := l.hosts[name]
	if !taken {
		l.hosts[name] = h
	}
	l.mu.Unlock()
	if taken {
		return nil, fmt.Errorf("netlab host %s exists already", name)
	}
	if err := h.build(); err != nil {
		// Close deletes the namespace if it was made; the host stays out of the lab.
		l.mu.Lock()
		delete(l.hosts, name)
		l.mu.Unlock()
		return nil, fmt.Errorf("netlab host %s: %w", name, err)
	}
	return h, nil
}

func (h *Host) build() error {
	br, peer := h.lab.BridgeNamespace(), peerName(h.name)
	if err := h.lab.addNamespace(h.ns); err != nil {
		return err
	}
	// Set before eth0 exists so it inherits it, link-local address included.
	if err := setSysctl(h.ns, "net/ipv6/conf/default/accept_dad", "0"); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", h.ns, "link", "set", "lo", "up"},
		// Made from inside the bridge namespace with the other end sent straight to
		// the host's: neither end is ever in the root namespace.
		{"-n", br, "link", "add", peer, "type", "veth", "peer", "name", hostLink, "netns", h.ns},
		{"-n", h.ns, "link", "set", hostLink, "address", h.mac.String()},
		{"-n", h.ns, "link", "set", hostLink, "up"},
		{"-n", br, "link", "set", peer, "master", bridgeName},
		{"-n", br, "link", "set", peer, "up"},
	}
	for _, args := range steps {
		if _, err := ip(args...); err != nil {
			return err
		}
	}
	return h.AddAddr(h.addr)
}

// AddAddr puts another address on eth0, typically one of the other family from a
// subnet added with Lab.AddSubnet, with that subnet's prefix length; the first address
// of each family also brings a default route through the subnet's gateway.
func (h *Host) AddAddr(addr netip.Addr) error {
	subnet, ok := h.lab.subnetOf(addr)
	if !ok {
		return fmt.Errorf("netlab host %s: %s is in none of the lab's subnets", h.name, addr)
	}
	args := []string{"-n", h.ns, "addr", "add", netip.PrefixFrom(addr, subnet.Bits()).String(), "dev", hostLink}
	if addr.Is6() {
		args = append(args, "nodad")
	}
	if _, err := ip(args...); err != nil {
		return err
	}
	h.mu.Lock()
	first := !h.hasFamily(addr)
	h.addrs = append(h.addrs, addr)
	h.mu.Unlock()
	if first {
		family := "-4"
		if addr.Is6() {
			family = "-6"
		}
		if _, err := ip(family, "-n", h.ns, "route", "add", "default", "via", subnet.Addr().Next().String(), "dev", hostLink); err != nil {
			return err
		}
	}
	return nil
}

func (h *Host) hasFamily(addr netip.Addr) bool {
	for _, a := range h.addrs {
		if a.Is4() == addr.Is4() {
			return true
		}
	}
	return false
}

// Name is the host's name in the lab, without the prefix.
func (h *Host) Name() string { return h.name }

// Namespace is the host's network namespace, for `ip netns exec` and `ip -n`.
func (h *Host) Namespace() string { return h.ns }

// Addr is the address the host was created with.
func (h *Host) Addr() netip.Addr { return h.addr }

// Addrs are all addresses on the host's eth0, Addr first.
func (h *Host) Addrs() []netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]netip.Addr(nil), h.addrs...)
}

// MAC is eth0's hardware address, MACFor(Addr()).
func (h *Host) MAC() net.HardwareAddr { return append(net.HardwareAddr(nil), h.mac...) }

// Exec runs args inside the host's namespace (`ip netns exec`) and returns what they
// printed, stdout and stderr together; the error includes that output.
func (h *Host) Exec(ctx context.Context, args ...string) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("netlab Exec: no command")
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.ns}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), h.ns, err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// LinkDown pulls the host's cable: the bridge-side end of its veth pair goes down, so
// eth0 loses carrier while the host keeps its addresses and routes, as a node does when
// its switch port dies. Processes on the host see the carrier loss, as they would.
func (h *Host) LinkDown() error { return h.setPeer("down") }

// LinkUp plugs the cable back in.
func (h *Host) LinkUp() error { return h.setPeer("up") }

func (h *Host) setPeer(state string) error {
	if _, err := ip("-n", h.lab.BridgeNamespace(), "link", "set", peerName(h.name), state); err != nil {
		return fmt.Errorf("netlab host %s link %s: %w", h.name, state, err)
	}
	return nil
}
