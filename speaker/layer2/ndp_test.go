package layer2

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/mdlayher/ndp"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	vip6Other   = netip.MustParseAddr("2001:db8::20") // owned, allowed only on eth1
	vip6Quiet   = netip.MustParseAddr("2001:db8::30") // owned, quiet
	allNodesMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
)

func newTestNDP(t testing.TB, opts ...ResponderOption) (*NDPResponder, *fakeConn, *Metrics) {
	t.Helper()
	owners := NewTable()
	owners.Set("svc-a", vip6, nil)
	owners.Set("svc-b", vip6Other, []string{"eth1"})
	owners.set("svc-c", vip6Quiet, nil, true)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := newFakeConn()
	r, err := NewNDPResponder(&net.Interface{Name: "eth0", Index: 2, MTU: 1500, HardwareAddr: ourMAC}, c, owners, m, logr.Discard(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r, c, m
}

func TestNDPRules(t *testing.T) {
	snm := func(ip netip.Addr) netip.Addr { g, _ := ndp.SolicitedNodeMulticast(ip); return g }
	global := netip.MustParseAddr("2001:db8::2")
	unspec := netip.IPv6Unspecified()
	type want struct {
		reason    string
		ethDst    net.HardwareAddr // of the reply
		dst       netip.Addr
		solicited bool
	}
	answered := want{ethDst: peerMAC, dst: peer6, solicited: true}
	cases := []struct {
		name  string
		frame []byte
		want  want
	}{
		{"multicast NS with SLLA", ns{}.bytes(), answered},
		{"multicast NS from a global source", ns{src: global}.bytes(), want{ethDst: peerMAC, dst: global, solicited: true}},
		{"unicast NUD probe to the VIP without SLLA (RFC 4861 §4.3 MAY omit)", ns{dst: vip6, ethDst: ourMAC, noSLLA: true}.bytes(), answered},
		{"unicast NUD probe to the VIP with SLLA", ns{dst: vip6, ethDst: ourMAC}.bytes(), answered},
		{"SLLA differing from the Ethernet source wins (RFC: it is the source's address)",
			ns{options: nil, ethSrc: peerMAC}.withSLLA(otherMAC), want{ethDst: otherMAC, dst: peer6, solicited: true}},
		{"unknown options are skipped", ns{options: []byte{200, 1, 0, 0, 0, 0, 0, 0}}.bytes(), answered},
		{"DAD probe for the VIP is defended to all nodes", ns{src: unspec, noSLLA: true}.bytes(), want{ethDst: allNodesMAC, dst: allNodes}},

		{"not owned", ns{target: netip.MustParseAddr("2001:db8::99")}.bytes(), want{reason: DropNotOwned}},
		{"owned but allowed on another interface", ns{target: vip6Other}.bytes(), want{reason: DropWrongInterface}},

		{"unicast to another MAC", ns{dst: vip6, ethDst: otherMAC}.bytes(), want{reason: DropForeignDst}},
		{"unicast to another IP at our MAC", ns{dst: global, ethDst: ourMAC}.bytes(), want{reason: DropForeignDst}},
		{"multicast to another solicited-node group", ns{dst: snm(netip.MustParseAddr("2001:db8::abcd"))}.bytes(), want{reason: DropForeignDst}},
		{"multicast group right, Ethernet group wrong", ns{ethDst: net.HardwareAddr{0x33, 0x33, 0xff, 1, 2, 3}}.bytes(), want{reason: DropForeignDst}},
		{"to all nodes", ns{dst: allNodes}.bytes(), want{reason: DropForeignDst}},
		{"our own frame", ns{ethSrc: ourMAC}.bytes(), want{reason: DropOwnFrame}},

		{"not ICMPv6", ns{nextHeader: 17}.bytes(), want{reason: DropNotRequest}},
		{"neighbour advertisement", naBytes(t), want{reason: DropNotRequest}},

		{"hop limit 64 (routed)", ns{hop: 64}.bytes(), want{reason: DropMalformed}},
		{"bad checksum", ns{badSum: true}.bytes(), want{reason: DropMalformed}},
		{"code 1", ns{code: 1}.bytes(), want{reason: DropMalformed}},
		{"option of length 0", ns{options: []byte{200, 0, 0, 0, 0, 0, 0, 0}}.bytes(), want{reason: DropMalformed}},
		{"option overrunning", ns{options: []byte{200, 2, 0, 0, 0, 0, 0, 0}}.bytes(), want{reason: DropMalformed}},
		{"multicast target", ns{target: netip.MustParseAddr("ff02::1")}.bytes(), want{reason: DropMalformed}},
		{"multicast source", ns{src: netip.MustParseAddr("ff02::2")}.bytes(), want{reason: DropMalformed}},
		{"DAD with SLLA", ns{src: unspec}.bytes(), want{reason: DropMalformed}},
		{"DAD to a unicast destination", ns{src: unspec, noSLLA: true, dst: vip6, ethDst: ourMAC}.bytes(), want{reason: DropMalformed}},
		{"truncated IPv6 header", ns{}.bytes()[:40], want{reason: DropMalformed}},
		{"payload length beyond the frame", ns{}.bytes()[:80], want{reason: DropMalformed}},
		{"IPv4 EtherType", append(append(append([]byte{}, bcast...), peerMAC...), 0x08, 0x00), want{reason: DropMalformed}},
		{"empty", nil, want{reason: DropMalformed}},

		{"solicitation for a quiet VIP", ns{target: vip6Quiet}.bytes(), want{reason: DropSuppressed}},
		{"DAD probe for a quiet VIP", ns{target: vip6Quiet, src: unspec, noSLLA: true}.bytes(), want{reason: DropSuppressed}},
		{"unsolicited NA for the VIP by another host", adv{}.bytes(), want{reason: DropClaim}},
		{"NA for a quiet VIP by another host", adv{target: vip6Quiet}.bytes(), want{reason: DropClaim}},
		{"solicited NA for the VIP to our MAC", adv{dst: peer6, ethDst: ourMAC, solicited: true}.bytes(), want{reason: DropClaim}},
		{"NA without target LLA: the Ethernet source claims", adv{noTLLA: true}.bytes(), want{reason: DropClaim}},
		{"NA answering DAD, from a link-local source", adv{src: peer6}.bytes(), want{reason: DropClaim}},
		{"NA whose target LLA is not the Ethernet source", adv{ethSrc: peerMAC, tlla: otherMAC}.bytes(), want{reason: DropSenderMismatch}},
		{"NA with our MAC as target LLA", adv{tlla: ourMAC}.bytes(), want{reason: DropNotRequest}},
		{"NA for an address not owned", adv{target: netip.MustParseAddr("2001:db8::99")}.bytes(), want{reason: DropNotRequest}},
		{"NA for a VIP owned on another interface", adv{target: vip6Other}.bytes(), want{reason: DropNotRequest}},
		{"NA claim with hop limit 64", adv{hop: 64}.bytes(), want{reason: DropMalformed}},
		{"NA claim with a bad checksum", adv{badSum: true}.bytes(), want{reason: DropMalformed}},
		{"NA claim with code 1", adv{code: 1}.bytes(), want{reason: DropMalformed}},
		{"solicited NA to a multicast group", adv{solicited: true}.bytes(), want{reason: DropMalformed}},
		{"NA claim with a multicast target LLA", adv{tlla: allNodesMAC}.bytes(), want{reason: DropMalformed}},
		{"NA claim to another host's MAC", adv{dst: peer6, ethDst: peerMAC}.bytes(), want{reason: DropForeignDst}},
		{"NA shorter than its fixed part", ipv6Bytes(allNodesMAC, otherMAC, vip6, allNodes, 58, 255, []byte{136, 0, 0, 0, 0x20, 0, 0, 0}), want{reason: DropMalformed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _ := newTestNDP(t)
			reply, dst, reason := r.handle(tc.frame)
			if reason != tc.want.reason {
				t.Fatalf("reason %q, want %q", reason, tc.want.reason)
			}
			if reason != "" {
				return
			}
			got := parseNA(t, reply)
			if !bytes.Equal(dst, tc.want.ethDst) || !bytes.Equal(got.ethDst, tc.want.ethDst) {
				t.Errorf("reply to MAC %s / %s, want %s", dst, got.ethDst, tc.want.ethDst)
			}
			if got.dst != tc.want.dst {
				t.Errorf("reply to %s, want %s", got.dst, tc.want.dst)
			}
			if !bytes.Equal(got.ethSrc, ourMAC) || !bytes.Equal(got.tlla, ourMAC) {
				t.Errorf("reply from %s with target LLA %s, want the interface's %s", got.ethSrc, got.tlla, ourMAC)
			}
			if got.src != got.msg.TargetAddress || got.hop != 255 {
				t.Errorf("reply from %s hop limit %d, want from the target with 255", got.src, got.hop)
			}
			m := got.msg
			if m.Solicited != tc.want.solicited || m.Override || m.Router {
				t.Errorf("flags S=%v O=%v R=%v, want S=%v O=false R=false", m.Solicited, m.Override, m.Router, tc.want.solicited)
			}
		})
	}
}

// withSLLA builds the solicitation with a Source Link-Layer Address option of mac.
func (o ns) withSLLA(mac net.HardwareAddr) []byte {
	o.noSLLA = true
	o.options = append([]byte{1, 1}, mac...)
	return o.bytes()
}

// naBytes is a neighbour advertisement sent to our MAC, which the responder ignores.
func naBytes(t *testing.T) []byte {
	t.Helper()
	b, err := naFrame(peerMAC, ourMAC, peer6, vip6, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNDPServe(t *testing.T) {
	r, c, m := newTestNDP(t)
	done := make(chan error, 1)
	go func() { done <- r.Serve() }()

	c.deliver(t, ns{}.bytes())
	if got := parseNA(t, c.next(t).frame); got.msg.TargetAddress != vip6 {
		t.Fatalf("answered for %s", got.msg.TargetAddress)
	}
	r.owners.Withdraw("svc-a", vip6)
	c.deliver(t, ns{}.bytes())
	c.deliver(t, []byte{0xde, 0xad})
	r.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.none(t)
	for name, pair := range map[string][2]float64{
		"solicitations":  {value(m.NDPSolicitations), 2},
		"advertisements": {value(m.NDPAdvertisements), 1},
		"not-owned":      {value(m.Dropped.WithLabelValues(DropNotOwned)), 1},
		"malformed":      {value(m.Dropped.WithLabelValues(DropMalformed)), 1},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s = %v, want %v", name, pair[0], pair[1])
		}
	}
}

// TestNDPClaims: an advertisement of the VIP by another host is counted and reported;
// this node's other MACs and advertisements of other addresses are not claims.
func TestNDPClaims(t *testing.T) {
	var got []Sighting
	r, _, m := newTestNDP(t, WithSightingHandler(func(c Sighting) { got = append(got, c) }),
		WithNodeMACs(func(mac net.HardwareAddr) bool { return bytes.Equal(mac, peerMAC) }))
	r.handle(adv{}.bytes())
	r.handle(adv{noTLLA: true, ethSrc: peerMAC}.bytes())                         // this node
	r.serveFrame(adv{ethSrc: peerMAC, tlla: otherMAC}.bytes())                   // the option names another MAC than the source
	r.handle(adv{target: netip.MustParseAddr("2001:db8::99")}.bytes())           // not owned
	r.handle(ns{src: vip6, target: netip.MustParseAddr("2001:db8::99")}.bytes()) // a solicitation is no claim
	if len(got) != 1 {
		t.Fatalf("%d claims, want 1: %+v", len(got), got)
	}
	for _, c := range got {
		if c.IP != vip6 || c.Interface != "eth0" || !bytes.Equal(c.MAC, otherMAC) || c.Kind != FrameNeighborAdvertisement {
			t.Errorf("claim %+v, want %s on eth0 by %s", c, vip6, otherMAC)
		}
	}
	if n := value(m.ForeignClaims.WithLabelValues(vip6.String())); n != 1 {
		t.Errorf("foreign_claims_total = %v, want 1", n)
	}
	if n := value(m.Dropped.WithLabelValues(DropSenderMismatch)); n != 1 {
		t.Errorf("dropped_frames_total{reason=sender-mismatch} = %v, want 1", n)
	}
}

// TestNDPProbe: a duplicate address detection solicitation (RFC 4862 §5.4.2).
func TestNDPProbe(t *testing.T) {
	r, c, m := newTestNDP(t)
	if err := r.Probe(vip6); err != nil {
		t.Fatal(err)
	}
	w := c.next(t)
	p, err := parseIPv6(w.frame)
	if err != nil {
		t.Fatal(err)
	}
	group := netip.MustParseAddr("ff02::1:ff00:10")
	groupMAC := net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 0x10}
	if !bytes.Equal(w.dst, groupMAC) || !bytes.Equal(p.ethDst, groupMAC) || !bytes.Equal(p.ethSrc, ourMAC) {
		t.Errorf("probe %s → %s (dst %s), want %s → %s", p.ethSrc, p.ethDst, w.dst, ourMAC, groupMAC)
	}
	if p.src != netip.IPv6Unspecified() || p.dst != group || p.hopLimit != 255 || p.nextHeader != 58 {
		t.Errorf("probe from %s to %s hop limit %d next header %d, want :: to %s, 255, 58", p.src, p.dst, p.hopLimit, p.nextHeader, group)
	}
	if s := icmpv6Checksum(p.src, p.dst, p.icmp); s != 0 {
		t.Errorf("checksum does not verify (%#x)", s)
	}
	msg, err := ndp.ParseMessage(p.icmp)
	if err != nil {
		t.Fatal(err)
	}
	if sol, ok := msg.(*ndp.NeighborSolicitation); !ok || sol.TargetAddress != vip6 || len(sol.Options) != 0 {
		t.Errorf("probe %+v, want a solicitation for %s without options", msg, vip6)
	}
	if value(m.ProbesSent) != 1 {
		t.Errorf("probes_sent = %v, want 1", value(m.ProbesSent))
	}
	if err := r.Probe(vip4); err == nil {
		t.Error("Probe of an IPv4 address on NDP did not fail")
	}
}

func TestNDPAnnounce(t *testing.T) {
	r, c, m := newTestNDP(t)
	if err := r.Announce(vip6); err != nil {
		t.Fatal(err)
	}
	w := c.next(t)
	got := parseNA(t, w.frame)
	if !bytes.Equal(w.dst, allNodesMAC) || got.dst != allNodes {
		t.Errorf("unsolicited NA to %s (%s), want ff02::1", got.dst, w.dst)
	}
	if got.msg.Solicited || !got.msg.Override || got.msg.TargetAddress != vip6 || !bytes.Equal(got.tlla, ourMAC) {
		t.Errorf("unsolicited NA %+v tlla %s, want S=0 O=1 target %s tlla %s", got.msg, got.tlla, vip6, ourMAC)
	}
	if value(m.GratuitousSent) != 1 {
		t.Errorf("gratuitous_sent = %v, want 1", value(m.GratuitousSent))
	}
	if err := r.Announce(vip4); err == nil {
		t.Error("Announce of an IPv4 address on NDP did not fail")
	}
}

// TestNDPTrack: groups are joined once per solicited-node group, shared by VIPs with
// the same low 24 bits, left with the last of them, and failed joins retried.
func TestNDPTrack(t *testing.T) {
	r, c, _ := newTestNDP(t)
	a := netip.MustParseAddr("2001:db8::1:abcd")
	b := netip.MustParseAddr("2001:db8:ffff::1:abcd") // same group as a
	d := netip.MustParseAddr("2001:db8::2")
	ga, _ := ndp.SolicitedNodeMulticast(a)
	gd, _ := ndp.SolicitedNodeMulticast(d)

	step := func(ip netip.Addr, want bool, groups ...netip.Addr) {
		t.Helper()
		if err := r.Track(ip, want); err != nil {
			t.Fatal(err)
		}
		got := c.joined()
		slices.SortFunc(got, netip.Addr.Compare)
		slices.SortFunc(groups, netip.Addr.Compare)
		if !slices.Equal(got, groups) {
			t.Fatalf("joined %v, want %v", got, groups)
		}
	}
	step(a, true, ga)
	step(a, true, ga) // idempotent
	step(b, true, ga) // shares the group: no second join
	step(d, true, ga, gd)
	step(a, false, ga, gd) // b still needs ga
	step(b, false, gd)
	step(b, false, gd)   // idempotent
	step(vip4, true, gd) // IPv4: nothing to join
	step(d, false)

	c.joinErr = errors.New("ENODEV")
	if err := r.Track(a, true); err == nil {
		t.Fatal("failed join not reported")
	}
	if len(r.Groups()) != 0 {
		t.Fatal("a failed join is listed as joined")
	}
	c.joinErr = nil
	if err := r.Rejoin(); err != nil {
		t.Fatal(err)
	}
	if got := r.Groups(); !slices.Equal(got, []netip.Addr{ga}) {
		t.Fatalf("after Rejoin joined %v, want %v", got, ga)
	}
}
