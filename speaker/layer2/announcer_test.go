package layer2

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"github.com/prometheus/client_golang/prometheus"
)

// harness is an Announcer over a fake host: interfaces the test edits, fake
// connections per interface and protocol, and a fake clock.
type harness struct {
	t         *testing.T
	a         *Announcer
	clk       *fakeClock
	reg       *prometheus.Registry
	announced chan Announcement
	claims    chan Sighting // OnSighting
	conflicts chan Conflict // OnConflict
	cleared   chan Conflict // OnConflictCleared

	mu      sync.Mutex
	facts   []Facts
	conns   map[string]*fakeConn // "eth0/arp" → the latest connection opened
	opened  map[string]int
	failing map[string]bool // "eth0/arp" → opening fails
}

var (
	mac0 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x10}
	mac1 = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x11}
)

func iface(name string, index int, mac net.HardwareAddr) Facts {
	return Facts{
		Interface: net.Interface{Name: name, Index: index, MTU: 1500, HardwareAddr: mac,
			Flags: net.FlagUp | net.FlagRunning | net.FlagBroadcast | net.FlagMulticast},
		IPv6: true,
	}
}

// newHarness builds the Announcer with DefaultConfig but for the schedule, with peerMAC
// as the one peer speaker's MAC.
func newHarness(t *testing.T, sched Schedule, facts ...Facts) *harness {
	t.Helper()
	h := &harness{
		t: t, clk: newFakeClock(), reg: prometheus.NewRegistry(), announced: make(chan Announcement, 16),
		claims: make(chan Sighting, 256), conflicts: make(chan Conflict, 16), cleared: make(chan Conflict, 16),
		facts: facts, conns: map[string]*fakeConn{}, opened: map[string]int{}, failing: map[string]bool{},
	}
	open := func(ifi *net.Interface, proto string) (*fakeConn, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		key := ifi.Name + "/" + proto
		if h.failing[key] {
			return nil, errors.New("fake: cannot open")
		}
		c := newFakeConn()
		h.conns[key] = c
		h.opened[key]++
		return c, nil
	}
	sys := system{
		interfaces: func() ([]Facts, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return slices.Clone(h.facts), nil
		},
		listenARP: func(ifi *net.Interface) (Conn, error) {
			c, err := open(ifi, "arp")
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		listenNDP: func(ifi *net.Interface) (NDPConn, error) {
			c, err := open(ifi, "ndp")
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	}
	cfg := DefaultConfig()
	cfg.Schedule = sched
	cfg.Registerer = h.reg
	cfg.Log = logr.Discard()
	cfg.OnAnnounce = func(an Announcement) { h.announced <- an }
	cfg.Peer = func(mac net.HardwareAddr) bool { return bytes.Equal(mac, peerMAC) }
	cfg.OnSighting = func(c Sighting) { h.claims <- c }
	cfg.OnConflict = func(c Conflict) { h.conflicts <- c }
	cfg.OnConflictCleared = func(c Conflict) { h.cleared <- c }
	a, err := newAnnouncer(cfg, sys, h.clk)
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	t.Cleanup(a.shutdown)
	return h
}

func (h *harness) conn(key string) *fakeConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conns[key]
	if c == nil {
		h.t.Fatalf("no connection %s was opened", key)
	}
	return c
}

func (h *harness) setFacts(f ...Facts) {
	h.mu.Lock()
	h.facts = f
	h.mu.Unlock()
}

func (h *harness) set(key string, ip netip.Addr, ifaces ...string) {
	h.t.Helper()
	if err := h.a.Set(key, ip, ifaces); err != nil {
		h.t.Fatal(err)
	}
}

// garp reads one gratuitous ARP burst (request then reply) for ip from c.
func garp(t *testing.T, c *fakeConn, ip netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	for _, op := range []arp.Operation{arp.OperationRequest, arp.OperationReply} {
		_, p := parseARPFrame(t, c.next(t).frame)
		if p.Operation != op || p.SenderIP != ip || p.TargetIP != ip || !bytes.Equal(p.SenderHardwareAddr, mac) {
			t.Fatalf("got %+v, want gratuitous %v for %s from %s", p, op, ip, mac)
		}
	}
}

func (h *harness) nextAnnouncement() Announcement {
	h.t.Helper()
	select {
	case an := <-h.announced:
		return an
	case <-time.After(hangGuard):
		h.t.Fatal("no announcement reported")
		return Announcement{}
	}
}

func (h *harness) noAnnouncement() {
	h.t.Helper()
	select {
	case an := <-h.announced:
		h.t.Fatalf("unexpected announcement %+v", an)
	default:
	}
}

// waitIdle waits until the takeover loops have no timer left (they have returned).
func (h *harness) waitIdle() {
	h.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for h.clk.pending() > 0 {
		if time.Now().After(deadline) {
			h.t.Fatal("takeover loop still waiting")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTakeoverSchedule follows the default schedule on a fake clock: a burst at once
// (reported with its time), at +1.1, +2.2, +3.3 and +4.4 s, then every 60 s; nothing
// after Withdraw.
func TestTakeoverSchedule(t *testing.T) {
	h := newHarness(t, DefaultSchedule(), iface("eth0", 2, mac0))
	h.a.rescan()
	start := h.clk.Now()
	h.set("svc", vip4)
	c := h.conn("eth0/arp")
	garp(t, c, vip4, mac0)
	an := h.nextAnnouncement()
	if an.IP != vip4 || !an.At.Equal(start) || len(an.Links) != 1 || an.Links[0].Interface != "eth0" || !bytes.Equal(an.Links[0].MAC, mac0) {
		t.Fatalf("announcement %+v, want %s on eth0 %s at %v", an, vip4, mac0, start)
	}
	if got, ok := h.a.Announced(vip4); !ok || !got.At.Equal(start) {
		t.Fatalf("Announced = %+v %v", got, ok)
	}
	for _, want := range []time.Duration{1100, 1100, 1100, 1100, 60000, 60000, 60000} {
		if d := h.clk.waitTimer(t); d != want*time.Millisecond {
			t.Fatalf("next burst in %v, want %v", d, want*time.Millisecond)
		}
		h.clk.Advance(want * time.Millisecond)
		garp(t, c, vip4, mac0)
	}
	h.noAnnouncement() // reported once per takeover
	h.conn("eth0/ndp").none(t)

	h.a.Withdraw("svc", vip4)
	h.waitIdle()
	h.clk.Advance(time.Hour)
	c.none(t)
	if _, ok := h.a.Announced(vip4); ok {
		t.Fatal("Announced after Withdraw")
	}
	if got := value(h.a.metrics.GratuitousSent); got != 16 {
		t.Fatalf("gratuitous_sent = %v, want 16 (8 bursts × request and reply)", got)
	}
}

// TestTakeoverNoRefresh: Refresh 0 stops after the repeats; shrunk durations work.
func TestTakeoverNoRefresh(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Millisecond, 3 * time.Millisecond}}, iface("eth0", 2, mac0))
	h.a.rescan()
	h.set("svc", vip4)
	c := h.conn("eth0/arp")
	garp(t, c, vip4, mac0)
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond} {
		if got := h.clk.waitTimer(t); got != d {
			t.Fatalf("next in %v, want %v", got, d)
		}
		h.clk.Advance(d)
		garp(t, c, vip4, mac0)
	}
	h.waitIdle() // waits forever on stop/restart: no timer
	h.clk.Advance(time.Hour)
	c.none(t)
	h.a.Reannounce(vip4)
	garp(t, c, vip4, mac0)
}

