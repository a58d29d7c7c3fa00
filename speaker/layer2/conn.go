package layer2

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
)

// Conn carries raw Ethernet frames in and out of one interface: the part of
// net.PacketConn a responder uses. A *packet.Conn (AF_PACKET) is the real one; the
// address passed to WriteTo is a *packet.Addr holding the destination MAC. Tests drive
// responders through a fake.
type Conn interface {
	ReadFrom(b []byte) (n int, from net.Addr, err error)
	WriteTo(b []byte, to net.Addr) (n int, err error)
	Close() error
}

// NDPConn is a Conn for IPv6 frames that can also make the interface a member of IPv6
// multicast groups (the solicited-node groups of the VIPs), so that the NIC accepts
// their frames and MLD-snooping switches forward them.
type NDPConn interface {
	Conn
	JoinGroup(group netip.Addr) error
	LeaveGroup(group netip.Addr) error
}

// EtherTypes the sockets are bound to.
const (
	etherTypeARP  = 0x0806
	etherTypeIPv6 = 0x86dd
)

// ListenARP opens an AF_PACKET socket receiving the ARP frames of ifi (CAP_NET_RAW).
// It does not need an IPv4 address on the interface, unlike arp.Dial.
func ListenARP(ifi *net.Interface) (Conn, error) {
	c, err := packet.Listen(ifi, packet.Raw, etherTypeARP, &packet.Config{Filter: arpFilter(ifi.Index)})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ListenNDP opens an AF_PACKET socket receiving the IPv6 neighbour solicitations and
// advertisements of ifi (the latter for claim detection), and a datagram socket that
// holds its multicast group memberships.
//
// Why not a raw ICMPv6 socket (ndp.Listen)? The kernel hands a raw socket only what it
// delivers locally, and a VIP is not a local address: the unicast solicitations hosts
// send to the VIP itself to check reachability (RFC 4861 §7.3, NUD) would never reach
// us, as MetalLB users found (https://github.com/metallb/metallb/issues/2920). AF_PACKET sees every frame to our MAC and to the
// groups we joined, and needs no bind to a link-local address (https://github.com/metallb/metallb/issues/1680, https://github.com/metallb/metallb/issues/2685).
func ListenNDP(ifi *net.Interface) (NDPConn, error) {
	c, err := packet.Listen(ifi, packet.Raw, etherTypeIPv6, &packet.Config{Filter: ndFilter(ifi.Index)})
	if err != nil {
		return nil, err
	}
	g, err := openGroups(ifi.Index)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &ndpConn{Conn: c, groups: g}, nil
}

// ndpConn joins the frame socket and the group socket.
type ndpConn struct {
	Conn
	mu     sync.Mutex
	groups groupSocket // guarded by mu
}

func (c *ndpConn) JoinGroup(group netip.Addr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups.join(group)
}

func (c *ndpConn) LeaveGroup(group netip.Addr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups.leave(group)
}

func (c *ndpConn) Close() error {
	c.mu.Lock()
	gerr := c.groups.close()
	c.mu.Unlock()
	return errors.Join(c.Conn.Close(), gerr)
}

// The socket filters run in the kernel so that only candidate frames are copied to us:
// on a busy node the IPv6 socket would otherwise see every IPv6 frame. Both first drop
// what is not this interface's own traffic, which a socket bound to a protocol on an
// interface still gets:
//   - frames the kernel marked PACKET_OTHERHOST: unicast to another MAC (promiscuous
//     mode), and frames tagged with a VLAN that has no VLAN device here, which the
//     kernel hands on with the tag stripped (checked in the netns test: without this a
//     VLAN 10 broadcast request is answered, untagged, on the native LAN);
//   - frames whose device is not this interface: the kernel also delivers a VLAN
//     device's frames (eth0.10) to sockets bound to its parent (eth0), untagged.
//
// The VLAN device gets its own responder if it is eligible.
func arpFilter(ifindex int) []bpf.RawInstruction {
	return assemble(append(ownFrames(ifindex, len(accept)-1), accept...))
}

func ndFilter(ifindex int) []bpf.RawInstruction {
	return assemble(append(ownFrames(ifindex, len(ndMatch)-1), ndMatch...))
}

// packetOtherHost is PACKET_OTHERHOST, the packet type of frames not for this host.
const packetOtherHost = 3

// ownFrames jumps to the program's final "drop" for frames of another host or another
// device; rest is the number of instructions between it and that drop, which must be
// the program's last instruction.
func ownFrames(ifindex, rest int) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: packetOtherHost, SkipTrue: uint8(2 + rest)},
		bpf.LoadExtension{Num: bpf.ExtInterfaceIndex},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ifindex), SkipTrue: uint8(rest)},
	}
}

// accept ends a filter that keeps everything the guard let through.
var accept = []bpf.Instruction{
	bpf.RetConstant{Val: 0x40000},
	bpf.RetConstant{Val: 0},
}

// ndMatch keeps IPv6 frames whose next header is ICMPv6 (58) and whose ICMPv6 type is
// neighbour solicitation (135) or advertisement (136); offsets count from the Ethernet
// header. Advertisements cost little: a host receives those that answer its own
// solicitations and the few unsolicited ones sent to all nodes.
var ndMatch = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 14 + 6, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 58, SkipTrue: 4},
	bpf.LoadAbsolute{Off: 14 + 40, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: 135, SkipTrue: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 136, SkipTrue: 1},
	bpf.RetConstant{Val: 0x40000},
	bpf.RetConstant{Val: 0},
}

func assemble(prog []bpf.Instruction) []bpf.RawInstruction {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic("layer2: bad socket filter: " + err.Error())
	}
	return raw
}
