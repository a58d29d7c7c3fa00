package layer2

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/packet"
	"github.com/prometheus/client_golang/prometheus"
)

// vip4Quiet is owned on every interface but quiet (probed or yielded) in the responder
// tests.
var vip4Quiet = netip.MustParseAddr("192.0.2.30")

// newTestARP is a responder on "eth0" (ourMAC) over a fake connection; vip4 is owned
// and allowed on eth0, 192.0.2.20 is owned but allowed only on eth1, vip4Quiet is
// owned and quiet.
func newTestARP(t testing.TB, opts ...ResponderOption) (*ARPResponder, *fakeConn, *Metrics) {
	t.Helper()
	owners := NewTable()
	owners.Set("svc-a", vip4, nil)
	owners.Set("svc-b", netip.MustParseAddr("192.0.2.20"), []string{"eth1"})
	owners.set("svc-c", vip4Quiet, nil, true)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := newFakeConn()
	r, err := NewARPResponder(&net.Interface{Name: "eth0", Index: 2, HardwareAddr: ourMAC}, c, owners, m, logr.Discard(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r, c, m
}

func TestARPRules(t *testing.T) {
	zero := make(net.HardwareAddr, 6)
	wrongHType := arpRequest(vip4)
	wrongHType[15] = 6 // hardware type 6 (IEEE 802)
	wrongPType := arpRequest(vip4)
	wrongPType[17] = 0xdd // protocol 0x08dd
	tagged := append(append(append([]byte{}, bcast...), peerMAC...), 0x81, 0x00, 0x00, 0x0a)
	tagged = append(tagged, arpRequest(vip4)[12:]...)

	cases := []struct {
		name   string
		frame  []byte
		reason string // "" = answered
	}{
		{"broadcast request for owned IP", arpRequest(vip4), ""},
		{"unicast request to our MAC (ARP refresh probe)", arpBytes(ourMAC, peerMAC, 1, peerMAC, peer4, ourMAC, vip4), ""},
		{"probe from 0.0.0.0 (RFC 5227) is defended", arpBytes(bcast, peerMAC, 1, peerMAC, netip.MustParseAddr("0.0.0.0"), zero, vip4), ""},
		{"not owned", arpRequest(netip.MustParseAddr("192.0.2.99")), DropNotOwned},
		{"owned but allowed on another interface", arpRequest(netip.MustParseAddr("192.0.2.20")), DropWrongInterface},
		{"reply, not request", arpBytes(bcast, peerMAC, 2, peerMAC, peer4, zero, vip4), DropNotRequest},
		{"unknown operation", arpBytes(bcast, peerMAC, 9, peerMAC, peer4, zero, vip4), DropNotRequest},
		{"unicast to another MAC (promiscuous)", arpBytes(otherMAC, peerMAC, 1, peerMAC, peer4, zero, vip4), DropForeignDst},
		{"multicast destination", arpBytes(net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, peerMAC, 1, peerMAC, peer4, zero, vip4), DropForeignDst},
		{"our own frame reflected", arpBytes(bcast, ourMAC, 1, ourMAC, vip4, zero, vip4), DropOwnFrame},
		{"empty", nil, DropMalformed},
		{"runt ethernet", []byte{1, 2, 3}, DropMalformed},
		{"truncated ARP", arpRequest(vip4)[:30], DropMalformed},
		{"not ARP EtherType", append(append(append([]byte{}, bcast...), peerMAC...), 0x08, 0x00, 0x45), DropMalformed},
		{"VLAN tag in payload", tagged, DropMalformed},
		{"hardware type not Ethernet", wrongHType, DropMalformed},
		{"protocol not IPv4", wrongPType, DropMalformed},
		{"multicast sender MAC", arpBytes(bcast, peerMAC, 1, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, peer4, zero, vip4), DropMalformed},
		{"zero sender MAC", arpBytes(bcast, peerMAC, 1, zero, peer4, zero, vip4), DropMalformed},

		{"reply from the owned IP by another host", arpBytes(ourMAC, otherMAC, 2, otherMAC, vip4, ourMAC, peer4), DropClaim},
		{"gratuitous request for the owned IP by another host", arpBytes(bcast, otherMAC, 1, otherMAC, vip4, zero, vip4), DropClaim},
		{"gratuitous reply for the owned IP by another host", arpBytes(bcast, otherMAC, 2, otherMAC, vip4, otherMAC, vip4), DropClaim},
		{"request from the owned IP by another host", arpBytes(bcast, otherMAC, 1, otherMAC, vip4, zero, peer4), DropClaim},
		{"request from the owned IP for another owned IP", arpBytes(bcast, otherMAC, 1, otherMAC, vip4, zero, vip4Quiet), DropClaim},
		{"reply claiming a quiet IP", arpBytes(ourMAC, otherMAC, 2, otherMAC, vip4Quiet, ourMAC, peer4), DropClaim},
		{"reply from an IP owned only on another interface", arpBytes(bcast, otherMAC, 2, otherMAC, netip.MustParseAddr("192.0.2.20"), zero, peer4), DropNotRequest},
		{"request from an IP owned only on another interface", arpBytes(bcast, otherMAC, 1, otherMAC, netip.MustParseAddr("192.0.2.20"), zero, vip4), ""},
		{"reply with our MAC as sender, relayed from another MAC", arpBytes(bcast, otherMAC, 2, ourMAC, vip4, zero, vip4), DropNotRequest},
		{"gratuitous reply naming another MAC than the frame's source", arpBytes(bcast, peerMAC, 2, otherMAC, vip4, otherMAC, vip4), DropSenderMismatch},
		{"reply from the owned IP naming another MAC than the frame's source", arpBytes(ourMAC, peerMAC, 2, otherMAC, vip4, ourMAC, peer4), DropSenderMismatch},
		{"request from the owned IP naming another MAC than the frame's source", arpBytes(bcast, peerMAC, 1, otherMAC, vip4, zero, peer4), DropSenderMismatch},
		{"claim in an unknown operation", arpBytes(bcast, otherMAC, 9, otherMAC, vip4, zero, vip4), DropNotRequest},
		{"request for a quiet IP", arpRequest(vip4Quiet), DropSuppressed},
		{"probe for a quiet IP", arpBytes(bcast, peerMAC, 1, peerMAC, netip.MustParseAddr("0.0.0.0"), zero, vip4Quiet), DropSuppressed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _ := newTestARP(t)
			reply, dst, reason := r.handle(tc.frame)
			if reason != tc.reason {
				t.Fatalf("reason %q, want %q", reason, tc.reason)
			}
			if tc.reason != "" {
				if reply != nil {
					t.Fatal("a dropped frame produced a reply")
				}
				return
			}
			_, req := parseARPFrame(t, tc.frame)
			f, p := parseARPFrame(t, reply)
			if !bytes.Equal(dst, req.SenderHardwareAddr) || !bytes.Equal(f.Destination, req.SenderHardwareAddr) {
				t.Errorf("reply goes to %s / %s, want the requester %s", dst, f.Destination, req.SenderHardwareAddr)
			}
			if !bytes.Equal(f.Source, ourMAC) || !bytes.Equal(p.SenderHardwareAddr, ourMAC) {
				t.Errorf("reply from %s, sender MAC %s; want the receiving interface's %s", f.Source, p.SenderHardwareAddr, ourMAC)
			}
			if p.Operation != arp.OperationReply || p.SenderIP != req.TargetIP || p.TargetIP != req.SenderIP ||
				!bytes.Equal(p.TargetHardwareAddr, req.SenderHardwareAddr) {
				t.Errorf("reply %+v does not answer %+v", p, req)
			}
		})
	}
}

// TestARPServe drives Serve over the fake connection: answers are written, drops and
// requests counted, and Withdraw takes effect for the very next packet.
func TestARPServe(t *testing.T) {
	r, c, m := newTestARP(t)
	done := make(chan error, 1)
	go func() { done <- r.Serve() }()

	c.deliver(t, arpRequest(vip4))
	w := c.next(t)
	if _, p := parseARPFrame(t, w.frame); p.SenderIP != vip4 || !bytes.Equal(w.dst, peerMAC) {
		t.Fatalf("reply %+v to %s", p, w.dst)
	}

	r.owners.Withdraw("svc-a", vip4)
	c.deliver(t, arpRequest(vip4))
	c.deliver(t, arpBytes(bcast, peerMAC, 2, peerMAC, peer4, peerMAC, peer4)) // a reply: drained means the previous one was handled
	c.deliver(t, []byte("garbage"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	c.none(t)

	check := func(name string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("requests", value(m.ARPRequests), 2)
	check("replies", value(m.ARPReplies), 1)
	check("not-owned", value(m.Dropped.WithLabelValues(DropNotOwned)), 1)
	check("not-request", value(m.Dropped.WithLabelValues(DropNotRequest)), 1)
	check("malformed", value(m.Dropped.WithLabelValues(DropMalformed)), 1)
}

func TestARPServeReadError(t *testing.T) {
	r, c, _ := newTestARP(t)
	c.Close() // the socket fails under the responder, not through r.Close
	if err := r.Serve(); err == nil {
		t.Fatal("Serve returned nil on a failed socket")
	}
}

// TestARPServeWriteError: a failed write is logged and the loop goes on.
func TestARPServeWriteError(t *testing.T) {
	r, c, m := newTestARP(t)
	c.writeErr = errors.New("ENOBUFS")
	done := make(chan error, 1)
	go func() { done <- r.Serve() }()
	c.deliver(t, arpRequest(vip4))
	c.deliver(t, arpRequest(vip4))
	r.Close()
	<-done
	if got := value(m.ARPReplies); got != 0 {
		t.Errorf("replies = %v after failed writes", got)
	}
	if got := value(m.ARPRequests); got != 2 {
		t.Errorf("requests = %v, want 2 (the loop survived the first failure)", got)
	}
}

func TestARPAnnounce(t *testing.T) {
	r, c, m := newTestARP(t)
	if err := r.Announce(vip4); err != nil {
		t.Fatal(err)
	}
	req, rep := c.next(t), c.next(t)
	for _, w := range []written{req, rep} {
		f, p := parseARPFrame(t, w.frame)
		if !bytes.Equal(w.dst, bcast) || !bytes.Equal(f.Destination, bcast) || !bytes.Equal(f.Source, ourMAC) {
			t.Errorf("gratuitous frame %s → %s (dst %s), want %s → broadcast", f.Source, f.Destination, w.dst, ourMAC)
		}
		if p.SenderIP != vip4 || p.TargetIP != vip4 || !bytes.Equal(p.SenderHardwareAddr, ourMAC) {
			t.Errorf("gratuitous %+v: sender and target IP must be the VIP, sender MAC ours", p)
		}
	}
	if _, p := parseARPFrame(t, req.frame); p.Operation != arp.OperationRequest || !bytes.Equal(p.TargetHardwareAddr, make([]byte, 6)) {
		t.Errorf("first frame %+v, want a request with zero target MAC (RFC 5227)", p)
	}
	if _, p := parseARPFrame(t, rep.frame); p.Operation != arp.OperationReply || !bytes.Equal(p.TargetHardwareAddr, ourMAC) {
		t.Errorf("second frame %+v, want a reply with target MAC = sender MAC (RFC 5944, Linux is_garp)", p)
	}
	if got := value(m.GratuitousSent); got != 2 {
		t.Errorf("gratuitous_sent = %v, want 2", got)
	}
	if err := r.Announce(vip6); err == nil {
		t.Error("Announce of an IPv6 address on ARP did not fail")
	}
}

// TestARPClaims: claims are counted by IP on every frame, reported with what the
// announcer needs, and not made by this node's other MACs or by probes.
func TestARPClaims(t *testing.T) {
	var got []Sighting
	clk := newFakeClock()
	r, _, m := newTestARP(t, WithSightingHandler(func(c Sighting) { got = append(got, c) }),
		WithNodeMACs(func(mac net.HardwareAddr) bool { return bytes.Equal(mac, peerMAC) }), withClock(clk))
	zero := make(net.HardwareAddr, 6)
	frames := []struct {
		frame []byte
		kind  FrameKind // "" = not a claim
	}{
		{arpBytes(ourMAC, otherMAC, 2, otherMAC, vip4, ourMAC, peer4), FrameARPReply},
		{arpBytes(bcast, otherMAC, 1, otherMAC, vip4, zero, vip4), FrameGratuitousARP},
		{arpBytes(bcast, otherMAC, 2, otherMAC, vip4, otherMAC, vip4), FrameGratuitousARP},
		{arpBytes(bcast, otherMAC, 1, otherMAC, vip4, zero, peer4), FrameARPRequest},
		{arpBytes(bcast, peerMAC, 1, peerMAC, vip4, zero, vip4), ""},                             // another interface of this node
		{arpBytes(bcast, otherMAC, 1, otherMAC, netip.MustParseAddr("0.0.0.0"), zero, vip4), ""}, // a probe asks
		{arpBytes(bcast, otherMAC, 2, otherMAC, peer4, zero, peer4), ""},                         // not owned
	}
	var want []FrameKind
	for _, f := range frames {
		clk.Advance(time.Second)
		r.handle(f.frame)
		if f.kind != "" {
			want = append(want, f.kind)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d claims reported, want %d: %+v", len(got), len(want), got)
	}
	for i, c := range got {
		if c.Kind != want[i] || c.IP != vip4 || c.Interface != "eth0" || !bytes.Equal(c.MAC, otherMAC) || c.Peer {
			t.Errorf("claim %d = %+v, want %s of %s on eth0 by %s", i, c, want[i], vip4, otherMAC)
		}
		if wantAt := newFakeClock().Now().Add(time.Duration(i+1) * time.Second); !c.At.Equal(wantAt) {
			t.Errorf("claim %d at %v, want %v (the responder's clock)", i, c.At, wantAt)
		}
	}
	if n := value(m.ForeignClaims.WithLabelValues(vip4.String())); n != 4 {
		t.Errorf("foreign_claims_total{ip=%q} = %v, want 4", vip4, n)
	}
}

// TestARPProbe: an RFC 5227 probe, broadcast from our MAC with sender IP 0.0.0.0.
func TestARPProbe(t *testing.T) {
	r, c, m := newTestARP(t)
	if err := r.Probe(vip4); err != nil {
		t.Fatal(err)
	}
	w := c.next(t)
	f, p := parseARPFrame(t, w.frame)
	if !bytes.Equal(w.dst, bcast) || !bytes.Equal(f.Destination, bcast) || !bytes.Equal(f.Source, ourMAC) {
		t.Errorf("probe %s → %s (dst %s), want %s → broadcast", f.Source, f.Destination, w.dst, ourMAC)
	}
	if p.Operation != arp.OperationRequest || !bytes.Equal(p.SenderHardwareAddr, ourMAC) ||
		p.SenderIP != netip.IPv4Unspecified() || !bytes.Equal(p.TargetHardwareAddr, make([]byte, 6)) || p.TargetIP != vip4 {
		t.Errorf("probe %+v, want a request from %s, 0.0.0.0 for %s with zero target MAC", p, ourMAC, vip4)
	}
	if value(m.ProbesSent) != 1 || value(m.GratuitousSent) != 0 {
		t.Errorf("probes_sent = %v, gratuitous_sent = %v; want 1, 0", value(m.ProbesSent), value(m.GratuitousSent))
	}
	if err := r.Probe(vip6); err == nil {
		t.Error("Probe of an IPv6 address on ARP did not fail")
	}
	c.writeErr = errors.New("ENETDOWN")
	if err := r.Probe(vip4); err == nil || !strings.Contains(err.Error(), vip4.String()) {
		t.Errorf("failed probe: %v, want an error naming %s", err, vip4)
	}
}

func TestNewARPResponderNeedsMAC(t *testing.T) {
	if _, err := NewARPResponder(&net.Interface{Name: "wg0"}, newFakeConn(), NewTable(), nil, logr.Discard()); err == nil {
		t.Fatal("responder built on an interface without MAC")
	}
}

// TestARPOverMdlayherClient: an mdlayher/arp.Client, built with arp.New over a
// connection wired to the responder's fake, resolves the VIP through the responder,
// so the replies parse as that library's users expect.
func TestARPOverMdlayherClient(t *testing.T) {
	r, c, _ := newTestARP(t)
	go r.Serve()
	defer r.Close()

	// arp.New wants an IPv4 address on the client's interface and reads it through
	// ifi.Addrs(); borrow the loopback's index for that (read only).
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("need a loopback interface to borrow an IPv4 address from: %v", err)
	}
	ifi := &net.Interface{Name: "peer0", Index: lo.Index, HardwareAddr: peerMAC}
	cl, err := arp.New(ifi, &loopConn{peer: c})
	if err != nil {
		t.Fatal(err)
	}
	mac, err := cl.Resolve(vip4)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mac, ourMAC) {
		t.Fatalf("resolved %s, want %s", mac, ourMAC)
	}
}

// loopConn is the other end of a fakeConn, as a net.PacketConn: what it writes the
// responder reads, what the responder writes it reads.
type loopConn struct{ peer *fakeConn }

func (l *loopConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case w := <-l.peer.out:
		return copy(b, w.frame), &packet.Addr{HardwareAddr: w.dst}, nil
	case <-time.After(hangGuard):
		return 0, nil, errors.New("loopConn: nothing to read")
	}
}

func (l *loopConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	select {
	case l.peer.in <- slices.Clone(b):
		return len(b), nil
	case <-time.After(hangGuard):
		return 0, errors.New("loopConn: nobody reads")
	}
}

func (l *loopConn) Close() error                     { return nil }
func (l *loopConn) LocalAddr() net.Addr              { return &packet.Addr{HardwareAddr: peerMAC} }
func (l *loopConn) SetDeadline(time.Time) error      { return nil }
func (l *loopConn) SetReadDeadline(time.Time) error  { return nil }
func (l *loopConn) SetWriteDeadline(time.Time) error { return nil }
