package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/handover"
)

// beginHandovers starts, for each IP of p this node takes from a live peer (a planned
// move: the peer was cordoned, or a rebalance asked for it), forwarding the flows that
// peer carries to it (speaker/handover). It returns once the forwarding is in place,
// before apply announces the IPs. Loop goroutine only.
func (s *Speaker) beginHandovers(ctx context.Context, p Plan, nodes []*corev1.Node) {
	if !s.handover.On() {
		return
	}
	for _, t := range p.Take {
		if t.Previous == "" || t.Previous == s.cfg.NodeName || !s.liveness.live[t.Previous] {
			continue
		}
		prev := nodeNamed(nodes, t.Previous)
		if prev == nil {
			continue
		}
		to, ok := internalIP(prev, t.IP.Is4())
		if !ok {
			s.log.Info("cannot forward a handover's flows: the old owner has no InternalIP of the VIP's family",
				"ip", t.IP, "oldOwner", t.Previous)
			continue
		}
		why, label := moveReason(prev)
		fw := handover.Forward{IP: t.IP, From: t.Previous, To: to, Why: why}
		if err := s.handover.Start(ctx, fw); err != nil {
			s.log.Error(err, "starting a handover; the connections open through the old owner break", "ip", t.IP)
			continue
		}
		s.metrics.handovers.WithLabelValues(label).Inc()
		s.log.Info("handover: forwarding the old owner's flows", "ip", t.IP, "oldOwner", t.Previous, "to", to, "why", why)
		s.reports.event(t.Services, corev1.EventTypeNormal, heraldv1.ReasonHandover, fmt.Sprintf(
			"%s moves from %s (%s) to %s make-before-break: the connections open through %s are forwarded to it for up to %s",
			t.IP, t.Previous, why, s.cfg.NodeName, t.Previous, s.cfg.HandoverDrain))
	}
}

// endHandovers ends the forwarding to the peers that are gone: neither live nor
// restarting (their host may have stopped answering). Their flows then fail as in any
// failover. It also ends the forwarding of IPs this node does not announce (a previous
// speaker's, Forwarder.Reset). Loop goroutine only.
func (s *Speaker) endHandovers(ctx context.Context, restarting func(node string) bool) {
	s.handover.EndWhere(ctx, func(fw handover.Forward) bool {
		return !s.liveness.live[fw.From] && !restarting(fw.From)
	}, "the old owner is gone")
	s.handover.EndWhere(ctx, func(fw handover.Forward) bool {
		_, owned := s.tracker.Owned(fw.IP)
		return !owned
	}, "this node does not announce the IP")
}

// handoverNotes say, for the VIPStatus of each IP in a handover, what is forwarded.
func (s *Speaker) handoverNotes() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, fw := range s.handover.Active() {
		out[fw.IP] = fmt.Sprintf("taken from %s (%s) make-before-break; its connections are forwarded to it until %s",
			fw.From, fw.Why, fw.Until.UTC().Format(time.RFC3339))
	}
	return out
}

// handoverEnded reports a forwarding that ended (the handover's callback).
func (s *Speaker) handoverEnded(fw handover.Forward, c handover.Count, why string) {
	took := time.Since(fw.Since)
	s.pokeElection() // the VIPStatus says the handover is over
	s.metrics.handoverFlows.Add(float64(c.Flows))
	s.metrics.handoverSeconds.Observe(took.Seconds())
	s.log.Info("handover ended", "ip", fw.IP, "oldOwner", fw.From, "why", why, "flows", c.Flows, "packets", c.Packets, "after", took.Round(time.Millisecond))
	s.announcing.mu.Lock()
	services := s.announcing.services[fw.IP]
	s.announcing.mu.Unlock()
	s.reports.event(services, corev1.EventTypeNormal, heraldv1.ReasonHandoverEnded, fmt.Sprintf(
		"%s: %s stopped forwarding to %s after %s (%s): %d flows, %d packets forwarded",
		fw.IP, s.cfg.NodeName, fw.From, took.Round(time.Second), why, c.Flows, c.Packets))
}

func nodeNamed(nodes []*corev1.Node, name string) *corev1.Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// moveReason says why a live node gave an IP up, as far as its Node shows, and the
// value of herald_handovers_total{reason} for it.
func moveReason(n *corev1.Node) (why, label string) {
	switch why = leavingReason(n); why {
	case "":
	case "cordoned":
		return why, "cordon"
	case "shutting down":
		return why, "shutdown"
	default:
		return why, "taint"
	}
	if _, ok := n.Labels[election.ExcludeLabel]; ok {
		return "labelled " + election.ExcludeLabel, "exclude-label"
	}
	return "rebalanced or no longer fitting", "other"
}
