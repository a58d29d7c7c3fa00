package speaker

import (
	"context"
	"net/netip"
	"time"

	"herald.dev/herald/speaker/claims"
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
// changed, and keeps them in --state-dir for the next speaker of this node: one that
// starts after this one was killed without a word takes them back too. Loop goroutine
// only.
func (s *Speaker) publishClaims() {
	if s.book.Publish(s.claimable(s.tracker.OwnedIPs())) {
		s.saveClaims()
	}
}

// saveClaims writes the claims this speaker published to --state-dir, when restarts
// keep them (--restart-hold).
func (s *Speaker) saveClaims() {
	if s.cfg.RestartHold <= 0 {
		return
	}
	if err := claims.Save(s.cfg.StateDir, s.cfg.NodeName, s.book.Own()); err != nil {
		s.log.Error(err, "keeping this speaker's IPs for the next one")
	}
}

// keepClaimsCurrent touches the saved claims every claimsTouchEvery until ctx ends, so
// that their age tells how long ago this speaker stopped, however it stopped.
func (s *Speaker) keepClaimsCurrent(ctx context.Context) {
	if s.cfg.RestartHold <= 0 || s.cfg.StateDir == "" {
		return
	}
	tick := time.NewTicker(claimsTouchEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if err := claims.Touch(s.cfg.StateDir, s.cfg.NodeName, now); err != nil {
				s.log.V(1).Info("keeping the saved claims current", "error", err.Error())
			}
		}
	}
}

// claimsTouchEvery bounds how much older the saved claims of a killed speaker look
// than they are.
const claimsTouchEvery = time.Second

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
