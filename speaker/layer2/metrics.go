package layer2

import (
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
)

var dropReasons = []string{DropMalformed, DropNotRequest, DropForeignDst, DropOwnFrame, DropNotOwned, DropWrongInterface}

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
	// Dropped counts received frames not answered, by reason (the Drop* constants).
	Dropped *prometheus.CounterVec
}

// NewMetrics builds the counters and registers them on reg (none if reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		ARPRequests:       counter("herald_l2_arp_requests_total", "ARP requests received that are addressed to this node (broadcast or its MAC)."),
		ARPReplies:        counter("herald_l2_arp_replies_total", "ARP replies sent for IPs this node announces."),
		GratuitousSent:    counter("herald_l2_gratuitous_sent_total", "Gratuitous frames sent: gratuitous ARP requests and replies, unsolicited neighbour advertisements."),
		NDPSolicitations:  counter("herald_l2_ndp_solicitations_total", "IPv6 neighbour solicitations received that are addressed to this node."),
		NDPAdvertisements: counter("herald_l2_ndp_advertisements_total", "IPv6 neighbour advertisements sent in answer to solicitations."),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_l2_dropped_frames_total",
			Help: "ARP and NDP frames received and not answered, by reason.",
		}, []string{"reason"}),
	}
	for _, r := range dropReasons {
		m.Dropped.WithLabelValues(r) // export every reason from the start, at 0
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.ARPRequests, m.ARPReplies, m.GratuitousSent, m.NDPSolicitations, m.NDPAdvertisements, m.Dropped} {
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

func arpRequests(m *Metrics) prometheus.Counter       { return m.ARPRequests }
func arpReplies(m *Metrics) prometheus.Counter        { return m.ARPReplies }
func gratuitousSent(m *Metrics) prometheus.Counter    { return m.GratuitousSent }
func ndpSolicitations(m *Metrics) prometheus.Counter  { return m.NDPSolicitations }
func ndpAdvertisements(m *Metrics) prometheus.Counter { return m.NDPAdvertisements }
