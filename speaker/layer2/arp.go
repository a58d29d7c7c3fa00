package layer2

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/go-logr/logr"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
)

// ARPResponder answers ARP requests on one interface for the IPv4 addresses the Table
// says this node owns there, with that interface's MAC, sends the gratuitous ARP
// frames of takeovers and the probes of the conflict rules, and reports claims: ARP
// frames from other devices that say they hold an owned IP. One goroutine runs Serve;
// Announce and Probe may be called concurrently.
type ARPResponder struct {
	link
}

// NewARPResponder returns a responder for ifi reading and writing frames through c.
// The interface must have a 6-byte Ethernet MAC. m may be nil.
func NewARPResponder(ifi *net.Interface, c Conn, owners *Table, m *Metrics, log logr.Logger, opts ...ResponderOption) (*ARPResponder, error) {
	r := &ARPResponder{}
	if err := r.init(ifi, c, owners, m, log, "arp", opts); err != nil {
		return nil, err
	}
	return r, nil
}

// Serve reads frames until the connection fails or Close is called (then it returns nil).
// Frames it does not answer are counted by reason; write errors are logged.
func (r *ARPResponder) Serve() error {
	return r.serve(1514, "arp", r.handle, arpReplies)
}

// serveFrame answers one received frame, or counts why not.
func (r *ARPResponder) serveFrame(b []byte) { r.answer(b, r.handle, arpReplies) }

// handle applies the per-packet rules to one Ethernet frame. It returns the reply frame
// and its destination MAC, or the reason the frame is not answered. Rules, in order:
// a parseable Ethernet frame of EtherType ARP without VLAN tag (else malformed); not
// from our own MAC (own-frame); to broadcast or our MAC (foreign-dst); an Ethernet/IPv4
// ARP packet with a unicast sender MAC (malformed); a request or reply whose sender IP
// is owned here, from a sender MAC not this node's, is a claim, reported and not
// answered (claim), if the frame's Ethernet source is that sender MAC (else
// sender-mismatch, neither a claim nor answered); a request (not-request); for an IP this node owns (not-owned) on
// an interface it may be announced on (wrong-interface) and answers for now
// (suppressed).
//
// A probe (sender IP 0.0.0.0) is never a claim: it asks, and is answered like any
// request.
func (r *ARPResponder) handle(b []byte) ([]byte, net.HardwareAddr, string) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil || f.EtherType != ethernet.EtherTypeARP || f.VLAN != nil || f.ServiceVLAN != nil {
		return nil, nil, DropMalformed
	}
	if bytes.Equal(f.Source, r.mac) {
		return nil, nil, DropOwnFrame
	}
	if !bytes.Equal(f.Destination, ethernet.Broadcast) && !bytes.Equal(f.Destination, r.mac) {
		return nil, nil, DropForeignDst
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil || !validARP(&p) {
		return nil, nil, DropMalformed
	}
	var target status
	switch p.Operation {
	case arp.OperationReply:
		// Replies are never answered; the one question is whether they claim an owned IP.
		if r.owners.status(p.SenderIP, r.name).here() {
			if reason := r.claimed(p.SenderIP, p.SenderHardwareAddr, f.Source, arpFrameKind(&p)); reason != "" {
				return nil, nil, reason
			}
		}
		return nil, nil, DropNotRequest
	case arp.OperationRequest:
		r.m.inc(arpRequests)
		var sender status
		sender, target = r.owners.statusPair(p.SenderIP, p.TargetIP, r.name)
		if sender.here() && !p.SenderIP.IsUnspecified() {
			if reason := r.claimed(p.SenderIP, p.SenderHardwareAddr, f.Source, arpFrameKind(&p)); reason != "" {
				return nil, nil, reason
			}
		}
	default:
		return nil, nil, DropNotRequest
	}
	switch target {
	case statusNotOwned:
		return nil, nil, DropNotOwned
	case statusWrongInterface:
		return nil, nil, DropWrongInterface
	case statusQuiet:
		return nil, nil, DropSuppressed
	}
	reply := &arp.Packet{
		HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4),
		HardwareAddrLength: 6, IPLength: 4,
		Operation:          arp.OperationReply,
		SenderHardwareAddr: r.mac, SenderIP: p.TargetIP,
		TargetHardwareAddr: p.SenderHardwareAddr, TargetIP: p.SenderIP,
	}
	frame, err := arpFrame(reply, p.SenderHardwareAddr)
	if err != nil {
		return nil, nil, DropMalformed
	}
	return frame, p.SenderHardwareAddr, ""
}

