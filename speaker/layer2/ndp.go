package layer2

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/go-logr/logr"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
)

// NDPResponder answers IPv6 neighbour solicitations on one interface for the VIPs the
// Table says this node owns there, with that interface's MAC, keeps the interface in
// the solicited-node multicast groups of those VIPs, sends the unsolicited neighbour
// advertisements of takeovers and the duplicate address detection probes of the
// conflict rules, and reports claims: advertisements from other devices for an owned
// VIP. One goroutine runs Serve; Track, Announce and Probe may be called concurrently.
//
// Flags of the answers (RFC 4861 §7.2.4):
//   - Solicited=1 in answers to a solicitation from a unicast source, sent back to that
//     source; Solicited=0 to ff02::1 for duplicate address detection (source ::).
//   - Override=0 in every answer: the VIP is not an address of the interface, and the
//     RFC asks proxies and anycast responders to answer without Override, so that an
//     existing cache entry is not flipped by a solicited answer. If two nodes ever
//     answer for the same VIP (a split brain), hosts keep the first answer instead of
//     flapping between MACs (https://github.com/metallb/metallb/issues/598). Moving the VIP is the job of the takeover's
//     unsolicited advertisements, which carry Override=1 (Announce).
//   - Router=0.
//
// Unicast solicitations for reachability (NUD, §7.3.3) come to the VIP at our MAC and
// may omit the Source Link-Layer Address option (§4.3: it "MAY" be omitted when the
// source is unicast); they are answered to the frame's Ethernet source. MetalLB drops
// solicitations without that option and never receives the unicast ones (https://github.com/metallb/metallb/issues/2920).
type NDPResponder struct {
	link
	mtu     int
	ndpConn NDPConn // the same connection as link.conn, for group membership

	mu     sync.Mutex
	vips   map[netip.Addr]struct{}         // VIPs tracked on this interface
	groups map[netip.Addr]*groupMembership // solicited-node group → members
}

// groupMembership counts the VIPs that map to one solicited-node group (they share the
// low 24 bits), and whether joining it worked.
type groupMembership struct {
	refs   int
	joined bool
}

// NewNDPResponder returns a responder for ifi reading and writing frames through c.
// The interface must have a 6-byte Ethernet MAC. m may be nil.
func NewNDPResponder(ifi *net.Interface, c NDPConn, owners *Table, m *Metrics, log logr.Logger, opts ...ResponderOption) (*NDPResponder, error) {
	mtu := ifi.MTU
	if mtu < 1280 {
		mtu = 1500
	}
	r := &NDPResponder{
		mtu:     mtu,
		ndpConn: c,
		vips:    map[netip.Addr]struct{}{},
		groups:  map[netip.Addr]*groupMembership{},
	}
	if err := r.init(ifi, c, owners, m, log, "ndp", opts); err != nil {
		return nil, err
	}
	return r, nil
}

// Serve reads frames until the connection fails or Close is called (then it returns nil).
// Closing the connection also leaves every group.
func (r *NDPResponder) Serve() error {
	return r.serve(r.mtu+14, "ndp", r.handle, ndpAdvertisements)
}

// serveFrame answers one received frame, or counts why not.
func (r *NDPResponder) serveFrame(b []byte) { r.answer(b, r.handle, ndpAdvertisements) }

