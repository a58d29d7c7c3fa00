package layer2

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"github.com/prometheus/client_golang/prometheus"
	"herald.dev/herald/internal/testkit"
)

// In these tests otherMAC is a foreign device (the printer) and peerMAC another herald
// speaker (the harness's Peer).

var thirdMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x04}

// foreignGARP is a gratuitous ARP request by mac announcing ip.
func foreignGARP(ip netip.Addr, mac net.HardwareAddr) []byte {
	return arpBytes(bcast, mac, 1, mac, ip, make(net.HardwareAddr, 6), ip)
}

// probeAnswer is mac's reply to our probe for ip, sent to ours (as Linux does).
func probeAnswer(ip netip.Addr, mac, ours net.HardwareAddr) []byte {
	return arpBytes(ours, mac, 2, mac, ip, ours, netip.IPv4Unspecified())
}

// arpProbe reads one frame from c and checks it is an ARP probe for ip from mac.
func arpProbe(t *testing.T, c *fakeConn, ip netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	_, p := parseARPFrame(t, c.next(t).frame)
	if p.Operation != arp.OperationRequest || !p.SenderIP.IsUnspecified() || p.TargetIP != ip || !bytes.Equal(p.SenderHardwareAddr, mac) {
		t.Fatalf("got %+v, want an ARP probe for %s from %s", p, ip, mac)
	}
}

// dadProbe reads one frame from c and checks it is a DAD solicitation for ip.
func dadProbe(t *testing.T, c *fakeConn, ip netip.Addr) {
	t.Helper()
	p, err := parseIPv6(c.next(t).frame)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ndp.ParseMessage(p.icmp)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := m.(*ndp.NeighborSolicitation); !ok || s.TargetAddress != ip || !p.src.IsUnspecified() {
		t.Fatalf("got %+v from %s, want a DAD solicitation for %s", m, p.src, ip)
	}
}

// unsolicitedNA reads one frame from c and checks it announces ip.
func unsolicitedNA(t *testing.T, c *fakeConn, ip netip.Addr) {
	t.Helper()
	if got := parseNA(t, c.next(t).frame); got.msg.TargetAddress != ip || !got.msg.Override || got.dst != allNodes {
		t.Fatalf("got %+v to %s, want an unsolicited NA for %s", got.msg, got.dst, ip)
	}
}

// answered checks that a request for ip on c gets a reply (true) or is dropped.
func answered(t *testing.T, c *fakeConn, ip netip.Addr, want bool) {
	t.Helper()
	c.deliver(t, arpRequest(ip))
	c.deliver(t, []byte("sentinel")) // read only once the request was handled
	if !want {
		c.none(t)
		return
	}
	if _, p := parseARPFrame(t, c.next(t).frame); p.Operation != arp.OperationReply || p.SenderIP != ip {
		t.Fatalf("got %+v, want a reply for %s", p, ip)
	}
}

func (h *harness) nextClaim() Sighting {
	h.t.Helper()
	select {
	case c := <-h.claims:
		return c
	case <-time.After(hangGuard):
		h.t.Fatal("no claim reported")
		return Sighting{}
	}
}

func (h *harness) nextConflict() Conflict {
	h.t.Helper()
	select {
	case c := <-h.conflicts:
		return c
	case <-time.After(hangGuard):
		h.t.Fatal("no conflict reported")
		return Conflict{}
	}
}

func (h *harness) nextCleared() Conflict {
	h.t.Helper()
	select {
	case c := <-h.cleared:
		return c
	case <-time.After(hangGuard):
		h.t.Fatal("no cleared conflict reported")
		return Conflict{}
	}
}

func (h *harness) noConflict() {
	h.t.Helper()
	select {
	case c := <-h.conflicts:
		h.t.Fatalf("unexpected conflict %+v", c)
	case c := <-h.cleared:
		h.t.Fatalf("unexpected cleared conflict %+v", c)
	default:
	}
}

// gauges returns the herald_l2_conflict series as "ip mac" → value.
func (h *harness) gauges() map[string]float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "herald_l2_conflict" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ip, mac string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "ip":
					ip = l.GetValue()
				case "mac":
					mac = l.GetValue()
				}
			}
			out[ip+" "+mac] = m.GetGauge().GetValue()
		}
	}
	return out
}

