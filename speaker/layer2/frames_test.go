package layer2

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// Test frames are built byte by byte (ARP) or with golang.org/x/net/icmp (NS), not
// with the code under test.

var (
	ourMAC   = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	peerMAC  = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}
	otherMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x03}
	bcast    = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

	vip4  = netip.MustParseAddr("192.0.2.10")
	peer4 = netip.MustParseAddr("192.0.2.1")
	vip6  = netip.MustParseAddr("2001:db8::10")
	peer6 = netip.MustParseAddr("fe80::2")
)

// arpBytes is an Ethernet frame carrying an Ethernet/IPv4 ARP packet.
func arpBytes(ethDst, ethSrc net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	b := append([]byte{}, ethDst...)
	b = append(b, ethSrc...)
	b = append(b, 0x08, 0x06)
	b = append(b, 0, 1, 0x08, 0x00, 6, 4)
	b = binary.BigEndian.AppendUint16(b, op)
	b = append(b, sha...)
	b = append(b, spa.AsSlice()...)
	b = append(b, tha...)
	b = append(b, tpa.AsSlice()...)
	return b
}

// arpRequest is a broadcast who-has target from the peer.
func arpRequest(target netip.Addr) []byte {
	return arpBytes(bcast, peerMAC, 1, peerMAC, peer4, make(net.HardwareAddr, 6), target)
}

// parseARPFrame decodes a frame written by the code under test.
func parseARPFrame(t *testing.T, b []byte) (*ethernet.Frame, *arp.Packet) {
	t.Helper()
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("frame: %v", err)
	}
	if f.EtherType != ethernet.EtherTypeARP {
		t.Fatalf("EtherType %v, want ARP", f.EtherType)
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatalf("arp: %v", err)
	}
	return &f, &p
}

// ns describes a neighbour solicitation frame; zero fields get the defaults of a
// multicast solicitation for vip6 from the peer with a source link-layer option.
type ns struct {
	ethSrc, ethDst net.HardwareAddr
	src, dst       netip.Addr
	target         netip.Addr
	hop            int // 0 → 255
	code           int
	noSLLA         bool
	options        []byte // raw options appended after the SLLA
	badSum         bool
	nextHeader     int // 0 → 58
}

func (o ns) bytes() []byte {
	if o.target == (netip.Addr{}) {
		o.target = vip6
	}
	snm, _ := ndp.SolicitedNodeMulticast(o.target)
	if o.src == (netip.Addr{}) {
		o.src = peer6
	}
	if o.dst == (netip.Addr{}) {
		o.dst = snm
	}
	if o.ethSrc == nil {
		o.ethSrc = peerMAC
	}
	if o.ethDst == nil {
		d := o.dst.As16()
		o.ethDst = net.HardwareAddr{0x33, 0x33, d[12], d[13], d[14], d[15]}
	}
	if o.hop == 0 {
		o.hop = 255
	}
	if o.nextHeader == 0 {
		o.nextHeader = 58
	}
	body := make([]byte, 4, 64)
	body = append(body, o.target.AsSlice()...)
	if !o.noSLLA {
		body = append(body, 1, 1)
		body = append(body, o.ethSrc...)
	}
	body = append(body, o.options...)
	m := icmp.Message{Type: ipv6.ICMPTypeNeighborSolicitation, Code: o.code, Body: &icmp.RawBody{Data: body}}
	msg, err := m.Marshal(icmp.IPv6PseudoHeader(o.src.AsSlice(), o.dst.AsSlice()))
	if err != nil {
		panic(err)
	}
	if o.badSum {
		msg[2] ^= 0xff
	}
	return ipv6Bytes(o.ethDst, o.ethSrc, o.src, o.dst, uint8(o.nextHeader), uint8(o.hop), msg)
}

// ipv6Bytes wraps payload in IPv6 and Ethernet headers.
func ipv6Bytes(ethDst, ethSrc net.HardwareAddr, src, dst netip.Addr, next, hop uint8, payload []byte) []byte {
	b := append([]byte{}, ethDst...)
	b = append(b, ethSrc...)
	b = append(b, 0x86, 0xdd)
	b = append(b, 0x60, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(payload)))
	b = append(b, next, hop)
	b = append(b, src.AsSlice()...)
	b = append(b, dst.AsSlice()...)
	return append(b, payload...)
}

// na is a decoded neighbour advertisement frame.
type na struct {
	ethSrc, ethDst net.HardwareAddr
	src, dst       netip.Addr
	hop            uint8
	msg            *ndp.NeighborAdvertisement
	tlla           net.HardwareAddr
}

func parseNA(t *testing.T, b []byte) na {
	t.Helper()
	p, err := parseIPv6(b)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	if p.nextHeader != 58 {
		t.Fatalf("next header %d", p.nextHeader)
	}
	if s := icmpv6Checksum(p.src, p.dst, p.icmp); s != 0 {
		t.Fatalf("reply checksum does not verify (%#x)", s)
	}
	m, err := ndp.ParseMessage(p.icmp)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	adv, ok := m.(*ndp.NeighborAdvertisement)
	if !ok {
		t.Fatalf("reply is %T", m)
	}
	out := na{ethSrc: p.ethSrc, ethDst: p.ethDst, src: p.src, dst: p.dst, hop: p.hopLimit, msg: adv}
	for _, o := range adv.Options {
		if l, ok := o.(*ndp.LinkLayerAddress); ok && l.Direction == ndp.Target {
			out.tlla = l.Addr
		}
	}
	return out
}

// adv describes a neighbour advertisement frame; zero fields get the defaults of an
// unsolicited advertisement for vip6 by another host (otherMAC) to all nodes, with
// Override and a target link-layer option of its MAC: a device announcing the VIP.
type adv struct {
	ethSrc, ethDst net.HardwareAddr
	src, dst       netip.Addr
	target         netip.Addr
	solicited      bool
	tlla           net.HardwareAddr // nil: ethSrc
	noTLLA         bool
	hop            int // 0 → 255
	code           int
	badSum         bool
}

func (o adv) bytes() []byte {
	if o.target == (netip.Addr{}) {
		o.target = vip6
	}
	if o.src == (netip.Addr{}) {
		o.src = o.target
	}
	if o.dst == (netip.Addr{}) {
		o.dst = netip.MustParseAddr("ff02::1")
	}
	if o.ethSrc == nil {
		o.ethSrc = otherMAC
	}
	if o.ethDst == nil {
		d := o.dst.As16()
		o.ethDst = net.HardwareAddr{0x33, 0x33, d[12], d[13], d[14], d[15]}
	}
	if o.tlla == nil {
		o.tlla = o.ethSrc
	}
	if o.hop == 0 {
		o.hop = 255
	}
	flags := byte(0x20) // Override
	if o.solicited {
		flags |= 0x40
	}
	body := []byte{flags, 0, 0, 0}
	body = append(body, o.target.AsSlice()...)
	if !o.noTLLA {
		body = append(body, 2, 1)
		body = append(body, o.tlla...)
	}
	m := icmp.Message{Type: ipv6.ICMPTypeNeighborAdvertisement, Code: o.code, Body: &icmp.RawBody{Data: body}}
	msg, err := m.Marshal(icmp.IPv6PseudoHeader(o.src.AsSlice(), o.dst.AsSlice()))
	if err != nil {
		panic(err)
	}
	if o.badSum {
		msg[2] ^= 0xff
	}
	return ipv6Bytes(o.ethDst, o.ethSrc, o.src, o.dst, 58, uint8(o.hop), msg)
}
