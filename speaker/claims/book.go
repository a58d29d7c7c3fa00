package claims

import (
	"bytes"
	"maps"
	"net/netip"
	"time"

	"github.com/go-logr/logr"

	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/members"
)

// Book is what one speaker knows of the claims: its own (the IPs it announces, each as
// it claimed it), its peers' as memberlist last carried them, and the last claims of
// the peers memberlist lost. The speaker's election pass reads and updates it, on the
// loop goroutine only.
type Book struct {
	self     string
	joinWait time.Duration
	publish  func([]byte)
	poke     func()
	log      logr.Logger

	// own is the set as last published (ownRaw encoded); sent: published at least once.
	own    Set
	ownRaw []byte
	sent   bool
	// waitUntil is the latest deadline a pass was asked for, waiting for a new peer's
	// claims (one timer per deadline).
	waitUntil time.Time

	// taken is, per IP this speaker announces, its claim as made when it took the IP.
	taken map[netip.Addr]Claim
	// restored are the IPs the previous speaker of this node announced when it
	// stopped: taken back without a new claim.
	restored Set
	// tokens are the rebalance tokens of the last pass, gens the highest Gen of every
	// claim it knew (its own, its peers', live and lost), known the speakers it knew
	// of (live, lost since this one started, or with a record).
	tokens map[netip.Addr]string
	gens   map[netip.Addr]uint64
	known  []string

	peers, lost map[string]decoded
}

// decoded caches the decoded claims of a peer with the bytes they came from.
type decoded struct {
	raw []byte
	set Set
}

// NewBook returns the book of speaker self. publish sends the speaker's claims to its
// peers (members.Publish); poke asks for another election pass, when a peer that
// joined less than joinWait ago may have sent its claims.
func NewBook(self string, joinWait time.Duration, publish func([]byte), poke func(), log logr.Logger) *Book {
	return &Book{self: self, joinWait: joinWait, publish: publish, poke: poke, log: log,
		taken: map[netip.Addr]Claim{}, peers: map[string]decoded{}, lost: map[string]decoded{}}
}

// Restore takes the claims the previous speaker of this node left (Load) as this
// speaker's own, and publishes them at once: the peers keeping its IPs for it see them
// as this node's as soon as it is back.
func (b *Book) Restore(c Set) {
	// A copy: Take empties restored, which must not empty what is published.
	b.restored = maps.Clone(c)
	for ip, cl := range c {
		b.taken[ip] = cl
	}
	b.own, b.ownRaw, b.sent = c, c.Encode(), true
	b.publish(b.ownRaw)
}

// Restoring says whether this speaker started with restored claims that no election
// that may take has placed yet (SettleRestored).
func (b *Book) Restoring() bool { return b.restored != nil }

// Own returns the claims this speaker last published.
func (b *Book) Own() Set { return b.own }

// Publish tells the peers that this speaker announces owned, each IP with the claim
// it made when it took it, when that changed since the last time, and says whether it
// did. The restored claims not taken back yet go with them until SettleRestored: a
// pass that may not take (waiting for a new peer's claims) takes none back, and
// publishing without them would hand their IPs to the next node.
func (b *Book) Publish(owned []netip.Addr) bool {
	c := own(owned, b.taken)
	for ip, cl := range b.restored {
		c[ip] = cl
	}
	raw := c.Encode()
	if b.sent && bytes.Equal(raw, b.ownRaw) {
		return false
	}
	b.own, b.ownRaw, b.sent = c, raw, true
	b.publish(raw)
	return true
}

// Of returns the claims of this speaker and of its live peers in snap, and whether a
// peer that became live (since) less than joinWait before now has not sent its claims
// yet; after that, a peer without claims (a speaker of an older version, say) counts
// as claiming nothing. The claims come from snap only: read again from memberlist, a
// member lost in between would be live for the election yet claim nothing.
func (b *Book) Of(snap members.Snapshot, since map[string]time.Time, now time.Time) (map[string]Set, bool) {
	out := map[string]Set{b.self: b.own}
	waiting := false
	for _, m := range snap.Live {
		if m == b.self {
			continue
		}
		raw, ok := snap.States[m]
		if !ok {
			if until := since[m].Add(b.joinWait); until.After(now) {
				waiting = true
				if until.After(b.waitUntil) {
					b.waitUntil = until
					time.AfterFunc(until.Sub(now), b.poke)
				}
			}
			continue
		}
		out[m] = b.decode(b.peers, m, raw)
	}
	forgetOthers(b.peers, snap.States)
	return out, waiting
}

