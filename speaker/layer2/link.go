package layer2

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/mdlayher/packet"
	"github.com/prometheus/client_golang/prometheus"
)

// link is what the ARP and NDP responders share: one interface, the connection its
// frames come through, and the loop that reads a frame, lets the protocol's handler
// decide, and either counts why it is dropped or sends the answer.
type link struct {
	name   string
	mac    net.HardwareAddr
	conn   Conn
	owners *Table
	m      *Metrics
	log    logr.Logger
	closed atomic.Bool

	clock      clock
	limit      *replyLimit                 // answers per requester MAC
	onSighting func(Sighting)              // nil: claims are only counted
	nodeMACs   func(net.HardwareAddr) bool // nil: only the interface's own MAC is ours
}

// ResponderOption configures an ARPResponder or an NDPResponder.
type ResponderOption func(*link)

// WithClaimHandler makes the responder call report for every claim it sees (see
// Claim), besides counting it. report runs on the responder's receive loop, so it must
// return quickly.
func WithSightingHandler(report func(Sighting)) ResponderOption {
	return func(l *link) { l.onSighting = report }
}

// WithNodeMACs tells the responder which MACs, besides its interface's own, are this
// node's: a node with two interfaces on one LAN hears its own announcements on the
// other interface, and they are not claims.
func WithNodeMACs(ours func(net.HardwareAddr) bool) ResponderOption {
	return func(l *link) { l.nodeMACs = ours }
}

// WithReplyLimit sets how many answers per second one requester (its MAC) gets,
// sustained, and how many at once (default DefaultReplyRate, DefaultReplyBurst).
func WithReplyLimit(rate float64, burst int) ResponderOption {
	return func(l *link) { l.limit = newReplyLimit(rate, float64(burst), replyRequesters) }
}

// withClock makes the responder time its claims by the announcer's clock.
func withClock(c clock) ResponderOption {
	return func(l *link) { l.clock = c }
}

// frameHandler returns the answer to one frame and its destination MAC, or the reason
// the frame is not answered.
type frameHandler func(frame []byte) (reply []byte, dst net.HardwareAddr, reason string)

// init sets the link up in place (it holds an atomic and must not be copied).
func (l *link) init(ifi *net.Interface, c Conn, owners *Table, m *Metrics, log logr.Logger, proto string, opts []ResponderOption) error {
	if len(ifi.HardwareAddr) != 6 {
		return fmt.Errorf("layer2: interface %s has no Ethernet MAC", ifi.Name)
	}
	l.name = ifi.Name
	l.mac = bytes.Clone(ifi.HardwareAddr)
	l.conn = c
	l.owners = owners
	l.m = m
	l.log = log.WithValues("interface", ifi.Name, "protocol", proto)
	l.clock = realClock{}
	l.limit = newReplyLimit(DefaultReplyRate, DefaultReplyBurst, replyRequesters)
	for _, o := range opts {
		o(l)
	}
	return nil
}

// claimed decides whether mac, seen saying it holds ip (owned on this interface) in a
// frame from ethSrc, is another device; if so it counts and reports the claim. It
// returns the drop reason of the frame: "" when mac is this node's (not a claim),
// DropSenderMismatch when the frame did not come from mac (a forger naming another
// device, or a relay; either way no evidence of who holds the IP), else DropClaim.
func (l *link) claimed(ip netip.Addr, mac, ethSrc net.HardwareAddr, kind FrameKind) string {
	if sameMAC(mac, l.mac) || (l.nodeMACs != nil && l.nodeMACs(mac)) {
		return ""
	}
	if !sameMAC(mac, ethSrc) {
		return DropSenderMismatch
	}
	l.m.claim(ip)
	if l.onSighting != nil {
		l.onSighting(Sighting{IP: ip, Interface: l.name, MAC: bytes.Clone(mac), At: l.clock.Now(), Kind: kind})
	}
	return DropClaim
}

// Interface is the name of the interface the responder answers on.
func (l *link) Interface() string { return l.name }

// HardwareAddr is the MAC the responder answers with.
func (l *link) HardwareAddr() net.HardwareAddr { return l.mac }

// Close stops Serve and closes the connection.
func (l *link) Close() error {
	l.closed.Store(true)
	return l.conn.Close()
}

// serve reads frames until the connection fails or Close is called (then it returns
// nil). answered is the counter of sent answers.
func (l *link) serve(bufSize int, proto string, handle frameHandler, answered func(*Metrics) prometheus.Counter) error {
	buf := make([]byte, bufSize)
	for {
		n, _, err := l.conn.ReadFrom(buf)
		if err != nil {
			if l.closed.Load() {
				return nil
			}
			return fmt.Errorf("layer2: %s on %s: %w", proto, l.name, err)
		}
		l.answer(buf[:n], handle, answered)
	}
}

// answer handles one received frame: send handle's answer, or count why there is none.
// Answers are limited per destination MAC (ratelimit.go); gratuitous frames and probes
// do not come through here and are never limited.
func (l *link) answer(frame []byte, handle frameHandler, answered func(*Metrics) prometheus.Counter) {
	reply, dst, reason := handle(frame)
	if reason == "" && !l.owners.running() {
		// Asked again just before the send: a process frozen (SIGSTOP, docker pause)
		// between handle's check and the send would otherwise answer a stale request
		// the moment it thaws, beside the node that took the IP over meanwhile.
		reason = DropSuppressed
	}
	if reason != "" {
		l.m.drop(reason)
		return
	}
	if !l.limit.allow(dst, l.clock.Now()) {
		l.m.inc(repliesRateLimited)
		return
	}
	if _, err := l.conn.WriteTo(reply, &packet.Addr{HardwareAddr: dst}); err != nil {
		l.log.Error(err, "sending the answer failed")
		return
	}
	l.m.inc(answered)
}
