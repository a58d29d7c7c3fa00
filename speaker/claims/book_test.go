package claims

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"herald.dev/herald/speaker/members"
)

// The claims an election counts come from the one membership snapshot of its pass,
// never from a second read of memberlist: a member lost between two reads was live
// for the election yet had no state, and counted as claiming nothing, which gave its
// IPs to another node at once while it still answered (an even split, seen in the
// lab). The book has no memberlist at all: it can only read the snapshot.
func TestBookReadsTheSnapshotOnly(t *testing.T) {
	vip := netip.MustParseAddr("172.18.255.238")
	now := time.Now()
	poked := make(chan struct{}, 1)
	b := NewBook("a", time.Second, func([]byte) {}, func() { poked <- struct{}{} }, logr.Discard())
	since := map[string]time.Time{"b": now.Add(-time.Minute), "c": now.Add(-time.Minute), "d": now}
	dClaims := Set{vip: {Token: "t"}}
	snap := members.Snapshot{
		Live:   []string{"a", "b", "c", "d"},
		States: map[string][]byte{"b": Set{}.Encode(), "d": dClaims.Encode()},
		Lost:   map[string][]byte{"x": Set{vip: {}}.Encode()},
	}
	got, waiting := b.Of(snap, since, now)
	if _, ok := got["c"]; ok || waiting {
		t.Errorf("c, live for a minute without a state: claims %v, waiting %v; want none, not waiting", got["c"], waiting)
	}
	if _, ok := got["d"][vip]; !ok {
		t.Errorf("d's claims %v, want %v from the snapshot", got["d"], dClaims)
	}
	if _, ok := got["b"]; !ok {
		t.Errorf("b's (empty) claims missing: %v", got)
	}

	snap.States = map[string][]byte{"b": Set{}.Encode()} // d joined a moment ago, no state yet
	if _, waiting := b.Of(snap, since, now); !waiting {
		t.Error("d joined a moment ago without a state: not waiting for its claims")
	}
	select {
	case <-poked:
	case <-time.After(5 * time.Second):
		t.Error("no pass asked for when d's wait for its claims ends")
	}
	arb := b.Arbitrated(snap, []string{"a", "b", "x"}, since, now)
	if _, ok := arb["x"][vip]; !ok {
		t.Errorf("arbitrated claims of x, lost: %v, want its last claims from the snapshot", arb["x"])
	}
}

// A takeover claims one more than the highest Gen known, with the speakers the hash
// ranks before this one for the group's key; an IP the previous speaker of the node
// announced is taken back with its old claim, once; what is published changes only
// when the claims do.
func TestBookTakeRestoreAndPublish(t *testing.T) {
	ip1, ip2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	var sent [][]byte
	b := NewBook("a", time.Second, func(raw []byte) { sent = append(sent, raw) }, func() {}, logr.Discard())
	old := Claim{Token: "old", Gen: 7}
	b.Restore(Set{ip2: old})
	if len(sent) != 1 {
		t.Fatalf("restored claims published %d times, want once at once", len(sent))
	}
	b.StartPass(map[netip.Addr]string{ip1: "t1", ip2: "t2"}, []string{"a", "b", "c"})
	b.NoteGens(map[string]Set{"b": {ip1: {Gen: 4}}})
	if restored := b.Take(ip1, ip1); restored {
		t.Error("ip1 was never this node's, yet taken as restored")
	}
	if restored := b.Take(ip2, ip2); !restored {
		t.Error("ip2, restored, taken as a new claim")
	}
	b.Publish([]netip.Addr{ip1, ip2})
	own := b.Own()
	if c := own[ip1]; c.Gen != 5 || c.Token != "t1" || !slices.Equal(c.Over, b.RankedBefore("a", ip1)) {
		t.Errorf("claim on ip1 %+v, want Gen 5, token t1, over %v", c, b.RankedBefore("a", ip1))
	}
	if c := own[ip2]; c.Token != "old" || c.Gen != 7 {
		t.Errorf("restored claim on ip2 became %+v, want %+v", c, old)
	}
	n := len(sent)
	b.Publish([]netip.Addr{ip1, ip2})
	if len(sent) != n {
		t.Error("the same claims were published again")
	}
	b.Release(ip2)
	if restored := b.Take(ip2, ip2); restored {
		t.Error("ip2 was restored twice")
	}
}