func (h *harness) wantGauges(want ...string) {
	h.t.Helper()
	got := h.gauges()
	if len(got) != len(want) {
		h.t.Fatalf("conflict gauges %v, want %v at 1", got, want)
	}
	for _, k := range want {
		if got[k] != 1 {
			h.t.Fatalf("conflict gauges %v, want %v at 1", got, want)
		}
	}
}

// waitTimerAt waits until the only pending timer is due in d: the takeover loop has
// acted on everything sent to it and waits again.
func (c *fakeClock) waitTimerAt(t *testing.T, d time.Duration) {
	t.Helper()
	testkit.Eventually(t, hangGuard, time.Millisecond, fmt.Sprintf("one timer due in %v", d), func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.timers) == 1 && c.timers[0].deadline.Sub(c.now) == d {
			return nil
		}
		var ds []time.Duration
		for _, tm := range c.timers {
			ds = append(ds, tm.deadline.Sub(c.now))
		}
		return fmt.Errorf("pending timers %v", ds)
	})
}

// takeoverOf returns the loop of ip.
func (h *harness) takeoverOf(ip netip.Addr) *takeover {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	t := h.a.takeovers[ip]
	if t == nil {
		h.t.Fatalf("no takeover for %s", ip)
	}
	return t
}

// ownedAndAnnounced sets vip4 on a one-interface harness and reads its first burst.
func ownedAndAnnounced(t *testing.T, sched Schedule) (*harness, *fakeConn) {
	h := newHarness(t, sched, iface("eth0", 2, mac0))
	h.a.rescan()
	h.set("svc", vip4)
	c := h.conn("eth0/arp")
	garp(t, c, vip4, mac0)
	h.nextAnnouncement()
	return h, c
}

// TestConflictDefendThenYield: a foreign claim is defended once (one announcement and
// one probe); a second one within DefendInterval makes the node yield: reported,
// gauged, requests unanswered, no more announcements; the IP stays owned.
func TestConflictDefendThenYield(t *testing.T) {
	h, c := ownedAndAnnounced(t, Schedule{Repeats: []time.Duration{time.Hour}, Refresh: 30 * time.Second})
	start := h.clk.Now()

	h.clk.Advance(time.Second)
	c.deliver(t, foreignGARP(vip4, otherMAC))
	if cl := h.nextClaim(); cl.Peer || cl.IP != vip4 || !bytes.Equal(cl.MAC, otherMAC) || cl.Kind != FrameGratuitousARP || !cl.At.Equal(start.Add(time.Second)) {
		t.Fatalf("claim %+v", cl)
	}
	garp(t, c, vip4, mac0) // the one defence
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, time.Hour-time.Second) // back on the schedule
	h.noConflict()
	answered(t, c, vip4, true)

	h.clk.Advance(9 * time.Second) // within DefendInterval of the defended claim
	c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
	h.nextClaim()
	conf := h.nextConflict()
	if conf.IP != vip4 || conf.Interface != "eth0" || !bytes.Equal(conf.MAC, otherMAC) || conf.BeforeAnnounce ||
		!conf.At.Equal(start.Add(10*time.Second)) || !conf.Cleared.IsZero() {
		t.Fatalf("conflict %+v", conf)
	}
	h.wantGauges(vip4.String() + " " + otherMAC.String())
	if got, ok := h.a.Conflict(vip4); !ok || !bytes.Equal(got.MAC, otherMAC) {
		t.Fatalf("Conflict(%s) = %+v %v", vip4, got, ok)
	}
	answered(t, c, vip4, false)
	if got := value(h.a.metrics.Dropped.WithLabelValues(DropSuppressed)); got != 1 {
		t.Fatalf("suppressed drops = %v, want 1", got)
	}
	if got := value(h.a.metrics.Dropped.WithLabelValues(DropClaim)); got != 2 {
		t.Fatalf("claim drops = %v, want 2", got)
	}
	if got := value(h.a.metrics.ForeignClaims.WithLabelValues(vip4.String())); got != 2 {
		t.Fatalf("foreign claims = %v, want 2", got)
	}
	// Yielded: the schedule is gone; the next thing is the first recheck.
	h.clk.waitTimerAt(t, DefaultConflictRecheckFirst)
	if !h.a.owners.Owned(vip4) || !h.a.owners.Quiet(vip4) {
		t.Fatal("a yielded IP must stay owned and be quiet")
	}
	c.none(t)
}

