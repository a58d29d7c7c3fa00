package speaker

import (
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
)

// The claims an election counts come from the one membership snapshot of its pass,
// never from a second read of memberlist: a member lost between two reads was live
// for the election yet had no state, and counted as claiming nothing, which gave its
// IPs to another node at once while it still answered (an even split, seen in the
// lab). The speaker here has no memberlist at all: a read would panic.
func TestClaimsOfReadsTheSnapshotOnly(t *testing.T) {
	vip := netip.MustParseAddr("172.18.255.238")
	cfg := DefaultConfig()
	cfg.NodeName = "a"
	cfg.Quorum = quorum.DefaultConfig()
	s := &Speaker{cfg: cfg, log: logr.Discard(), trigger: make(chan struct{}, 1),
		peerClaims: map[string]peerClaims{}, lostCache: map[string]peerClaims{},
		since: map[string]time.Time{"b": time.Now().Add(-time.Minute), "c": time.Now().Add(-time.Minute), "d": time.Now()}}
	dClaims := Claims{vip: {Token: "t"}}
	snap := members.Snapshot{
		Live:   []string{"a", "b", "c", "d"},
		States: map[string][]byte{"b": Claims{}.Encode(), "d": dClaims.Encode()},
		Lost:   map[string][]byte{"x": Claims{vip: {}}.Encode()},
	}
	got, waiting := s.claimsOf(snap)
	if _, ok := got["c"]; ok || waiting {
		t.Errorf("c, live for a minute without a state: claims %v, waiting %v; want none, not waiting", got["c"], waiting)
	}
	if _, ok := got["d"][vip]; !ok {
		t.Errorf("d's claims %v, want %v from the snapshot", got["d"], dClaims)
	}
	if _, ok := got["b"]; !ok {
		t.Errorf("b's (empty) claims missing: %v", got)
	}

	snap.States = map[string][]byte{"b": Claims{}.Encode()} // d joined a moment ago, no state yet
	if _, waiting := s.claimsOf(snap); !waiting {
		t.Error("d joined a moment ago without a state: not waiting for its claims")
	}
	arb := s.arbitratedClaims(snap, []string{"a", "b", "x"})
	if _, ok := arb["x"][vip]; !ok {
		t.Errorf("arbitrated claims of x, lost: %v, want its last claims from the snapshot", arb["x"])
	}
}
