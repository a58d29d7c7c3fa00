package speaker

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
)

func TestSpareRestartingGivesUnclaimedIPsToLiveNodes(t *testing.T) {
	v := election.View{Members: []string{"a", "b", "c"}, Nodes: []election.Node{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Advertisements: []election.Advertisement{{Name: "all", AllPools: true}}}
	var svcs []election.Service
	ready := true
	for i := range 30 {
		svcs = append(svcs, election.Service{Key: fmt.Sprintf("default/s%d", i), Pool: "p",
			IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})}, Endpoints: []election.Endpoint{{Node: "a", Ready: &ready}}})
	}
	decisions := election.Elect(v, svcs)
	// b restarts: it claims the first IP the election gives it, not the others.
	var claimed, unclaimed []netip.Addr
	for _, d := range decisions {
		if d.Owner == "b" {
			if len(claimed) == 0 {
				claimed = append(claimed, d.IP)
			} else {
				unclaimed = append(unclaimed, d.IP)
			}
		}
	}
	if len(unclaimed) == 0 {
		t.Fatalf("the hash gave b fewer than two of 30 IPs: %v", decisions)
	}
	before := slices.Clone(decisions)
	restarting := map[string]claims.Set{"b": {claimed[0]: {}}}
	got := spareRestarting(v, svcs, decisions, restarting)
	if !slices.EqualFunc(before, decisions, func(x, y election.Decision) bool { return x.IP == y.IP && x.Owner == y.Owner }) {
		t.Error("spareRestarting changed the decisions it was given (the Elector keeps them)")
	}
	for i, d := range got {
		switch {
		case d.IP == claimed[0] && d.Owner != "b":
			t.Errorf("%v, claimed by the restarting node, went to %q", d.IP, d.Owner)
		case slices.Contains(unclaimed, d.IP) && (d.Owner == "b" || d.Owner == ""):
			t.Errorf("%v, not claimed by the restarting node, has owner %q, want a live node", d.IP, d.Owner)
		case slices.Contains(unclaimed, d.IP) && d.Owner != before[i].Candidates[1]:
			t.Errorf("%v went to %q, want the runner-up %q", d.IP, d.Owner, before[i].Candidates[1])
		case !slices.Contains(unclaimed, d.IP) && d.Owner != before[i].Owner:
			t.Errorf("%v moved from %q to %q, though no restarting node had it", d.IP, before[i].Owner, d.Owner)
		}
	}

	// Only restarting nodes can take it: it stays with one of them.
	onlyB := v
	onlyB.Members = []string{"b"}
	d := election.Elect(onlyB, svcs[:1])
	if got := spareRestarting(onlyB, svcs[:1], d, map[string]claims.Set{"b": {}}); got[0].Owner != "b" {
		t.Errorf("with no live candidate the IP went to %q, want it kept by the restarting node", got[0].Owner)
	}
}