// TestConflictDefendAgainAfterInterval: claims further apart than DefendInterval are
// each defended; the node never yields to them.
func TestConflictDefendAgainAfterInterval(t *testing.T) {
	h, c := ownedAndAnnounced(t, Schedule{Repeats: []time.Duration{time.Hour}})
	for range 3 {
		c.deliver(t, foreignGARP(vip4, otherMAC))
		garp(t, c, vip4, mac0)
		arpProbe(t, c, vip4, mac0)
		h.clk.Advance(DefaultDefendInterval)
	}
	h.noConflict()
	answered(t, c, vip4, true)
}

// TestConflictPeerNeverYields: claims by another speaker are counted and reported as
// peer claims, never defended against and never make the node yield.
func TestConflictPeerNeverYields(t *testing.T) {
	h, c := ownedAndAnnounced(t, Schedule{Repeats: []time.Duration{time.Hour}})
	for range 5 {
		c.deliver(t, foreignGARP(vip4, peerMAC))
		if cl := h.nextClaim(); !cl.Peer || !bytes.Equal(cl.MAC, peerMAC) {
			t.Fatalf("claim %+v, want a peer claim", cl)
		}
	}
	answered(t, c, vip4, true) // also proves nothing else was written
	h.noConflict()
	if got := value(h.a.metrics.ForeignClaims.WithLabelValues(vip4.String())); got != 5 {
		t.Fatalf("foreign claims = %v, want 5", got)
	}
	h.wantGauges()
}

// TestConflictOwnInterfaces: a node with two interfaces on one LAN hears its own
// announcements on the other one; they are not claims.
func TestConflictOwnInterfaces(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}}, iface("eth0", 2, mac0), iface("eth1", 3, mac1))
	h.a.rescan()
	h.set("svc", vip4)
	c0, c1 := h.conn("eth0/arp"), h.conn("eth1/arp")
	garp(t, c0, vip4, mac0)
	garp(t, c1, vip4, mac1)
	c1.deliver(t, foreignGARP(vip4, mac0))
	c1.deliver(t, probeAnswer(vip4, mac0, mac1))
	c1.deliver(t, []byte("sentinel"))
	c1.next(t) // the gratuitous request from eth0 is answered, as before
	c0.none(t)
	c1.none(t)
	if got := value(h.a.metrics.ForeignClaims.WithLabelValues(vip4.String())); got != 0 {
		t.Fatalf("foreign claims = %v, want 0", got)
	}
	select {
	case cl := <-h.claims:
		t.Fatalf("claim %+v reported for this node's own MAC", cl)
	default:
	}
}

// TestConflictProbeFindsOwner: with Probe, nothing is answered or announced before the
// probe round ends; a foreign answer makes the node yield without ever announcing.
// The conflict then clears once a recheck goes unanswered, and the IP is announced.
func TestConflictProbeFindsOwner(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}, Refresh: 30 * time.Second}, iface("eth0", 2, mac0))
	h.a.cfg.ConflictYieldMax = time.Hour // the backoff alone; TestConflictYieldMax has the bound
	h.a.rescan()
	c := h.conn("eth0/arp")
	if err := h.a.Set("svc", vip4, nil, Probe()); err != nil {
		t.Fatal(err)
	}
	arpProbe(t, c, vip4, mac0)
	answered(t, c, vip4, false)
	c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
	conf := h.nextConflict()
	if !conf.BeforeAnnounce || !bytes.Equal(conf.MAC, otherMAC) {
		t.Fatalf("conflict %+v, want one found before announcing, by %s", conf, otherMAC)
	}
	h.wantGauges(vip4.String() + " " + otherMAC.String())

	// Rechecks after 1 s, then waits doubling to 8 s while the device answers.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		h.clk.waitTimerAt(t, wait)
		h.clk.Advance(wait)
		arpProbe(t, c, vip4, mac0)
		c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
	}
	h.clk.waitTimerAt(t, 8*time.Second)
	h.noConflict()
	h.noAnnouncement()
	if got := value(h.a.metrics.GratuitousSent); got != 0 {
		t.Fatalf("gratuitous_sent = %v for an IP found in use", got)
	}

	// The device is gone: two unanswered probes, ProbeWait/2 apart, clear it.
	h.clk.Advance(8 * time.Second)
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, DefaultProbeWait/2)
	h.clk.Advance(DefaultProbeWait / 2)
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, DefaultProbeWait/2)
	h.clk.Advance(DefaultProbeWait / 2)
	cleared := h.nextCleared()
	if !bytes.Equal(cleared.MAC, otherMAC) || !cleared.Cleared.Equal(h.clk.Now()) || cleared.At.IsZero() {
		t.Fatalf("cleared %+v", cleared)
	}
	garp(t, c, vip4, mac0) // at once
	if an := h.nextAnnouncement(); !an.At.Equal(h.clk.Now()) {
		t.Fatalf("announcement %+v, want the first one now", an)
	}
	h.wantGauges()
	if _, ok := h.a.Conflict(vip4); ok {
		t.Fatal("Conflict reported after it cleared")
	}
	answered(t, c, vip4, true)
	h.clk.waitTimerAt(t, time.Hour) // the schedule from its start
}

