package speaker

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"herald.dev/herald/speaker/members"
)

// A speaker restart (a DaemonSet rolling update, an upgrade) must not move the node's
// IPs: each move breaks the connections open through them, since the new owner has no
// conntrack entry for them. So a speaker stopping on SIGTERM
//   - writes the IPs it announces (its claims) to --state-dir, and tells its peers it
//     restarts (members.Leave with restart);
//   - its peers keep its IPs for it for up to --restart-hold: they count it among the
//     electors with its last claims, so nobody takes them, unless its host stops
//     answering (a node shutting down: the host prober), or that time runs out;
//   - meanwhile the node's rules stay (the proxier's, like kube-proxy's, outlive the
//     speaker), so clients whose ARP cache points at the node keep being served;
//   - the new speaker reads the claims back if they are younger than --restart-hold,
//     publishes them before it joins, and takes its IPs back without a probe (they
//     were its own a moment ago) once it may announce again.
// What is not covered: a client that has no ARP entry for an IP during the seconds the
// speaker is down gets no ARP answer until it is back.

// claimsFile is where the speaker of node keeps its claims across a restart; the
// name carries the node so that speakers sharing a directory (the lab) do not mix.
func claimsFile(dir, node string) string { return filepath.Join(dir, "claims-"+node) }

// saveClaims writes c for the next speaker of this node.
func saveClaims(dir, node string, c Claims) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	path := claimsFile(dir, node)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, c.Encode(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// loadClaims reads the claims the previous speaker of this node saved, if it saved
// them less than maxAge ago; none otherwise (a crash, a reboot, a speaker stopped long
// ago). The file is removed: the claims are good for one start.
func loadClaims(dir, node string, maxAge time.Duration, now time.Time) (Claims, error) {
	if dir == "" || maxAge <= 0 {
		return nil, nil
	}
	path := claimsFile(dir, node)
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer os.Remove(path)
	if now.Sub(fi.ModTime()) > maxAge {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	c, err := DecodeClaims(b)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return c, nil
}

// restartingPeers returns, of kept (members.Snapshot.Kept), the peers whose IPs this
// speaker keeps for them while they restart, with their claims, releasing those whose
// time is up: past RestartHold, or the node's host answered no probe sent after it
// left. It asks for an election when the next one's time is up. Loop goroutine only.
func (s *Speaker) restartingPeers(kept map[string]members.KeptState, now time.Time) map[string]Claims {
	if s.cfg.RestartHold <= 0 {
		return nil
	}
	_, silentAt := s.prober.answers()
	out := map[string]Claims{}
	var next time.Time
	for n, h := range kept {
		end := h.Since.Add(s.cfg.RestartHold)
		if silent, ok := silentAt[n]; !now.Before(end) || (ok && !silent.Before(h.Since)) {
			s.members.Release(n)
			s.log.Info("no longer keeping the IPs of a restarting speaker", "node", n,
				"reason", map[bool]string{true: "its host answers nothing", false: "it did not come back within --restart-hold"}[ok && !silent.Before(h.Since)])
			continue
		}
		c, err := DecodeClaims(h.Data)
		if err != nil {
			c = Claims{}
		}
		// What this speaker last saw the node announce counts too: its last claims may
		// not have reached this speaker (their Gen: the highest of the last election).
		for ip, owner := range s.tracker.owners {
			if _, ok := c[ip]; !ok && owner == n {
				c[ip] = Claim{Token: s.tokens[ip], Over: s.rankedBefore(n, ip), Gen: s.claimGens[ip]}
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