// Arbitrated returns the claims of an election arbitrated through the API server (an
// even split): those of the live members, and for each elector this speaker cannot
// hear, the last claims it had when memberlist lost it. Each side announces what it
// announced when the split began (Hold takes nothing), so both sides elect with the
// same claims and keep every IP where it was; by the hash alone, every IP that
// no-fail-back had kept off its hash node would move, two nodes answering it while
// the sides' elections ran apart.
func (b *Book) Arbitrated(snap members.Snapshot, electors []string, since map[string]time.Time, now time.Time) map[string]Set {
	out, _ := b.Of(snap, since, now)
	lost := b.Lost(snap.Lost)
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

// Lost returns the last claims of the members lost without a goodbye (their states,
// members.Snapshot's Lost), decoded once per change.
func (b *Book) Lost(lost map[string][]byte) map[string]Set {
	out := make(map[string]Set, len(lost))
	for n, raw := range lost {
		out[n] = b.decode(b.lost, n, raw)
	}
	forgetOthers(b.lost, lost)
	return out
}

// decode returns the claims a peer's state raw holds, decoding them only when they
// differ from what cache holds for the peer. Bad claims count as none.
func (b *Book) decode(cache map[string]decoded, peer string, raw []byte) Set {
	d, ok := cache[peer]
	if !ok || !bytes.Equal(d.raw, raw) {
		c, err := Decode(raw)
		if err != nil {
			b.log.Info("ignoring a peer's claims", "peer", peer, "error", err.Error())
			c = Set{}
		}
		d = decoded{raw: raw, set: c}
		cache[peer] = d
	}
	return d.set
}

// forgetOthers drops from cache the peers states no longer has.
func forgetOthers(cache map[string]decoded, states map[string][]byte) {
	for p := range cache {
		if _, ok := states[p]; !ok {
			delete(cache, p)
		}
	}
}

// StartPass sets what the claims of the election pass about to run are made of: the
// rebalance tokens of the Services (Tokens) and the speakers known to this one.
func (b *Book) StartPass(tokens map[netip.Addr]string, known []string) {
	b.tokens, b.known = tokens, known
}

// NoteGens remembers the highest Gen of every IP among the claims known now (Gens):
// a takeover claims one more.
func (b *Book) NoteGens(sets ...map[string]Set) { b.gens = Gens(sets...) }

// Take records this speaker's claim on ip, which it takes over now as a member of the
// group whose hash key is key, and says whether the IP is one the previous speaker of
// this node announced (restored: its claim stands, and taking it back is no move).
func (b *Book) Take(ip, key netip.Addr) (restored bool) {
	_, restored = b.restored[ip]
	delete(b.restored, ip)
	if !restored {
		b.taken[ip] = Claim{Token: b.tokens[ip], Over: b.RankedBefore(b.self, key), Gen: b.gens[ip] + 1}
	}
	return restored
}

// SettleRestored ends the restored claims not taken back: called after the first
// election that could take them, which gave them to other nodes (claims newer than
// this node's). They are published no longer.
func (b *Book) SettleRestored() {
	for ip := range b.restored {
		delete(b.taken, ip)
	}
	b.restored = nil
}

// Release forgets this speaker's claim on ip, which it no longer announces.
func (b *Book) Release(ip netip.Addr) { delete(b.taken, ip) }

// Presumed is the claim node would have made on ip, had it taken the IP at the last
// pass: for a restarting peer whose last claims may not have reached this speaker.
func (b *Book) Presumed(node string, ip netip.Addr) Claim {
	return Claim{Token: b.tokens[ip], Over: b.RankedBefore(node, ip), Gen: b.gens[ip]}
}

// RankedBefore returns the known speakers the hash ranks before node for ip: those
// node stands in for when it takes ip. A speaker this one never knew of (a node new
// to the cluster) is not among them and takes, when it comes, what the hash gives it.
func (b *Book) RankedBefore(node string, ip netip.Addr) []string {
	var out []string
	for _, n := range election.Order(ip, b.known) {
		if n == node {
			break
		}
		out = append(out, n)
	}
	return out
}
