package layer2

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// groupSocket holds IPv6 multicast memberships on one interface. It is an unbound UDP
// socket: it never receives anything, but IPV6_JOIN_GROUP on it makes the kernel
// program the NIC's multicast filter and send MLD reports, as for any member.
type groupSocket struct {
	fd      int
	ifindex int
}

func openGroups(ifindex int) (groupSocket, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return groupSocket{fd: -1}, err
	}
	return groupSocket{fd: fd, ifindex: ifindex}, nil
}

func (g groupSocket) join(group netip.Addr) error {
	return g.setsockopt(unix.IPV6_JOIN_GROUP, group)
}

func (g groupSocket) leave(group netip.Addr) error {
	return g.setsockopt(unix.IPV6_LEAVE_GROUP, group)
}

func (g groupSocket) setsockopt(opt int, group netip.Addr) error {
	if g.fd < 0 {
		return unix.EBADF
	}
	mreq := &unix.IPv6Mreq{Multiaddr: group.As16(), Interface: uint32(g.ifindex)}
	return unix.SetsockoptIPv6Mreq(g.fd, unix.IPPROTO_IPV6, opt, mreq)
}

func (g *groupSocket) close() error {
	if g.fd < 0 {
		return nil
	}
	err := unix.Close(g.fd)
	g.fd = -1
	return err
}