// TestConflictProbeSilent: a probe nobody answers delays the first announcement by
// ProbeWait, and only then are requests answered.
func TestConflictProbeSilent(t *testing.T) {
	h, c, start := setWith(t, Probe())
	unansweredRound(t, h, c, DefaultProbeWait)
	garp(t, c, vip4, mac0)
	if an := h.nextAnnouncement(); !an.At.Equal(start.Add(DefaultProbeWait)) {
		t.Fatalf("announced at %v, want %v", an.At, start.Add(DefaultProbeWait))
	}
	answered(t, c, vip4, true)
	h.noConflict()
	if got := value(h.a.metrics.ProbesSent); got != 2 {
		t.Fatalf("probes_sent = %v, want 2", got)
	}

	// Probe is for a new IP: on an IP already owned it changes nothing.
	if err := h.a.Set("svc2", vip4, nil, Probe()); err != nil {
		t.Fatal(err)
	}
	answered(t, c, vip4, true)
}

// TestConflictProbePeerAnswers: a peer answering the probe is not reported as a
// claim (this node does not answer yet), and the IP stays quiet until a whole round
// goes unanswered: the peer carries it meanwhile.
func TestConflictProbePeerAnswers(t *testing.T) {
	h, c, start := setWith(t, Probe())
	peerStillAnswers(t, h, c, DefaultProbeWait)
	if an := h.nextAnnouncement(); !an.At.Equal(start.Add(2 * DefaultProbeWait)) {
		t.Fatalf("announced at %v, want %v (after a second, unanswered round)", an.At, start.Add(2*DefaultProbeWait))
	}
	h.noConflict()
}

// setWith makes vip4 owned with opt on a harness with one interface, eth0, and
// returns the harness, eth0's ARP connection and when the Set was made.
func setWith(t *testing.T, opt SetOption) (*harness, *fakeConn, time.Time) {
	t.Helper()
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}}, iface("eth0", 2, mac0))
	h.a.rescan()
	c := h.conn("eth0/arp")
	start := h.clk.Now()
	if err := h.a.Set("svc", vip4, nil, opt); err != nil {
		t.Fatal(err)
	}
	return h, c, start
}

// unansweredRound plays a probe round of length wait that nobody answers: two
// probes wait/2 apart, the IP quiet all along, and the round's end.
func unansweredRound(t *testing.T, h *harness, c *fakeConn, wait time.Duration) {
	t.Helper()
	arpProbe(t, c, vip4, mac0)
	answered(t, c, vip4, false)
	h.clk.waitTimerAt(t, wait/2)
	h.clk.Advance(wait / 2)
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, wait/2)
	answered(t, c, vip4, false)
	h.clk.Advance(wait / 2)
}

// peerStillAnswers plays a peer answering the first probe round of a takeover and then
// falling silent: the IP stays quiet for the round, a second round goes unanswered,
// and the IP is announced.
func peerStillAnswers(t *testing.T, h *harness, c *fakeConn, wait time.Duration) {
	t.Helper()
	arpProbe(t, c, vip4, mac0)
	c.deliver(t, probeAnswer(vip4, peerMAC, mac0))
	h.clk.waitTimerAt(t, wait)  // the rest of the round, quiet
	answered(t, c, vip4, false) // the responder has handled the answer by now
	// Not reported as a claim: this node does not answer for the IP yet, so the peer
	// answering is no split brain.
	select {
	case cl := <-h.claims:
		t.Fatalf("claim %+v reported while the IP was quiet", cl)
	default:
	}
	h.clk.Advance(wait)
	unansweredRound(t, h, c, wait)
	garp(t, c, vip4, mac0)
	answered(t, c, vip4, true)
	if got := value(h.a.metrics.TakeoversDeferred); got != 1 {
		t.Fatalf("takeovers_deferred = %v, want 1", got)
	}
}