// The restored claims stay published until an election that may take has placed
// them: a first pass that takes nothing (waiting for a new peer's claims) published
// only what the speaker announced, none, and the next election of every node gave
// an IP away from its hash node back to that node. Once settled, the restored claims
// not taken back (their IPs moved on meanwhile) go.
func TestBookRestoredClaimsPublishedUntilSettled(t *testing.T) {
	ip1, ip2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	restored := Set{ip1: {Over: []string{"b"}, Gen: 2}, ip2: {Gen: 1}}
	b := NewBook("a", time.Second, func([]byte) {}, func() {}, logr.Discard())
	if b.Restoring() {
		t.Fatal("Restoring before any claim was restored")
	}
	b.Restore(restored)
	b.StartPass(map[netip.Addr]string{ip1: "", ip2: ""}, []string{"a", "b"})
	b.Publish(nil) // a pass that could take nothing back
	if got := b.Own(); !maps.EqualFunc(got, restored, claimEqual) {
		t.Fatalf("published after a pass that took nothing: %v, want the restored %v", got, restored)
	}
	if !b.Take(ip2, ip2) {
		t.Fatal("the restored ip2 was taken as a new claim")
	}
	b.Publish([]netip.Addr{ip2})
	if got := b.Own(); !maps.EqualFunc(got, restored, claimEqual) {
		t.Fatalf("published with ip2 taken back: %v, want %v", got, restored)
	}
	if !b.Restoring() {
		t.Fatal("not Restoring before the restored claims were settled")
	}
	b.SettleRestored() // the election gave ip1 to another node
	if b.Restoring() {
		t.Fatal("still Restoring once the restored claims were settled")
	}
	b.Publish([]netip.Addr{ip2})
	if got, want := b.Own(), (Set{ip2: restored[ip2]}); !maps.EqualFunc(got, want, claimEqual) {
		t.Fatalf("published once settled: %v, want %v", got, want)
	}
	if b.Take(ip1, ip1) {
		t.Error("ip1, settled elsewhere, taken back as restored")
	}
}

func claimEqual(a, b Claim) bool {
	return a.Token == b.Token && a.Gen == b.Gen && slices.Equal(a.Over, b.Over)
}

// Taking back the restored IPs, and publishing exactly them, keeps them this speaker's
// claims. The book once kept the restored set and its own claims in one map: taking
// the IPs back emptied its own claims, publishing the same bytes changed nothing, and
// its next election, without its own claims, gave an IP away from its hash node back
// to that node, breaking the connections open through it.
func TestBookRestoredClaimsStayOwnOnceTaken(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.2")
	claim := Claim{Token: "t", Over: []string{"b"}, Gen: 2}
	b := NewBook("a", time.Second, func([]byte) {}, func() {}, logr.Discard())
	b.Restore(Set{ip: claim})
	b.StartPass(map[netip.Addr]string{ip: "t"}, []string{"a", "b"})
	if restored := b.Take(ip, ip); !restored {
		t.Fatal("the restored IP was taken as a new claim")
	}
	b.Publish([]netip.Addr{ip})
	if c, ok := b.Own()[ip]; !ok || c.Gen != claim.Gen {
		t.Errorf("own claims after taking the restored IP back: %v, want %v", b.Own(), Set{ip: claim})
	}
	got, _ := b.Of(members.Snapshot{Live: []string{"a", "b"}, States: map[string][]byte{"b": Set{}.Encode()}}, nil, time.Now())
	if _, ok := got["a"][ip]; !ok {
		t.Errorf("the claims an election counts for this speaker: %v, want %v", got["a"], Set{ip: claim})
	}
}
