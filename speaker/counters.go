package speaker

import (
	"net/netip"
	"slices"

	"herald.dev/herald/speaker/election"
)

// Prometheus' increase() does not count the first sample of a new series, so a
// leader-change counter created by the takeover itself (at 1) would show no change. A
// node therefore starts the counter at 0 as soon as it is the owner or the runner-up
// of an IP, the node that takes over next; at most two new series per IP.

// counterIPs returns the IPs whose leader-change counter node should export at 0
// before any takeover: those whose first two candidates include node.
func counterIPs(decisions []election.Decision, node string) []netip.Addr {
	var out []netip.Addr
	for _, d := range decisions {
		if slices.Contains(d.Candidates[:min(2, len(d.Candidates))], node) {
			out = append(out, d.IP)
		}
	}
	return out
}

// goneIPs returns the IPs of had that no decision mentions any more.
func goneIPs(had map[netip.Addr]bool, decisions []election.Decision) []netip.Addr {
	now := make(map[netip.Addr]bool, len(decisions))
	for _, d := range decisions {
		now[d.IP] = true
	}
	var out []netip.Addr
	for ip := range had {
		if !now[ip] {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// prepareCounters creates the counters of counterIPs at 0 and drops those of IPs that
// are gone, so the series do not outlive their Services.
func (s *Speaker) prepareCounters(decisions []election.Decision) {
	for _, ip := range counterIPs(decisions, s.cfg.NodeName) {
		s.metrics.leaderChanges.WithLabelValues(ip.String())
		s.counted[ip] = true
	}
	for _, ip := range goneIPs(s.counted, decisions) {
		s.metrics.leaderChanges.DeleteLabelValues(ip.String())
		delete(s.counted, ip)
	}
}
