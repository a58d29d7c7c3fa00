package speaker

import (
	"bytes"
	"net/netip"
	"time"

	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
)

// peerClaims caches the decoded claims of a peer with the bytes they came from.
type peerClaims struct {
	raw    []byte
	claims Claims
}

// claimsOf returns the claims of this speaker and of its live peers, and whether a
// peer that joined less than JoinWait ago has not sent its claims yet (after that, a
// peer without claims, a speaker of an older version, say, counts as claiming
// nothing). Loop goroutine only.
func (s *Speaker) claimsOf(membership members.Snapshot) (map[string]Claims, bool) {
	states := membership.States
	out := map[string]Claims{s.cfg.NodeName: s.claims}
	waiting := false
	now := time.Now()
	for _, m := range membership.Live {
		if m == s.cfg.NodeName {
			continue
		}
		raw, ok := states[m]
		if !ok {
			if until := s.since[m].Add(s.cfg.Quorum.JoinWait); until.After(now) {
				waiting = true
				if until.After(s.claimsWaitUntil) { // one timer per deadline
					s.claimsWaitUntil = until
					time.AfterFunc(until.Sub(now), s.pokeElection)
				}
			}
			continue
		}
		out[m] = s.decoded(s.peerClaims, m, raw)
	}
	forgetOthers(s.peerClaims, states)
	return out, waiting
}

// decoded returns the claims a peer's state raw holds, decoding them only when they
// differ from what cache holds for the peer. Bad claims count as none.
func (s *Speaker) decoded(cache map[string]peerClaims, peer string, raw []byte) Claims {
	pc, ok := cache[peer]
	if !ok || !bytes.Equal(pc.raw, raw) {
		c, err := DecodeClaims(raw)
		if err != nil {
			s.log.Info("ignoring a peer's claims", "peer", peer, "error", err.Error())
			c = Claims{}
		}
		pc = peerClaims{raw: raw, claims: c}
		cache[peer] = pc
	}
	return pc.claims
}

// forgetOthers drops from cache the peers states no longer has.
func forgetOthers(cache map[string]peerClaims, states map[string][]byte) {
	for p := range cache {
		if _, ok := states[p]; !ok {
			delete(cache, p)
		}
	}
}

// standsInFor returns the speakers known to this one (live, lost since it started, or
// with a record) that the hash ranks before it for key: those it stands in for when it
// takes key's group. A speaker it never knew of (a node new to the cluster) is not
// among them and takes, when it comes, what the hash gives it.
func (s *Speaker) standsInFor(key netip.Addr) []string {
	return s.rankedBefore(s.cfg.NodeName, key)
}

// rankedBefore returns the known speakers the hash ranks before node for ip.
func (s *Speaker) rankedBefore(node string, ip netip.Addr) []string {
	var out []string
	for _, n := range election.Order(ip, s.known) {
		if n == node {
			break
		}
		out = append(out, n)
	}
	return out
}

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
	for n := range s.lostAt {
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
	c := ownClaims(s.claimable(s.tracker.OwnedIPs()), s.taken)
	raw := c.Encode()
	if s.claimsSent && bytes.Equal(raw, s.claimsRaw) {
		return
	}
	s.claims, s.claimsRaw, s.claimsSent = c, raw, true
	s.members.Publish(raw)
}

// claimable returns the IPs of owned that are no unconfirmed takeover: one waiting
// for an owner lost without a goodbye to stop answering. Such a loss may be a rumour
// (a member back from a partition passes on the deaths it declared while cut off, and
// a peer believes one until the accused refutes it): claimed at once, the IP would
// outrank the claim of its owner, alive all along, which would give it up to this
// node. Claimed once it goes out, it moves only if the owner did stop answering.
func (s *Speaker) claimable(owned []netip.Addr) []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]netip.Addr, 0, len(owned))
	for _, ip := range owned {
		if !s.takeovers[ip.String()].unconfirmed {
			out = append(out, ip)
		}
	}
	return out
}

// arbitratedClaims are the claims of an election arbitrated through the API server
// (an even split): those of the live members, and for each elector this speaker
// cannot hear, the last claims it had when memberlist lost it. Each side announces
// what it announced when the split began (Hold takes nothing), so both sides elect
// with the same claims and keep every IP where it was; by the hash alone, every IP
// that no-fail-back had kept off its hash node would move, two nodes answering it
// while the sides' elections ran apart.
func (s *Speaker) arbitratedClaims(membership members.Snapshot, electors []string) map[string]Claims {
	out, _ := s.claimsOf(membership)
	lost := s.lostClaims(membership.Lost)
	for _, n := range electors {
		if _, ok := out[n]; ok {
			continue
		}
		if c, ok := lost[n]; ok {
			out[n] = c
		}
	}
	return out
}

// lostClaims are the last claims of the members lost without a goodbye (their states,
// members.Snapshot's Lost), decoded once per change. Loop goroutine only.
func (s *Speaker) lostClaims(lost map[string][]byte) map[string]Claims {
	out := make(map[string]Claims, len(lost))
	for n, raw := range lost {
		out[n] = s.decoded(s.lostCache, n, raw)
	}
	forgetOthers(s.lostCache, lost)
	return out
}