// TestWaitForPeers: a takeover from a lost owner costs one short round when the owner
// is dead, and waits while it still answers (cut off, not dead); a foreign device
// answering is a conflict as with Probe.
func TestWaitForPeers(t *testing.T) {
	t.Run("previous owner dead", func(t *testing.T) {
		h, c, start := setWith(t, WaitForPeers())
		unansweredRound(t, h, c, DefaultPeerProbeWait)
		garp(t, c, vip4, mac0)
		if an := h.nextAnnouncement(); !an.At.Equal(start.Add(DefaultPeerProbeWait)) {
			t.Fatalf("announced at %v, want %v", an.At, start.Add(DefaultPeerProbeWait))
		}
		if got := value(h.a.metrics.TakeoversDeferred); got != 0 {
			t.Fatalf("takeovers_deferred = %v, want 0", got)
		}
		// Once announcing, a peer's claim is the quorum rule's business, not a reason
		// to go quiet again.
		c.deliver(t, foreignGARP(vip4, peerMAC))
		h.nextClaim()
		answered(t, c, vip4, true)
	})
	t.Run("previous owner still answers", func(t *testing.T) {
		h, c, start := setWith(t, WaitForPeers())
		peerStillAnswers(t, h, c, DefaultPeerProbeWait)
		if an := h.nextAnnouncement(); !an.At.Equal(start.Add(2 * DefaultPeerProbeWait)) {
			t.Fatalf("announced at %v, want %v", an.At, start.Add(2*DefaultPeerProbeWait))
		}
		h.noConflict()
	})
	t.Run("a peer's MAC answers past the longest wait", func(t *testing.T) {
		// A forger answering every probe with a dead node's MAC (or a speaker the
		// quorum rule cannot silence) holds the takeover only PeerWaitMax.
		h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}}, iface("eth0", 2, mac0))
		h.a.cfg.PeerWaitMax = 4 * DefaultPeerProbeWait
		h.a.rescan()
		c := h.conn("eth0/arp")
		start := h.clk.Now()
		if err := h.a.Set("svc", vip4, nil, WaitForPeers()); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			arpProbe(t, c, vip4, mac0)
			c.deliver(t, probeAnswer(vip4, peerMAC, mac0))
			h.clk.waitTimerAt(t, DefaultPeerProbeWait)
			answered(t, c, vip4, false)
			h.clk.Advance(DefaultPeerProbeWait)
		}
		garp(t, c, vip4, mac0)
		if an := h.nextAnnouncement(); !an.At.Equal(start.Add(4 * DefaultPeerProbeWait)) {
			t.Fatalf("announced at %v, want %v", an.At, start.Add(4*DefaultPeerProbeWait))
		}
		answered(t, c, vip4, true)
		if got := value(h.a.metrics.PeerWaitsExpired); got != 1 {
			t.Fatalf("peer_waits_expired = %v, want 1", got)
		}
	})
	t.Run("foreign device answers", func(t *testing.T) {
		h, c, _ := setWith(t, WaitForPeers())
		arpProbe(t, c, vip4, mac0)
		c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
		if cf := h.nextConflict(); !cf.BeforeAnnounce || !bytes.Equal(cf.MAC, otherMAC) {
			t.Fatalf("conflict %+v, want one before announcing, with %s", cf, otherMAC)
		}
		answered(t, c, vip4, false)
	})
}

// yielded brings vip4 to the yielded state by two foreign claims.
func yielded(t *testing.T, sched Schedule) (*harness, *fakeConn) {
	h, c := ownedAndAnnounced(t, sched)
	c.deliver(t, foreignGARP(vip4, otherMAC))
	garp(t, c, vip4, mac0)
	arpProbe(t, c, vip4, mac0)
	c.deliver(t, probeAnswer(vip4, otherMAC, mac0))
	h.nextConflict()
	return h, c
}