// TestWithdrawStopsAtOnce: after Withdraw returns, no frame goes out and no request is
// answered.
func TestWithdrawStopsAtOnce(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}}, iface("eth0", 2, mac0))
	h.a.rescan()
	h.set("svc", vip4)
	c := h.conn("eth0/arp")
	garp(t, c, vip4, mac0)
	c.deliver(t, arpRequest(vip4))
	if _, p := parseARPFrame(t, c.next(t).frame); p.Operation != arp.OperationReply || p.SenderIP != vip4 {
		t.Fatalf("not answered: %+v", p)
	}
	h.a.Withdraw("svc", vip4)
	c.deliver(t, arpRequest(vip4))
	h.waitIdle()
	h.clk.Advance(2 * time.Hour)
	c.deliver(t, []byte("sentinel")) // read only once the frame before was handled
	c.none(t)
	if got := value(h.a.metrics.Dropped.WithLabelValues(DropNotOwned)); got != 1 {
		t.Fatalf("not-owned drops = %v, want 1", got)
	}
}

// TestSharedIPAndInterfaces: two Services share an IP; each names interfaces. The
// burst goes where the union allows, a change of interfaces starts the schedule over,
// the first announcement is reported once, and the IP stays until the last withdraws.
func TestSharedIPAndInterfaces(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}}, iface("eth0", 2, mac0), iface("eth1", 3, mac1))
	h.a.rescan()
	c0, c1 := h.conn("eth0/arp"), h.conn("eth1/arp")

	h.set("a", vip4, "eth1")
	garp(t, c1, vip4, mac1)
	c0.none(t)
	if an := h.nextAnnouncement(); len(an.Links) != 1 || an.Links[0].Interface != "eth1" {
		t.Fatalf("announcement %+v, want eth1 only", an)
	}
	c0.deliver(t, arpRequest(vip4))
	c1.deliver(t, arpRequest(vip4))
	if _, p := parseARPFrame(t, c1.next(t).frame); p.Operation != arp.OperationReply {
		t.Fatal("eth1 did not answer")
	}
	// eth0's responder must have dropped its request before eth0 becomes allowed below.
	c0.deliver(t, []byte("sentinel")) // read only once the frame before was handled
	c0.none(t)

	h.set("a", vip4, "eth1") // same again: nothing
	h.set("b", vip4, "eth0") // union grows: schedule starts over on both
	garp(t, c0, vip4, mac0)
	garp(t, c1, vip4, mac1)
	h.noAnnouncement()

	h.a.Withdraw("a", vip4) // b still holds it, on eth0 only
	c1.deliver(t, arpRequest(vip4))
	c0.deliver(t, arpRequest(vip4))
	if _, p := parseARPFrame(t, c0.next(t).frame); p.Operation != arp.OperationReply {
		t.Fatal("eth0 did not answer")
	}
	c1.deliver(t, []byte("sentinel")) // read only once the frame before was handled
	c0.none(t)
	c1.none(t)
	if got := value(h.a.metrics.Dropped.WithLabelValues(DropWrongInterface)); got != 2 {
		t.Fatalf("wrong-interface drops = %v, want 2", got)
	}
}

