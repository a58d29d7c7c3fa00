package speaker

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"herald.dev/herald/speaker/handover"
)

// metrics are the speaker's ownership metrics. Only the owner exports an IP's series,
// so summing herald_l2_owner by ip over all speakers counts owners (1 in a healthy
// cluster; 0 or 2 are alerts).
type metrics struct {
	owner         *prometheus.GaugeVec
	leaderChanges *prometheus.CounterVec
	failover      prometheus.Histogram
	elections     prometheus.Counter
	problems      prometheus.Gauge
	mode          *prometheus.GaugeVec
	expected      prometheus.Gauge
	unreachable   *prometheus.GaugeVec
	peerClaims    *prometheus.CounterVec
	// conflictEventsSuppressed counts address conflict Events not written (eventlimit.go).
	conflictEventsSuppressed prometheus.Counter
	tokenBound               prometheus.Gauge
	// Handovers this node took (speaker/handover).
	// (herald_handovers_forwarding is forwardingGauge, read from the forwarder.)
	handovers       *prometheus.CounterVec
	handoverFlows   prometheus.Counter
	handoverSeconds prometheus.Histogram
}

// newMetrics registers the speaker's metrics, and the collectors its parts own
// (owned: the records' metrics), in reg (nil: none).
func newMetrics(reg prometheus.Registerer, owned ...prometheus.Collector) (*metrics, error) {
	m := &metrics{
		owner: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_l2_owner",
			Help: "1 for each LoadBalancer IP and Service this node announces at layer 2.",
		}, []string{"ip", "service", "node"}),
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_l2_leader_changes_total",
			Help: "Takeovers of a LoadBalancer IP by this node (counted by the new owner).",
		}, []string{"ip"}),
		failover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_l2_failover_seconds",
			Help:    "From the previous owner leaving or being declared dead by memberlist to the first gratuitous ARP/NA sent by this node, the new owner.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		elections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_elections_total",
			Help: "Election passes run (each re-reads every Service, Node and advertisement).",
		}),
		problems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_skipped_objects",
			Help: "Objects the last election pass left out because they could not be read (bad selector, bad IP); see the log.",
		}),
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_speaker_quorum_mode",
			Help: "1 for the mode this speaker is in: Quorum (it hears a majority of the speakers), Hold, Arbitrated (no side has a majority; owners are elected among the speakers alive in the API server), Minority, Isolated or Rejoining (it announces nothing).",
		}, []string{"mode"}),
		expected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_expected_speakers",
			Help: "Speakers this speaker expects: those it hears in memberlist and those whose record in the API server is fresh.",
		}),
		unreachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_memberlist_unreachable",
			Help: "1 for each expected speaker (peer) that this speaker (node) does not hear in memberlist: its record in the API server is fresh, so it is alive but cut off, or died less than a record duration ago.",
		}, []string{"node", "peer"}),
		peerClaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_l2_peer_claims_total",
			Help: "ARP/NDP frames in which another herald speaker claimed an IP this node announces: two nodes answering for one IP (split brain).",
		}, []string{"ip"}),
		conflictEventsSuppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_conflict_events_suppressed_total",
			Help: "IPConflict and IPConflictResolved Events not written because the same IP had one of the same reason in the last minute; the next one says how many.",
		}),
		tokenBound: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_token_node_bound",
			Help: "1 when the API server binds this speaker's token to a pod on its own node (the admission policy then holds it to that node's records); 0 when it does not.",
		}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_handovers_total",
			Help: "LoadBalancer IPs this node took from a live node, make-before-break, by why the old owner gave them up: cordon, taint (out-of-service, cluster autoscaler), shutdown (graceful node shutdown), exclude-label, other (a rebalance, a Service that no longer fits it).",
		}, []string{"reason"}),
		handoverFlows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_handover_forwarded_flows_total",
			Help: "TCP flows this node forwarded to an IP's old owner during handovers that ended.",
		}),
		handoverSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_handover_forwarding_seconds",
			Help:    "How long each handover's forwarding lasted: until --handover-drain, the old owner going, or this node giving the IP up.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800},
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.owner, m.leaderChanges, m.failover, m.elections, m.problems, m.mode, m.expected, m.unreachable, m.peerClaims, m.conflictEventsSuppressed, m.tokenBound,
		m.handovers, m.handoverFlows, m.handoverSeconds}, owned...) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("registering speaker metrics: %w (one speaker per registry)", err)
			}
			return nil, fmt.Errorf("registering speaker metrics: %w", err)
		}
	}
	return m, nil
}

// forwardingGauge is herald_handovers_forwarding, read from f at each scrape: the
// forwardings in effect, including those a previous speaker began (Forwarder.Reset).
func forwardingGauge(f *handover.Forwarder) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "herald_handovers_forwarding",
		Help: "LoadBalancer IPs whose unknown TCP flows this node forwards to their old owner now (--handover-drain).",
	}, func() float64 { return float64(len(f.Active())) })
}
