package quorum

import (
	"slices"
	"time"
)

// facts are what one decision knows of the speakers, and the questions the rule asks
// of them.
type facts struct {
	self     string
	now      time.Time
	joinWait time.Duration
	grace    time.Duration
	// quorumSince is when this speaker entered Quorum (State.QuorumSince).
	quorumSince time.Time
	// live are the members this speaker hears (itself included), since when each was
	// last heard to join, fresh the records renewed within their duration by writer.
	live  []string
	since map[string]time.Time
	fresh map[string]*Record
	// expected are the live members and the writers of fresh records, as a set too.
	expected    []string
	expectedSet map[string]struct{}
	// quorate: this speaker hears a majority of the expected (set once known).
	quorate bool
}

func newFacts(cfg Config, st State, in Input, live []string, since map[string]time.Time, fresh map[string]*Record, expected []string) *facts {
	// A set, not a list: every record's members are counted against it, and a list
	// made that cubic in the speakers (BenchmarkDecide, docs/scale.md).
	set := make(map[string]struct{}, len(expected))
	for _, n := range expected {
		set[n] = struct{}{}
	}
	return &facts{self: in.Self, now: in.Now, joinWait: cfg.JoinWait, grace: cfg.Grace, quorumSince: st.QuorumSince,
		live: live, since: since, fresh: fresh, expected: expected, expectedSet: set}
}

// current says whether r was written after this speaker last heard its writer join,
// or its writer joined less than JoinWait ago: a record older than that join says
// what its writer saw before it heard this speaker again.
func (f *facts) current(r *Record) bool {
	s, heard := f.since[r.Node]
	return !heard || !r.ChangedAt.Before(s) || f.now.Sub(s) < f.joinWait
}

// majority says whether members are more than half of the expected speakers.
func (f *facts) majority(members []string) bool {
	return 2*countIn(f.expectedSet, members) > len(f.expected)
}

// joinedRecently: a writer this speaker heard join less than JoinWait ago has perhaps
// not caught up with it yet.
func (f *facts) joinedRecently(n string) bool {
	s, ok := f.since[n]
	return ok && f.now.Sub(s) < f.joinWait
}

// hears says whether this speaker hears n while it hears a majority.
func (f *facts) hears(n string) bool { return f.quorate && slices.Contains(f.live, n) }

// settledBefore: self heard a majority already before n joined its view, so it was
// not the one apart. Before n's own join, not before the latest: a member back from a
// cut passes on the deaths it declared meanwhile, two peers may each believe the other
// dead for a moment, and each then hears the returning member and the other join
// within a second; counting only the members heard before both, each took itself for
// the one coming back and let the other's passing record depose it.
func (f *facts) settledBefore(n string) bool {
	joined := f.since[n]
	heard := []string{f.self}
	for _, m := range f.live {
		if m != f.self && m != n && f.since[m].Before(joined) {
			heard = append(heard, m)
		}
	}
	return f.majority(heard)
}

// leftOutSinceQuorum: r changed to leave self out while self has been in Quorum all
// along, so self was not the one apart, whether it still hears the writer or lost it
// too (two peers each believing a rumour of the other's death).
func (f *facts) leftOutSinceQuorum(r *Record) bool {
	return f.quorate && !f.quorumSince.IsZero() && f.quorumSince.Before(r.ChangedAt)
}

// deposers returns the writers of current, fresh records that publish a majority
// without self, unless a member of that majority publishes a current record listing
// self: then the record is stale (its writer died or was cut off after writing it) or
// memberlist is still settling (each side of a forming split briefly sees a majority
// without the other).
//
// A writer that joined self's view only just was apart from self and may hold self's
// IPs. Who was apart decides: if self heard a majority already before it joined
// (settled), the writer is the one coming back, and its view is only behind (it
// publishes a majority without the peers it has not heard again yet), so members that
// list self outvote it as above. If not, self is the one coming back and the writer
// deposes it regardless, until it hears self.
//
// Only a writer that announces deposes. A silent one (Minority, Isolated, Rejoining)
// serves no IP, so deposing self for it would leave self's IPs to nobody; and its view
// is the least trustworthy there is: a node coming back from a cut hears its peers
// one by one and publishes, for a moment, a majority without the ones it has not
// heard yet, which a peer that has not heard it either cannot tell from a real one.
//
// A writer self hears while it hears a majority itself (hears) deposes it only once
// its record has said so for grace, and deposeAt is when the first such writer will
// (zero if none). That is a rumour, most likely: a member back from a partition
// gossips the deaths it declared while cut off, its peers believe one for a moment and
// write it, and the accused, alive all along, refutes it and is heard again at once.
// Deposed at once, it would go silent and its IPs would move for nothing. Waiting costs
// no double answer: the majority's new owners take its IPs only once it stops
// answering (layer2.WaitForPeers). The same wait applies to a writer self does not
// hear, if its record left self out while self was in Quorum all along
// (leftOutSinceQuorum): two peers that each believed a rumour of the other's death
// have each lost the other, and each publishes a majority without the other through
// the member they both hear. Deposed at once, both went silent and their IPs moved
// to the hash's nodes (fail-back) a moment before they heard each other again. In a
// lasting cut between two members of a majority, each is deposed grace later.
func (f *facts) deposers() (out []string, deposeAt time.Time) {
	self, fresh := f.self, f.fresh
	for n, r := range fresh {
		if n == self || !r.Mode.serving() || r.lists(self) || !f.current(r) || !f.majority(r.Members) {
			continue
		}
		vouched := false
		for _, m := range r.Members {
			if o := fresh[m]; o != nil && m != self && f.current(o) && o.lists(self) {
				vouched = true
				break
			}
		}
		if vouched && (!f.joinedRecently(n) || f.settledBefore(n)) {
			continue
		}
		if ((f.hears(n) && !f.joinedRecently(n)) || f.leftOutSinceQuorum(r)) && !r.ChangedAt.IsZero() {
			if at := r.ChangedAt.Add(f.grace); f.now.Before(at) {
				if deposeAt.IsZero() || at.Before(deposeAt) {
					deposeAt = at
				}
				continue
			}
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, deposeAt
}

// listeners returns the writers of current, fresh records of announcing speakers that
// list self among a majority they hear.
func (f *facts) listeners() []string {
	var out []string
	for n, r := range f.fresh {
		if n != f.self && r.Mode.serving() && r.lists(f.self) && f.current(r) && f.majority(r.Members) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
