package quorum

import (
	"slices"
	"time"
)

// AskedBy returns the peers that are asking whether self is alive, sorted. A peer
// tells a live speaker it cannot hear from a dead one by its record changing after it
// lost it, and an arbitrating peer counts the speakers whose record changed after its
// trouble began; so a speaker writes its record once, at once, whenever a peer starts
// asking, and otherwise at the slow pace. A record changes after the asker's moment
// by causality: the speaker reacts to the asker's own record, written after it.
//
//   - An announcing peer whose fresh record lists self as unreachable asks: it keeps
//     self's IPs in its own election while self's record has changed since it lost
//     self (a one-way loss, where self still hears a majority and stays in Quorum).
//     A silent peer (Minority, Isolated, Rejoining) elects nothing, so whom it cannot
//     hear asks nothing: a node cut off from memberlist lists every other speaker as
//     unreachable for as long as the cut lasts.
//   - A peer in Hold or Arbitrated asks: arbitration elects among the records that
//     changed after it lost its majority.
//
// A peer that merely misses another one (a node died) asks nothing of the rest: the
// dead node cannot answer, and everyone else's record already changed at once when
// its view did. Renewing fast for as long as somebody asks, as herald did before,
// added nothing after that first write (a record stays fresh for its duration whatever
// the pace) and cost two writes a second per speaker for the whole of a split.
func AskedBy(self string, records []Record, now time.Time) []string {
	var out []string
	for _, r := range records {
		if r.Node == self || !r.freshAt(now) {
			continue
		}
		if r.Mode == ModeHold || r.Mode == ModeArbitrated || (r.Mode.serving() && slices.Contains(r.Unreachable, self)) {
			out = append(out, r.Node)
		}
	}
	return sortedSet(out)
}
