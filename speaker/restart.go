package speaker

import (
	"time"

	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/members"
)

// A speaker restart (a DaemonSet rolling update, an upgrade) must not move the node's
// IPs: each move breaks the connections open through them, since the new owner has no
// conntrack entry for them. So a speaker
//   - keeps the IPs it announces (its claims) in --state-dir, written on every change
//     and touched every second (claimsync.go), so that even a speaker killed without a
//     word leaves them;
//   - stopping on SIGTERM, tells its peers it restarts (members.Leave with restart);
//   - its peers keep its IPs for it for up to --restart-hold: they count it among the
//     electors with its last claims, so nobody takes them, unless its host stops
//     answering (a node shutting down: the host prober), or that time runs out;
//   - meanwhile the node's rules stay (the proxier's, like kube-proxy's, outlive the
//     speaker), so clients whose ARP cache points at the node keep being served;
//   - the new speaker reads the claims back if they were written or touched less than
//     --restart-hold ago, publishes them before it joins, and takes its IPs back
//     without a probe (they were its own a moment ago) once it may announce again.
// What is not covered: a client that has no ARP entry for an IP during the seconds the
// speaker is down gets no ARP answer until it is back.

// restartingPeers returns, of kept (members.Snapshot.Kept), the peers whose IPs this
// speaker keeps for them while they restart, with their claims, releasing those whose
// time is up: past RestartHold, or the node's host answered no probe sent after it
// left. It asks for an election when the next one's time is up. Loop goroutine only.
func (s *Speaker) restartingPeers(kept map[string]members.KeptState, now time.Time) map[string]claims.Set {
	if s.cfg.RestartHold <= 0 {
		return nil
	}
	_, silentAt := s.withhold.Answers()
	out := map[string]claims.Set{}
	var next time.Time
	for n, h := range kept {
		end := h.Since.Add(s.cfg.RestartHold)
		if silent, ok := silentAt[n]; !now.Before(end) || (ok && !silent.Before(h.Since)) {
			s.members.Release(n)
			s.log.Info("no longer keeping the IPs of a restarting speaker", "node", n,
				"reason", map[bool]string{true: "its host answers nothing", false: "it did not come back within --restart-hold"}[ok && !silent.Before(h.Since)])
			continue
		}
		c, err := claims.Decode(h.Data)
		if err != nil {
			c = claims.Set{}
		}
		// What this speaker last saw the node announce counts too: its last claims may
		// not have reached this speaker (their Gen: the highest of the last election).
		for ip, owner := range s.tracker.owners {
			if _, ok := c[ip]; !ok && owner == n {
				c[ip] = s.book.Presumed(n, ip)
			}
		}
		out[n] = c
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	if !next.IsZero() && (s.restartWake.IsZero() || next.Before(s.restartWake) || !s.restartWake.After(now)) {
		s.restartWake = next
		time.AfterFunc(next.Sub(now), s.pokeElection)
	}
	return out
}