// handle applies the per-packet rules to one Ethernet frame and returns the
// advertisement to send and its destination MAC, or why the frame is not answered.
// Validation follows RFC 4861 §7.1.1; in order:
//   - malformed: not an untagged IPv6 frame with a complete fixed header;
//   - own-frame: Ethernet source is our MAC;
//   - an advertisement (ICMPv6 type 136) is never answered: see advertisement;
//   - not-request: not ICMPv6 type 135 right after the fixed header;
//   - malformed: hop limit not 255, ICMPv6 checksum wrong, code not 0, shorter than 24
//     bytes, an option of length 0, unparseable, multicast target, multicast source,
//     or source :: (duplicate address detection) with a unicast destination or with a
//     Source Link-Layer Address option;
//   - foreign-dst: the IPv6 destination is neither the target (a unicast NUD probe,
//     which must then come to our MAC) nor the target's solicited-node group (which must
//     come to the matching 33:33:ff:xx:xx:xx MAC);
//   - not-owned, wrong-interface: as for ARP.
func (r *NDPResponder) handle(b []byte) ([]byte, net.HardwareAddr, string) {
	p, err := parseIPv6(b)
	if err != nil {
		return nil, nil, DropMalformed
	}
	if sameMAC(p.ethSrc, r.mac) {
		return nil, nil, DropOwnFrame
	}
	if p.nextHeader != protoICMPv6 || len(p.icmp) < 1 {
		return nil, nil, DropNotRequest
	}
	switch p.icmp[0] {
	case icmpTypeNA:
		return nil, nil, r.advertisement(&p)
	case icmpTypeNS:
	default:
		return nil, nil, DropNotRequest
	}
	if p.hopLimit != ndpHopLimit || len(p.icmp) < 24 || p.icmp[1] != 0 ||
		icmpv6Checksum(p.src, p.dst, p.icmp) != 0 || !optionsWellFormed(p.icmp[24:]) {
		return nil, nil, DropMalformed
	}
	msg, err := ndp.ParseMessage(p.icmp)
	if err != nil {
		return nil, nil, DropMalformed
	}
	ns, ok := msg.(*ndp.NeighborSolicitation)
	if !ok || ns.TargetAddress.IsMulticast() || p.src.IsMulticast() {
		return nil, nil, DropMalformed
	}
	target := ns.TargetAddress
	slla, hasSLLA := sourceLLA(ns)
	dad := p.src.IsUnspecified()
	if dad && (!p.dst.IsMulticast() || hasSLLA) {
		return nil, nil, DropMalformed
	}
	switch {
	case p.dst.IsMulticast():
		if !isSolicitedNode(p.dst, target) || !sameMAC(p.ethDst, multicastMAC(p.dst)) {
			return nil, nil, DropForeignDst
		}
	default:
		if p.dst != target || !sameMAC(p.ethDst, r.mac) {
			return nil, nil, DropForeignDst
		}
	}
	r.m.inc(ndpSolicitations)
	switch r.owners.status(target, r.name) {
	case statusNotOwned:
		return nil, nil, DropNotOwned
	case statusWrongInterface:
		return nil, nil, DropWrongInterface
	case statusQuiet:
		return nil, nil, DropSuppressed
	}

	dstIP, dstMAC, solicited := p.src, p.ethSrc, true
	switch {
	case dad:
		dstIP, dstMAC, solicited = allNodes, multicastMAC(allNodes), false
	case hasSLLA && unicastMAC(slla):
		dstMAC = slla
	}
	if !dad && !unicastMAC(dstMAC) {
		return nil, nil, DropMalformed
	}
	frame, err := naFrame(r.mac, dstMAC, target, dstIP, solicited, false)
	if err != nil {
		return nil, nil, DropMalformed
	}
	return frame, dstMAC, ""
}

// advertisement returns why a received neighbour advertisement is dropped: claim if
// its target is a VIP owned on this interface and the advertised MAC (the Target
// Link-Layer Address option, else the Ethernet source) is not this node's; else
// not-request, as for any message that is not a solicitation. A Target Link-Layer
// Address that is not the Ethernet source makes it sender-mismatch, not a claim. The target is looked up
// first, so the advertisements of other addresses cost one table lookup; a candidate
// claim is then validated as RFC 4861 §7.1.2 asks (malformed, foreign-dst): hop limit
// 255, checksum, code 0, at least 24 bytes, options of non-zero length, a unicast
// target, Solicited clear if sent to a multicast group, and an Ethernet destination
// that is our MAC or a group.
func (r *NDPResponder) advertisement(p *icmpv6Packet) string {
	if len(p.icmp) < 24 {
		return DropMalformed
	}
	target := netip.AddrFrom16([16]byte(p.icmp[8:24]))
	if !r.owners.status(target, r.name).here() {
		return DropNotRequest
	}
	if p.hopLimit != ndpHopLimit || p.icmp[1] != 0 ||
		icmpv6Checksum(p.src, p.dst, p.icmp) != 0 || !optionsWellFormed(p.icmp[24:]) {
		return DropMalformed
	}
	msg, err := ndp.ParseMessage(p.icmp)
	if err != nil {
		return DropMalformed
	}
	na, ok := msg.(*ndp.NeighborAdvertisement)
	if !ok || na.TargetAddress.IsMulticast() || (p.dst.IsMulticast() && na.Solicited) {
		return DropMalformed
	}
	if p.ethDst[0]&1 == 0 && !sameMAC(p.ethDst, r.mac) {
		return DropForeignDst
	}
	mac, ok := targetLLA(na)
	if !ok {
		mac = p.ethSrc
	}
	if !unicastMAC(mac) {
		return DropMalformed
	}
	if reason := r.claimed(target, mac, p.ethSrc, FrameNeighborAdvertisement); reason != "" {
		return reason
	}
	return DropNotRequest
}