// TestConflictWithdrawWhileYielded: Withdraw ends the loop and the gauge, without a
// cleared report; nothing is sent afterwards.
func TestConflictWithdrawWhileYielded(t *testing.T) {
	h, c := yielded(t, Schedule{Repeats: []time.Duration{time.Hour}, Refresh: time.Minute})
	tk := h.takeoverOf(vip4)
	h.clk.waitTimerAt(t, DefaultConflictRecheckFirst)
	h.a.Withdraw("svc", vip4)
	select {
	case <-tk.done:
	case <-time.After(hangGuard):
		t.Fatal("the takeover loop did not return after Withdraw")
	}
	h.waitIdle()
	h.wantGauges()
	h.clk.Advance(time.Hour)
	answered(t, c, vip4, false)
	h.noConflict()
	if _, ok := h.a.Conflict(vip4); ok {
		t.Fatal("Conflict reported for a withdrawn IP")
	}
	if h.a.owners.Owned(vip4) {
		t.Fatal("still owned")
	}

	// Set again: a fresh takeover, answered and announced, not quiet.
	h.set("svc", vip4)
	garp(t, c, vip4, mac0)
	answered(t, c, vip4, true)
}

// TestConflictReannounceWhileYielded probes at once instead of announcing, and a
// claim from another foreign MAC while yielded moves the conflict to it.
func TestConflictReannounceWhileYielded(t *testing.T) {
	h, c := yielded(t, Schedule{Repeats: []time.Duration{time.Hour}, Refresh: time.Minute})
	h.clk.waitTimerAt(t, DefaultConflictRecheckFirst)

	c.deliver(t, foreignGARP(vip4, thirdMAC))
	if conf := h.nextConflict(); !bytes.Equal(conf.MAC, thirdMAC) {
		t.Fatalf("conflict %+v, want it moved to %s", conf, thirdMAC)
	}
	h.wantGauges(vip4.String() + " " + thirdMAC.String())

	h.a.Reannounce(vip4)
	arpProbe(t, c, vip4, mac0)
	c.deliver(t, probeAnswer(vip4, thirdMAC, mac0))
	h.clk.waitTimerAt(t, 2*DefaultConflictRecheckFirst)
	h.noConflict()

	h.a.Reannounce(vip4)
	arpProbe(t, c, vip4, mac0)
	h.clk.Advance(DefaultProbeWait / 2)
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, DefaultProbeWait/2)
	h.clk.Advance(DefaultProbeWait / 2)
	if cl := h.nextCleared(); !bytes.Equal(cl.MAC, thirdMAC) {
		t.Fatalf("cleared %+v", cl)
	}
	garp(t, c, vip4, mac0)
	// Reported again: the caller shows this node as the owner once more.
	if a := h.nextAnnouncement(); a.IP != vip4 {
		t.Fatalf("announcement after the conflict: %+v", a)
	}
	h.wantGauges()
}

// TestConflictYieldAfterRecovery: the defence record starts over when a conflict
// clears, so the next claim is defended again.
func TestConflictYieldAfterRecovery(t *testing.T) {
	h, c := yielded(t, Schedule{Repeats: []time.Duration{time.Hour}})
	h.a.Reannounce(vip4)
	arpProbe(t, c, vip4, mac0)
	h.clk.Advance(DefaultProbeWait / 2)
	arpProbe(t, c, vip4, mac0)
	h.clk.waitTimerAt(t, DefaultProbeWait/2)
	h.clk.Advance(DefaultProbeWait / 2)
	h.nextCleared()
	garp(t, c, vip4, mac0)
	c.deliver(t, foreignGARP(vip4, otherMAC))
	garp(t, c, vip4, mac0)
	arpProbe(t, c, vip4, mac0)
	h.noConflict()
}

// TestConflictIPv6: the same rules over NDP: a DAD probe before announcing finds the
// owner by its advertisement; after it goes, the VIP is announced; a later owner is
// defended against once, then yielded to.
func TestConflictIPv6(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}, Refresh: time.Minute}, iface("eth0", 2, mac0))
	h.a.rescan()
	n := h.conn("eth0/ndp")
	if err := h.a.Set("svc", vip6, nil, Probe()); err != nil {
		t.Fatal(err)
	}
	dadProbe(t, n, vip6)
	n.deliver(t, ns{}.bytes())
	n.deliver(t, adv{}.bytes()) // the owner answers DAD to all nodes
	if conf := h.nextConflict(); !conf.BeforeAnnounce || conf.IP != vip6 || !bytes.Equal(conf.MAC, otherMAC) {
		t.Fatalf("conflict %+v", conf)
	}
	h.wantGauges(vip6.String() + " " + otherMAC.String())
	if got := value(h.a.metrics.Dropped.WithLabelValues(DropSuppressed)); got != 1 {
		t.Fatalf("suppressed drops = %v, want 1 (the solicitation during the probe)", got)
	}

	h.clk.waitTimerAt(t, DefaultConflictRecheckFirst)
	h.clk.Advance(DefaultConflictRecheckFirst)
	dadProbe(t, n, vip6)
	h.clk.Advance(DefaultProbeWait / 2)
	dadProbe(t, n, vip6)
	h.clk.waitTimerAt(t, DefaultProbeWait/2)
	h.clk.Advance(DefaultProbeWait / 2)
	h.nextCleared()
	unsolicitedNA(t, n, vip6)
	h.nextAnnouncement()

	n.deliver(t, adv{}.bytes())
	unsolicitedNA(t, n, vip6) // defended
	dadProbe(t, n, vip6)
	n.deliver(t, adv{}.bytes())
	if conf := h.nextConflict(); conf.BeforeAnnounce {
		t.Fatalf("conflict %+v, want one while announcing", conf)
	}
	h.conn("eth0/arp").none(t)
}

