package layer2

import (
	"net"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a received frame is not answered: the values of the reason label of
// herald_l2_dropped_frames_total.
const (
	// DropMalformed: not a well-formed ARP request / IPv6 neighbour solicitation
	// (truncated, wrong hardware or protocol type, bad checksum, hop limit not 255,
	// multicast target, bad options, VLAN-tagged in the payload...).
	DropMalformed = "malformed"
	// DropNotRequest: well-formed, but an ARP reply or an ICMPv6 message other than NS.
	DropNotRequest = "not-request"
	// DropForeignDst: addressed to someone else (Ethernet destination neither
	// broadcast/the matching multicast nor this interface's MAC; for NDP also an IPv6
	// destination that is neither the target nor its solicited-node group).
	DropForeignDst = "foreign-dst"
	// DropOwnFrame: sent from this interface's own MAC (a loop or a reflection).
	DropOwnFrame = "own-frame"
	// DropNotOwned: asks for an IP this node does not announce (most ARP traffic on a LAN).
	DropNotOwned = "not-owned"
	// DropWrongInterface: asks for an owned IP on an interface its advertisement does
	// not allow.
	DropWrongInterface = "wrong-interface"
	// DropClaim: another device says it holds an IP this node owns (a claim, also
	// counted in herald_l2_foreign_claims_total); never answered.
	DropClaim = "claim"
	// DropSenderMismatch: would be a claim, but the frame's Ethernet source is not the
	// MAC it names (ARP sender hardware address, NDP target link-layer address): a
	// forger speaking in another device's name. Neither a claim nor answered.
	DropSenderMismatch = "sender-mismatch"
	// DropSuppressed: asks for an owned IP this node does not answer for now: it is
	// probing the IP before announcing it, has yielded it to another device, or the
	// process has just stalled and not yet heard its peers again (watchdog.go).
	DropSuppressed = "suppressed"
)

var dropReasons = []string{DropMalformed, DropNotRequest, DropForeignDst, DropOwnFrame, DropNotOwned, DropWrongInterface, DropClaim, DropSenderMismatch, DropSuppressed}

// Metrics are the layer-2 counters. Build them with NewMetrics; a nil *Metrics counts
// nothing.
type Metrics struct {
	// ARPRequests counts well-formed ARP requests addressed to us (broadcast or our
	// MAC), before the ownership check.
	ARPRequests prometheus.Counter
	// ARPReplies counts ARP replies sent.
	ARPReplies prometheus.Counter
	// GratuitousSent counts gratuitous frames sent: each gratuitous ARP request, each
	// gratuitous ARP reply and each unsolicited NA is one.
	GratuitousSent prometheus.Counter
	// NDPSolicitations counts well-formed neighbour solicitations addressed to us.
	NDPSolicitations prometheus.Counter
	// NDPAdvertisements counts neighbour advertisements sent in answer to a solicitation.
	NDPAdvertisements prometheus.Counter
	// RepliesRateLimited counts answers (ARP replies, solicited neighbour
	// advertisements) not sent because their requester had used its share
	// (Config.ReplyRate, Config.ReplyBurst).
	RepliesRateLimited prometheus.Counter
	// Dropped counts received frames not answered, by reason (the Drop* constants).
	Dropped *prometheus.CounterVec
	// ProbesSent counts probes sent: ARP probes (sender IP 0.0.0.0) and duplicate
	// address detection solicitations (source ::) for owned IPs.
	ProbesSent prometheus.Counter
	// TakeoversDeferred counts takeovers (WaitForPeers, Probe) that waited because
	// another speaker still answered for the IP.
	TakeoversDeferred prometheus.Counter
	// PeerWaitsExpired counts takeovers that took the IP while a peer's MAC still
	// answered for it, after Config.PeerWaitMax.
	PeerWaitsExpired prometheus.Counter
	// ForeignClaims counts, by IP, frames in which a device other than this node
	// claims an IP this node owns on the receiving interface, from other herald speakers
	// as well as from foreign hosts.
	ForeignClaims *prometheus.CounterVec
	// Stalls counts the times this process did not run for longer than
	// Config.StallAfter (watchdog.go), after each of which it answered nothing until
	// the speaker had heard its peers again.
	Stalls prometheus.Counter
	// ConflictTakebacks counts yielded IPs answered again, contested, because a device
	// still answered for them after Config.ConflictYieldMax.
	ConflictTakebacks prometheus.Counter
	// Conflict is 1 for each IP this node owns but has yielded to the foreign device
	// with the given MAC, also once taken back contested; the series goes when the
	// conflict clears or the IP is withdrawn.
	Conflict *prometheus.GaugeVec
}

// NewMetrics builds the counters and registers them on reg (none if reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		ARPRequests:        counter("herald_l2_arp_requests_total", "ARP requests received that are addressed to this node (broadcast or its MAC)."),
		ARPReplies:         counter("herald_l2_arp_replies_total", "ARP replies sent for IPs this node announces."),
		GratuitousSent:     counter("herald_l2_gratuitous_sent_total", "Gratuitous frames sent: gratuitous ARP requests and replies, unsolicited neighbour advertisements."),
		NDPSolicitations:   counter("herald_l2_ndp_solicitations_total", "IPv6 neighbour solicitations received that are addressed to this node."),
		NDPAdvertisements:  counter("herald_l2_ndp_advertisements_total", "IPv6 neighbour advertisements sent in answer to solicitations."),
		RepliesRateLimited: counter("herald_l2_replies_rate_limited_total", "ARP replies and neighbour advertisements not sent because their requester (its MAC, per interface) asked more often than the per-requester limit."),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_l2_dropped_frames_total",
			Help: "ARP and NDP frames received and not answered, by reason.",
		}, []string{"reason"}),
		ProbesSent:        counter("herald_l2_probes_sent_total", "Address probes sent for owned IPs: ARP probes and IPv6 duplicate address detection solicitations."),
		TakeoversDeferred: counter("herald_l2_takeovers_deferred_total", "Takeovers that waited because another herald speaker still answered for the IP (one cut off from memberlist, until it went silent)."),
		PeerWaitsExpired:  counter("herald_l2_peer_waits_expired_total", "Takeovers that took the IP although a herald speaker's MAC still answered for it, after the longest wait (a dead node's MAC in forged frames, or a speaker the quorum rule did not silence)."),
		ConflictTakebacks: counter("herald_l2_conflict_takebacks_total", "Yielded IPs this node answered again, contested, because a foreign device still answered for them after the longest yield (a forger, or a device holding the address by mistake)."),
		Stalls:            counter("herald_l2_stalls_total", "Times this speaker did not run for longer than its stall threshold (a paused VM or container, a frozen or starved process); after each it answered nothing until it had heard its peers again."),
		ForeignClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_l2_foreign_claims_total",
			Help: "Frames from another MAC (another herald speaker or a foreign host) claiming an IP this node owns, by IP.",
		}, []string{"ip"}),
		Conflict: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_l2_conflict",
			Help: "1 while this node owns the IP and the device with the given MAC claims it: this node has stopped answering for it, or answers again, contested, after the longest yield.",
		}, []string{"ip", "mac"}),
	}
	for _, r := range dropReasons {
		m.Dropped.WithLabelValues(r) // export every reason from the start, at 0
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.ARPRequests, m.ARPReplies, m.GratuitousSent, m.NDPSolicitations, m.NDPAdvertisements, m.RepliesRateLimited, m.Dropped,
			m.ProbesSent, m.TakeoversDeferred, m.PeerWaitsExpired, m.ConflictTakebacks, m.Stalls, m.ForeignClaims, m.Conflict} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) drop(reason string) {
	if m != nil {
		m.Dropped.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) inc(c func(*Metrics) prometheus.Counter) {
	if m != nil {
		c(m).Inc()
	}
}

func (m *Metrics) claim(ip netip.Addr) {
	if m != nil {
		m.ForeignClaims.WithLabelValues(ip.String()).Inc()
	}
}

func (m *Metrics) setConflict(ip netip.Addr, mac net.HardwareAddr) {
	if m != nil {
		m.Conflict.WithLabelValues(ip.String(), mac.String()).Set(1)
	}
}

func (m *Metrics) clearConflict(ip netip.Addr, mac net.HardwareAddr) {
	if m != nil {
		m.Conflict.DeleteLabelValues(ip.String(), mac.String())
	}
}

func arpRequests(m *Metrics) prometheus.Counter        { return m.ARPRequests }
func arpReplies(m *Metrics) prometheus.Counter         { return m.ARPReplies }
func gratuitousSent(m *Metrics) prometheus.Counter     { return m.GratuitousSent }
func ndpSolicitations(m *Metrics) prometheus.Counter   { return m.NDPSolicitations }
func ndpAdvertisements(m *Metrics) prometheus.Counter  { return m.NDPAdvertisements }
func repliesRateLimited(m *Metrics) prometheus.Counter { return m.RepliesRateLimited }
func probesSent(m *Metrics) prometheus.Counter         { return m.ProbesSent }
func stalls(m *Metrics) prometheus.Counter             { return m.Stalls }
func peerWaitsExpired(m *Metrics) prometheus.Counter   { return m.PeerWaitsExpired }
func takeoversDeferred(m *Metrics) prometheus.Counter  { return m.TakeoversDeferred }
func conflictTakebacks(m *Metrics) prometheus.Counter  { return m.ConflictTakebacks }