var errNotIPv6 = errors.New("layer2: not an IPv6 address")

// Announce sends an unsolicited neighbour advertisement for ip to all nodes (ff02::1):
// Solicited=0, Override=1, Target Link-Layer Address = our MAC (RFC 4861 §7.2.6), so
// hosts that have the VIP cached at another MAC switch to ours. It does not check
// ownership; the announcer does.
func (r *NDPResponder) Announce(ip netip.Addr) error {
	ip = normalize(ip)
	if !ip.Is6() {
		return errNotIPv6
	}
	frame, err := naFrame(r.mac, multicastMAC(allNodes), ip, allNodes, false, true)
	if err != nil {
		return err
	}
	if _, err := r.conn.WriteTo(frame, &packet.Addr{HardwareAddr: multicastMAC(allNodes)}); err != nil {
		return fmt.Errorf("layer2: unsolicited NA for %s on %s: %w", ip, r.name, err)
	}
	r.m.inc(gratuitousSent)
	return nil
}

// Probe sends a duplicate address detection solicitation for ip (RFC 4862 §5.4.2: from
// :: to ip's solicited-node group, no Source Link-Layer Address option). A node holding
// ip answers with an advertisement to all nodes, which Serve reports as a claim; no
// node updates its cache from the solicitation. The interface should be in ip's group
// (Track) to hear a node doing the same. It does not check ownership.
func (r *NDPResponder) Probe(ip netip.Addr) error {
	ip = normalize(ip)
	if !ip.Is6() {
		return errNotIPv6
	}
	frame, group, err := dadFrame(r.mac, ip)
	if err != nil {
		return err
	}
	if _, err := r.conn.WriteTo(frame, &packet.Addr{HardwareAddr: multicastMAC(group)}); err != nil {
		return fmt.Errorf("layer2: duplicate address detection for %s on %s: %w", ip, r.name, err)
	}
	r.m.inc(probesSent)
	return nil
}

// Track says whether vip is announced on this interface (want) and keeps the
// interface's group memberships in step: the solicited-node group of each tracked VIP
// is joined while at least one tracked VIP maps to it. A failed join is retried by
// Rejoin. Calling Track again with the same answer does nothing.
func (r *NDPResponder) Track(vip netip.Addr, want bool) error {
	vip = normalize(vip)
	group, err := ndp.SolicitedNodeMulticast(vip)
	if err != nil {
		return nil // not IPv6: nothing to join
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, have := r.vips[vip]
	switch {
	case want && !have:
		r.vips[vip] = struct{}{}
		g := r.groups[group]
		if g == nil {
			g = &groupMembership{}
			r.groups[group] = g
		}
		g.refs++
		if !g.joined {
			if err := r.ndpConn.JoinGroup(group); err != nil {
				return fmt.Errorf("layer2: joining %s on %s: %w", group, r.name, err)
			}
			g.joined = true
		}
	case !want && have:
		delete(r.vips, vip)
		g := r.groups[group]
		g.refs--
		if g.refs > 0 {
			return nil
		}
		delete(r.groups, group)
		if g.joined {
			if err := r.ndpConn.LeaveGroup(group); err != nil {
				return fmt.Errorf("layer2: leaving %s on %s: %w", group, r.name, err)
			}
		}
	}
	return nil
}

// Rejoin retries the joins that failed.
func (r *NDPResponder) Rejoin() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for group, g := range r.groups {
		if g.refs > 0 && !g.joined {
			if err := r.ndpConn.JoinGroup(group); err != nil {
				errs = append(errs, err)
				continue
			}
			g.joined = true
		}
	}
	return errors.Join(errs...)
}

// Groups returns the solicited-node groups currently joined.
func (r *NDPResponder) Groups() []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []netip.Addr
	for group, g := range r.groups {
		if g.joined {
			out = append(out, group)
		}
	}
	return out
}