// TestConflictConfig: timings default as documented and must not be negative.
func TestConflictConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg                   Config
		defend, wait, recheck time.Duration
		wantErr               bool
	}{
		{cfg: DefaultConfig(), defend: 10 * time.Second, wait: 200 * time.Millisecond, recheck: 8 * time.Second},
		{cfg: Config{Schedule: Schedule{Refresh: 5 * time.Second}}, defend: 10 * time.Second, wait: 200 * time.Millisecond, recheck: 8 * time.Second},
		{cfg: Config{}, defend: 10 * time.Second, wait: 200 * time.Millisecond, recheck: 8 * time.Second},
		{cfg: Config{DefendInterval: time.Second, ProbeWait: time.Millisecond, ConflictRecheck: time.Hour}, defend: time.Second, wait: time.Millisecond, recheck: time.Hour},
		{cfg: Config{DefendInterval: -1}, wantErr: true},
		{cfg: Config{ProbeWait: -1}, wantErr: true},
		{cfg: Config{ConflictRecheck: -1}, wantErr: true},
		{cfg: Config{ConflictYieldMax: -1}, wantErr: true},
		{cfg: Config{ConflictRecheckFirst: time.Minute, ConflictRecheck: time.Second}, wantErr: true},
	} {
		tc.cfg.Registerer = prometheus.NewRegistry()
		a, err := newAnnouncer(tc.cfg, system{}, newFakeClock())
		if tc.wantErr {
			if err == nil {
				t.Errorf("%+v accepted", tc.cfg)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.cfg.ConflictYieldMax <= 0 {
			t.Errorf("longest yield %v, want the default or the one set", a.cfg.ConflictYieldMax)
		}
		if a.cfg.DefendInterval != tc.defend || a.cfg.ProbeWait != tc.wait || a.cfg.ConflictRecheck != tc.recheck {
			t.Errorf("defend %v wait %v recheck %v, want %v %v %v", a.cfg.DefendInterval, a.cfg.ProbeWait, a.cfg.ConflictRecheck, tc.defend, tc.wait, tc.recheck)
		}
	}
}

// TestPeerWaitOver: the wait is over at the limit, and never before a peer answered.
func TestPeerWaitOver(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		since time.Time
		at    time.Duration
		want  bool
	}{{t0, 0, false}, {t0, 10*time.Second - 1, false}, {t0, 10 * time.Second, true}, {time.Time{}, time.Hour, false}} {
		if got := peerWaitOver(tc.since, t0.Add(tc.at), 10*time.Second); got != tc.want {
			t.Errorf("since %v at +%v: %v, want %v", tc.since, tc.at, got, tc.want)
		}
	}
}

// TestRecheckAfter: the waits between probes of a yielded IP double from the first and
// stop at the limit.
func TestRecheckAfter(t *testing.T) {
	var got []time.Duration
	for n := range 7 {
		got = append(got, recheckAfter(n, time.Second, 8*time.Second))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if d := recheckAfter(1000, time.Second, 8*time.Second); d != 8*time.Second {
		t.Fatalf("after many answers %v, want the limit", d)
	}
	if d := recheckAfter(0, 3*time.Second, 5*time.Second); d != 3*time.Second {
		t.Fatalf("first %v, want 3s", d)
	}
	if d := recheckAfter(1, 3*time.Second, 5*time.Second); d != 5*time.Second {
		t.Fatalf("second %v, want the limit 5s", d)
	}
}
