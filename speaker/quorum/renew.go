package quorum

import (
	"slices"
	"time"
)

// RenewFast says whether a speaker renews its record at the fast pace. Renewals are
// what tells a peer that a speaker it cannot hear is alive: only the speakers whose
// liveness someone is asking about renew fast, so the API load of a trouble grows
// with the speakers in it, not with the cluster.
//
//   - A degraded speaker (any mode but Quorum) renews fast: its peers must tell it
//     from a dead one, and arbitration counts it only if it renews.
//   - A speaker that an announcing peer's fresh record lists as unreachable renews
//     fast: that peer keeps its IPs in its own election while it sees it renew (a
//     one-way loss, where this speaker still hears a majority and stays in Quorum).
//     A silent peer (Minority, Isolated, Rejoining) elects nothing, so what it does not
//     hear asks nothing: a node cut off from memberlist lists every other speaker as
//     unreachable for as long as the cut lasts, and made all of them renew fast.
//   - A speaker that sees a peer in Hold or Arbitrated renews fast: the arbitrating
//     speaker elects among the records that changed after it lost its majority.
//
// A peer that merely misses another one (a node died) asks nothing of the rest: the
// dead node cannot answer, and everyone else's record already changed at once when
// its view did.
func RenewFast(self string, mode Mode, records []Record, now time.Time) bool {
	if mode.Degraded() {
		return true
	}
	for _, r := range records {
		if r.Node == self || !r.freshAt(now) {
			continue
		}
		if r.Mode == ModeHold || r.Mode == ModeArbitrated || (r.Mode.serving() && slices.Contains(r.Unreachable, self)) {
			return true
		}
	}
	return false
}