// TestNDPThroughAnnouncer: an IPv6 VIP joins its solicited-node group where allowed,
// sends an unsolicited NA, is answered, and leaves the group on Withdraw.
func TestNDPThroughAnnouncer(t *testing.T) {
	h := newHarness(t, Schedule{}, iface("eth0", 2, mac0), iface("eth1", 3, mac1))
	h.a.rescan()
	n0, n1 := h.conn("eth0/ndp"), h.conn("eth1/ndp")
	group, _ := ndp.SolicitedNodeMulticast(vip6)

	h.set("svc", vip6, "eth0")
	if got := n0.joined(); !slices.Equal(got, []netip.Addr{group}) {
		t.Fatalf("eth0 joined %v, want %v", got, group)
	}
	if got := n1.joined(); len(got) != 0 {
		t.Fatalf("eth1 joined %v, want none", got)
	}
	if got := parseNA(t, n0.next(t).frame); !got.msg.Override || got.msg.Solicited || got.dst != allNodes {
		t.Fatalf("takeover NA %+v to %s", got.msg, got.dst)
	}
	n1.none(t)
	h.conn("eth0/arp").none(t)

	n0.deliver(t, ns{ethSrc: peerMAC}.bytes())
	if got := parseNA(t, n0.next(t).frame); !got.msg.Solicited || !bytes.Equal(got.tlla, mac0) {
		t.Fatalf("answer %+v tlla %s", got.msg, got.tlla)
	}

	h.set("svc", vip6) // now everywhere
	if got := n1.joined(); !slices.Equal(got, []netip.Addr{group}) {
		t.Fatalf("eth1 joined %v after widening", got)
	}
	h.a.Withdraw("svc", vip6)
	if len(n0.joined())+len(n1.joined()) != 0 {
		t.Fatalf("groups left joined: %v %v", n0.joined(), n1.joined())
	}
}