// arpClaimKind says what kind of claim a packet with an owned sender IP is.
func arpFrameKind(p *arp.Packet) FrameKind {
	switch {
	case p.SenderIP == p.TargetIP:
		return FrameGratuitousARP
	case p.Operation == arp.OperationReply:
		return FrameARPReply
	default:
		return FrameARPRequest
	}
}

// validARP: Ethernet hardware, IPv4 protocol, their address lengths, and a sender MAC
// that can be replied to (not zero, not multicast or broadcast).
func validARP(p *arp.Packet) bool {
	return p.HardwareType == 1 &&
		p.ProtocolType == uint16(ethernet.EtherTypeIPv4) &&
		p.HardwareAddrLength == 6 && p.IPLength == 4 &&
		unicastMAC(p.SenderHardwareAddr)
}

func unicastMAC(mac net.HardwareAddr) bool {
	return len(mac) == 6 && mac[0]&1 == 0 && !bytes.Equal(mac, make([]byte, 6))
}

var zeroMAC = net.HardwareAddr{0, 0, 0, 0, 0, 0}

var errNotIPv4 = errors.New("layer2: not an IPv4 address")

// Announce broadcasts gratuitous ARP for ip in both forms, so that every kind of
// receiver updates its cache: a request (RFC 5227 announcement: sender and target IP
// = ip, target MAC zero; Linux and most hosts update existing entries from it) and a
// reply (RFC 5944 §4.6: target MAC = sender MAC, which is what Linux requires to treat
// a reply as gratuitous; some routers only learn from replies). It does not check
// ownership; the announcer does.
func (r *ARPResponder) Announce(ip netip.Addr) error {
	ip = normalize(ip)
	if !ip.Is4() {
		return errNotIPv4
	}
	for _, form := range []struct {
		op  arp.Operation
		tha net.HardwareAddr
	}{{arp.OperationRequest, zeroMAC}, {arp.OperationReply, r.mac}} {
		p := &arp.Packet{
			HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4),
			HardwareAddrLength: 6, IPLength: 4,
			Operation:          form.op,
			SenderHardwareAddr: r.mac, SenderIP: ip,
			TargetHardwareAddr: form.tha, TargetIP: ip,
		}
		frame, err := arpFrame(p, ethernet.Broadcast)
		if err != nil {
			return err
		}
		if _, err := r.conn.WriteTo(frame, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
			return fmt.Errorf("layer2: gratuitous ARP for %s on %s: %w", ip, r.name, err)
		}
		r.m.inc(gratuitousSent)
	}
	return nil
}

// Probe broadcasts an ARP probe for ip (RFC 5227 §2.1.1: a request from our MAC with
// sender IP 0.0.0.0, target MAC zero, target IP ip). A device holding ip answers it
// with a reply to our MAC, which Serve reports as a claim; since the sender IP is
// 0.0.0.0, no host updates its cache from it. It does not check ownership.
func (r *ARPResponder) Probe(ip netip.Addr) error {
	ip = normalize(ip)
	if !ip.Is4() {
		return errNotIPv4
	}
	p := &arp.Packet{
		HardwareType: 1, ProtocolType: uint16(ethernet.EtherTypeIPv4),
		HardwareAddrLength: 6, IPLength: 4,
		Operation:          arp.OperationRequest,
		SenderHardwareAddr: r.mac, SenderIP: netip.IPv4Unspecified(),
		TargetHardwareAddr: zeroMAC, TargetIP: ip,
	}
	frame, err := arpFrame(p, ethernet.Broadcast)
	if err != nil {
		return err
	}
	if _, err := r.conn.WriteTo(frame, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
		return fmt.Errorf("layer2: ARP probe for %s on %s: %w", ip, r.name, err)
	}
	r.m.inc(probesSent)
	return nil
}

// arpFrame wraps an ARP packet in an Ethernet frame from the packet's sender MAC.
func arpFrame(p *arp.Packet, dst net.HardwareAddr) ([]byte, error) {
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	f := &ethernet.Frame{Destination: dst, Source: p.SenderHardwareAddr, EtherType: ethernet.EtherTypeARP, Payload: pb}
	return f.MarshalBinary()
}
