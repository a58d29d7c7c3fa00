package layer2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// ipv6Header is the fixed IPv6 header length; ICMPv6 is next header 58.
const (
	ipv6HeaderLen = 40
	protoICMPv6   = 58
	icmpTypeNS    = 135
	icmpTypeNA    = 136
	ndpHopLimit   = 255 // RFC 4861 §7.1: NDP messages are never forwarded
)

var allNodes = netip.MustParseAddr("ff02::1")

var errTruncated = errors.New("layer2: truncated IPv6 packet")

// icmpv6Packet is an IPv6 packet carrying ICMPv6 (no extension headers), as received.
type icmpv6Packet struct {
	ethSrc, ethDst net.HardwareAddr
	hopLimit       uint8
	nextHeader     uint8
	src, dst       netip.Addr
	icmp           []byte // the ICMPv6 message, up to the IPv6 payload length
}

// parseIPv6 reads an Ethernet frame of EtherType IPv6 (no VLAN tag in the payload) and
// its fixed IPv6 header.
func parseIPv6(b []byte) (icmpv6Packet, error) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		return icmpv6Packet{}, err
	}
	if f.EtherType != ethernet.EtherTypeIPv6 || f.VLAN != nil || f.ServiceVLAN != nil {
		return icmpv6Packet{}, errors.New("layer2: not an untagged IPv6 frame")
	}
	h := f.Payload
	if len(h) < ipv6HeaderLen || h[0]>>4 != 6 {
		return icmpv6Packet{}, errTruncated
	}
	plen := int(binary.BigEndian.Uint16(h[4:6]))
	if len(h) < ipv6HeaderLen+plen {
		return icmpv6Packet{}, errTruncated
	}
	return icmpv6Packet{
		ethSrc:     f.Source,
		ethDst:     f.Destination,
		nextHeader: h[6],
		hopLimit:   h[7],
		src:        netip.AddrFrom16([16]byte(h[8:24])),
		dst:        netip.AddrFrom16([16]byte(h[24:40])),
		icmp:       h[ipv6HeaderLen : ipv6HeaderLen+plen],
	}, nil
}

// icmpv6Checksum is the Internet checksum of msg under the IPv6 pseudo-header
// (RFC 8200 §8.1). Over a received message with its checksum field in place it is 0
// when the checksum is right.
func icmpv6Checksum(src, dst netip.Addr, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(b[0])<<8 | uint32(b[1])
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	sum += uint32(len(msg)>>16) + uint32(len(msg)&0xffff)
	sum += protoICMPv6
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// optionsWellFormed walks NDP options (RFC 4861 §4.6): each has a non-zero length and
// fits. ParseMessage checks the fit; the zero length it must not see.
func optionsWellFormed(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 2 || b[1] == 0 || int(b[1])*8 > len(b) {
			return false
		}
		b = b[int(b[1])*8:]
	}
	return true
}

// sourceLLA returns the Source Link-Layer Address option of an NS, if any.
func sourceLLA(ns *ndp.NeighborSolicitation) (net.HardwareAddr, bool) {
	for _, o := range ns.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Source {
			return lla.Addr, true
		}
	}
	return nil, false
}

// targetLLA returns the Target Link-Layer Address option of an NA, if any.
func targetLLA(na *ndp.NeighborAdvertisement) (net.HardwareAddr, bool) {
	for _, o := range na.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
			return lla.Addr, true
		}
	}
	return nil, false
}

// multicastMAC is the Ethernet address IPv6 multicast group ip maps to (RFC 2464 §7).
func multicastMAC(ip netip.Addr) net.HardwareAddr {
	a := ip.As16()
	return net.HardwareAddr{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// naFrame builds an Ethernet frame carrying a neighbour advertisement for target, from
// srcMAC and target (a node answers from the solicited address itself, as Linux does
// for its own addresses; no link-local address is needed) to dst at dstMAC, with the
// Target Link-Layer Address option set to srcMAC. Hop limit 255 per RFC 4861 §7.1.2.
func naFrame(srcMAC, dstMAC net.HardwareAddr, target, dst netip.Addr, solicited, override bool) ([]byte, error) {
	na := &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      override,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: srcMAC}},
	}
	msg, err := ndp.MarshalMessageChecksum(na, target, dst)
	if err != nil {
		return nil, err
	}
	return ipv6Frame(srcMAC, dstMAC, target, dst, msg)
}

// dadFrame builds an Ethernet frame carrying a duplicate address detection
// solicitation for target from srcMAC (RFC 4862 §5.4.2): IPv6 source ::, destination
// the target's solicited-node group, which it also returns, and no options.
func dadFrame(srcMAC net.HardwareAddr, target netip.Addr) ([]byte, netip.Addr, error) {
	group, err := ndp.SolicitedNodeMulticast(target)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	src := netip.IPv6Unspecified()
	msg, err := ndp.MarshalMessageChecksum(&ndp.NeighborSolicitation{TargetAddress: target}, src, group)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	frame, err := ipv6Frame(srcMAC, multicastMAC(group), src, group, msg)
	return frame, group, err
}

// ipv6Frame wraps an ICMPv6 message in IPv6 (hop limit 255, RFC 4861 §7.1) and
// Ethernet headers.
func ipv6Frame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr, msg []byte) ([]byte, error) {
	ip := make([]byte, ipv6HeaderLen, ipv6HeaderLen+len(msg))
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(msg)))
	ip[6] = protoICMPv6
	ip[7] = ndpHopLimit
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	ip = append(ip, msg...)
	f := &ethernet.Frame{Destination: dstMAC, Source: srcMAC, EtherType: ethernet.EtherTypeIPv6, Payload: ip}
	return f.MarshalBinary()
}

// isSolicitedNode reports whether group is ip's solicited-node multicast address.
func isSolicitedNode(group, ip netip.Addr) bool {
	snm, err := ndp.SolicitedNodeMulticast(ip)
	return err == nil && snm == group
}

func sameMAC(a, b net.HardwareAddr) bool { return bytes.Equal(a, b) }