// TestRescan: responders follow the interfaces; a new or returning interface gets the
// owned IPs announced; an interface that cannot be opened does not stop the others.
func TestRescan(t *testing.T) {
	h := newHarness(t, Schedule{Repeats: []time.Duration{time.Hour}})
	h.set("svc", vip4) // before any interface: nothing to send yet
	h.noAnnouncement()
	if h.a.Ready() {
		t.Fatal("ready before the first scan")
	}

	lo := iface("lo", 1, nil)
	lo.Flags |= net.FlagLoopback
	veth := iface("veth9", 9, mac1)
	h.failing["eth1/arp"] = true
	h.setFacts(lo, veth, iface("eth0", 2, mac0), iface("eth1", 3, mac1))
	h.a.rescan()
	if !h.a.Ready() {
		t.Fatal("not ready after the first scan")
	}
	want := "eth0/arp eth0/ndp eth1/ndp"
	if got := responders(h.a); got != want {
		t.Fatalf("responders %q, want %q", got, want)
	}
	garp(t, h.conn("eth0/arp"), vip4, mac0)
	if an := h.nextAnnouncement(); !an.At.Equal(h.clk.Now()) || an.Links[0].Interface != "eth0" {
		t.Fatalf("announcement %+v", an)
	}

	// eth1 opens now: announced there.
	delete(h.failing, "eth1/arp")
	h.a.rescan()
	garp(t, h.conn("eth1/arp"), vip4, mac1)
	garp(t, h.conn("eth0/arp"), vip4, mac0) // the schedule restarts on every allowed interface

	// eth0 goes down: its responders close; it comes back: reopened and announced.
	old := h.conn("eth0/arp")
	down := iface("eth0", 2, mac0)
	down.Flags &^= net.FlagRunning
	h.setFacts(down, iface("eth1", 3, mac1))
	h.a.rescan()
	if got := responders(h.a); got != "eth1/arp eth1/ndp" {
		t.Fatalf("responders %q after eth0 went down", got)
	}
	select {
	case <-old.closed:
	default:
		t.Fatal("eth0's connection not closed")
	}
	h.setFacts(iface("eth0", 2, mac0), iface("eth1", 3, mac1))
	h.a.rescan()
	garp(t, h.conn("eth0/arp"), vip4, mac0)
	garp(t, h.conn("eth1/arp"), vip4, mac1)

	// eth0 recreated with another index and MAC: reopened, new MAC announced.
	h.setFacts(iface("eth0", 7, mac1), iface("eth1", 3, mac1))
	h.a.rescan()
	if h.opened["eth0/arp"] != 3 {
		t.Fatalf("eth0/arp opened %d times, want 3", h.opened["eth0/arp"])
	}
	garp(t, h.conn("eth0/arp"), vip4, mac1)

	// eth1 vanishes.
	h.setFacts(iface("eth0", 7, mac1))
	h.a.rescan()
	if got := responders(h.a); got != "eth0/arp eth0/ndp" {
		t.Fatalf("responders %q after eth1 vanished", got)
	}
}

// TestResponderFailure: a responder whose socket fails is dropped and reopened by the
// next scan.
func TestResponderFailure(t *testing.T) {
	h := newHarness(t, Schedule{}, iface("eth0", 2, mac0))
	h.a.rescan()
	h.conn("eth0/arp").Close() // the socket dies under the responder
	deadline := time.Now().Add(hangGuard)
	for responders(h.a) != "eth0/ndp" {
		if time.Now().After(deadline) {
			t.Fatalf("responders %q, want the failed one gone", responders(h.a))
		}
		time.Sleep(time.Millisecond)
	}
	h.a.rescan()
	if got := responders(h.a); got != "eth0/arp eth0/ndp" || h.opened["eth0/arp"] != 2 {
		t.Fatalf("responders %q, opened %d", got, h.opened["eth0/arp"])
	}
}

func responders(a *Announcer) string {
	var s []string
	for _, r := range a.Responders() {
		s = append(s, r.Interface+"/"+r.Protocol)
	}
	return strings.Join(s, " ")
}

func TestRunAndClose(t *testing.T) {
	h := newHarness(t, Schedule{}, iface("eth0", 2, mac0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctx) }()
	deadline := time.Now().Add(hangGuard)
	for !h.a.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(time.Millisecond)
	}
	if err := h.a.Run(ctx); err == nil {
		t.Fatal("second Run accepted")
	}
	h.set("svc", vip4)
	garp(t, h.conn("eth0/arp"), vip4, mac0)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := h.a.Set("svc2", vip4, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Run: %v, want ErrClosed", err)
	}
	if len(h.a.Responders()) != 0 {
		t.Fatal("responders left after Run")
	}
}

func TestNewValidates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Schedule.Repeats = []time.Duration{2 * time.Second, time.Second}
	if _, err := New(cfg); err == nil {
		t.Error("descending repeats accepted")
	}
	cfg = DefaultConfig()
	cfg.Schedule.Refresh = -1
	if _, err := New(cfg); err == nil {
		t.Error("negative refresh accepted")
	}
	if err := newHarness(t, Schedule{}).a.Set("x", netip.Addr{}, nil); err == nil {
		t.Error("invalid IP accepted")
	}
	reg := prometheus.NewRegistry()
	cfg = DefaultConfig()
	cfg.Registerer = reg
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil {
		t.Error("second registration on the same registry accepted")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	wantNames := []string{"herald_l2_arp_replies_total", "herald_l2_arp_requests_total", "herald_l2_conflict_takebacks_total", "herald_l2_dropped_frames_total",
		"herald_l2_gratuitous_sent_total", "herald_l2_ndp_advertisements_total", "herald_l2_ndp_solicitations_total",
		"herald_l2_peer_waits_expired_total", "herald_l2_probes_sent_total", "herald_l2_replies_rate_limited_total", "herald_l2_stalls_total", "herald_l2_takeovers_deferred_total"} // the vectors without series yet (foreign claims, conflict) are not gathered
	if !slices.Equal(names, wantNames) {
		t.Errorf("metrics %v, want %v", names, wantNames)
	}
}
