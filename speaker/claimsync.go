package speaker

import (
	"net/netip"

	"herald.dev/herald/speaker/quorum"
)

// knownSpeakers are the live members, the members lost since this speaker started and
// the writers of records.
func (s *Speaker) knownSpeakers(live []string, recs []quorum.Record) []string {
	seen := map[string]bool{s.cfg.NodeName: true}
	out := []string{s.cfg.NodeName}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range live {
		add(n)
	}
	for n := range s.liveness.lostAt {
		add(n)
	}
	for _, r := range recs {
		add(r.Node)
	}
	return out
}

// publishClaims tells the peers which IPs this speaker announces now, when that
// changed. Loop goroutine only.
func (s *Speaker) publishClaims() {
	s.book.Publish(s.claimable(s.tracker.OwnedIPs()))
}

// claimable returns the IPs of owned that are no unconfirmed takeover: one waiting
// for an owner lost without a goodbye to stop answering. Such a loss may be a rumour
// (a member back from a partition passes on the deaths it declared while cut off, and
// a peer believes one until the accused refutes it): claimed at once, the IP would
// outrank the claim of its owner, alive all along, which would give it up to this
// node. Claimed once it goes out, it moves only if the owner did stop answering.
func (s *Speaker) claimable(owned []netip.Addr) []netip.Addr {
	s.announcing.mu.Lock()
	defer s.announcing.mu.Unlock()
	out := make([]netip.Addr, 0, len(owned))
	for _, ip := range owned {
		if !s.announcing.takeovers[ip.String()].unconfirmed {
			out = append(out, ip)
		}
	}
	return out
}
