package speaker

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

// holder is the key under which the speaker holds IPs in the announcer.
const holder = "election"

// apply makes the announcer and the metrics follow the plan, and, when the election
// is the cluster's (trusted), reports what users should see.
func (s *Speaker) apply(p Plan, decisions []election.Decision, live []string, trusted bool) {
	for _, r := range p.Release {
		s.l2.Withdraw(holder, r.IP)
		// After the withdrawal: reading and removing the forwarding takes a few nft
		// runs, and the next owner waits for this node to stop answering. Before the
		// IP's Services are forgotten: the HandoverEnded Event names them.
		s.handover.End(context.Background(), r.IP, "this node gave the IP up")
		s.metrics.owner.DeletePartialMatch(prometheus.Labels{"ip": r.IP.String()})
		s.announcing.mu.Lock()
		delete(s.announcing.takeovers, r.IP.String())
		delete(s.announcing.services, r.IP)
		s.announcing.mu.Unlock()
		s.book.Release(r.IP)
		s.metrics.peerClaims.DeleteLabelValues(r.IP.String())
		s.log.Info("stopped announcing", "ip", r.IP, "services", r.Services, "newOwner", r.Next)
	}
	for _, t := range p.Take {
		restored := s.book.Take(t.IP, t.Key)
		pt := pendingTakeover{Takeover: t, restored: restored}
		if t.Previous != "" && !s.liveness.live[t.Previous] {
			pt.lostAt = s.liveness.lostAt[t.Previous]
		}
		// An IP new to this speaker (a new Service, or a speaker just started) is
		// probed for a foreign device first. An IP whose owner was lost without
		// leaving (dead, or cut off from memberlist but alive), is unknown, or is live
		// and gives it up (a planned move: cordon, rebalance; its flows are forwarded
		// to it meanwhile, beginHandovers) is taken only once no speaker answers for it,
		// so it never has two MACs; a speaker that left gracefully answers until its
		// peers took over, by design.
		var opts []layer2.SetOption
		switch {
		case restored:
			// This node's own a moment ago: its previous speaker stopped, and the peers
			// held the IP for it.
		case !t.Known:
			opts = append(opts, layer2.Probe())
		case t.Previous == "" || s.liveness.live[t.Previous] || !s.members.LeftGracefully(t.Previous):
			opts = append(opts, layer2.WaitForPeers())
			pt.unconfirmed = true
		}
		s.announcing.mu.Lock()
		s.announcing.takeovers[t.IP.String()] = pt
		s.announcing.services[t.IP] = t.Services
		s.announcing.mu.Unlock()
		s.setOwner(t.Decision)
		s.metrics.peerClaims.WithLabelValues(t.IP.String()) // at 0, so increase() sees the first claim
		// The counter exists from now on; it counts the move once the IP goes out
		// (announced): a takeover given up before that moved nothing.
		s.metrics.leaderChanges.WithLabelValues(t.IP.String())
		s.counted[t.IP] = true
		if restored {
			// No move: the node announced it before its speaker restarted.
			s.log.Info("announcing again after a restart", "ip", t.IP, "services", t.Services, "interfaces", t.Interfaces)
		} else {
			s.log.Info("taking over", "ip", t.IP, "services", t.Services, "previousOwner", t.Previous, "interfaces", t.Interfaces)
		}
		s.announce(t.Decision, opts...)
	}
	for _, d := range p.Change {
		s.metrics.owner.DeletePartialMatch(prometheus.Labels{"ip": d.IP.String()})
		s.announcing.mu.Lock()
		s.announcing.services[d.IP] = d.Services
		s.announcing.mu.Unlock()
		s.setOwner(d)
		s.announce(d)
	}
	if trusted {
		s.prepareCounters(decisions)
		s.reports.afterElection(decisions, live, s.l2.Responders())
	}
}

func (s *Speaker) setOwner(d election.Decision) {
	for _, svc := range d.Services {
		s.metrics.owner.WithLabelValues(d.IP.String(), svc, s.cfg.NodeName).Set(1)
	}
}

func (s *Speaker) announce(d election.Decision, opts ...layer2.SetOption) {
	if err := s.l2.Set(holder, d.IP, d.Interfaces, opts...); err != nil {
		s.log.Error(err, "announcing", "ip", d.IP)
	}
}

// announced is called by the announcer after the first gratuitous frames of a
// takeover went out: the end of a failover.
func (s *Speaker) announced(a layer2.Announcement) {
	s.announcing.mu.Lock()
	pt, ok := s.announcing.takeovers[a.IP.String()]
	delete(s.announcing.takeovers, a.IP.String())
	s.announcing.mu.Unlock()
	if !ok {
		// Announced again after an address conflict: no takeover, but the VIPStatus
		// shows this node again.
		s.vips.Announced(a)
		return
	}
	if !pt.lostAt.IsZero() {
		s.metrics.failover.Observe(a.At.Sub(pt.lostAt).Seconds())
	}
	if !pt.restored { // a restart is no takeover: no count, no Event
		s.metrics.leaderChanges.WithLabelValues(a.IP.String()).Inc()
		s.reports.takeover(pt.Takeover, a)
	}
	s.vips.Announced(a)
	if pt.unconfirmed {
		s.pokeElection() // the loop publishes the claim now that the IP is out
	}
}
