package election

import (
	"net/netip"
	"testing"
)

// A leaving node (cordoned, say) gives its IPs to another node even as their
// incumbent, keeps serving them when no other node can, and takes nothing back once it
// stops leaving: the node that took the IP stands in for it.
func TestLeavingNode(t *testing.T) {
	svcs := []Service{mkSvc("ns/s1", ips("10.0.0.1"), inPool("p"))}
	members := []string{"a", "b", "c"}
	order := Order(ip("10.0.0.1"), members)
	first, second := order[0], order[1]
	leaving := func(names ...string) View {
		v := View{Members: members, Advertisements: ads(allPools("all"))}
		for _, m := range members {
			n := mkNode(m)
			for _, l := range names {
				if l == m {
					n.Leaving = "cordoned"
				}
			}
			v.Nodes = append(v.Nodes, n)
		}
		return v
	}
	owner := func(v View) Decision {
		t.Helper()
		var e Elector
		got, want := e.Elect(v, svcs)[0], Elect(v, svcs)[0]
		if got.Owner != want.Owner {
			t.Fatalf("Elector elects %s, Elect %s", got.Owner, want.Owner)
		}
		return want
	}

	if got := owner(leaving()).Owner; got != first {
		t.Fatalf("test premise: nobody leaving, owner %s, want %s", got, first)
	}
	v := leaving(first)
	v.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: first}}
	d := owner(v)
	if d.Owner != second {
		t.Errorf("%s leaving and announcing: owner %s, want %s", first, d.Owner, second)
	}
	if last := d.Candidates[len(d.Candidates)-1]; last != first {
		t.Errorf("%s leaving: candidates %v, want it last", first, d.Candidates)
	}
	if got := owner(leaving(members...)).Owner; got != first {
		t.Errorf("every node leaving: owner %s, want the hash's %s (a leaving node still serves)", got, first)
	}
	if got := owner(leaving(order[1], order[2])).Owner; got != first {
		t.Errorf("all but %s leaving: owner %s", first, got)
	}
	back := leaving()
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: second, Over: []string{first}}}
	if got := owner(back).Owner; got != second {
		t.Errorf("%s no longer leaving: owner %s, want %s to keep the IP (no fail-back)", first, got, second)
	}
}
