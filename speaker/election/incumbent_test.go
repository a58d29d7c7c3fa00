package election

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// withRandomIncumbents names, for some IPs, a node announcing them: usually one
// node per group (as the speakers' claims do), sometimes conflicting nodes or a node
// that is not eligible.
func withRandomIncumbents(rnd *rand.Rand, v View, svcs []Service) View {
	v.Incumbents = map[netip.Addr]Incumbent{}
	names := []string{"ghost"}
	for _, n := range v.Nodes {
		names = append(names, n.Name)
	}
	for _, d := range Elect(View{Members: v.Members, Nodes: v.Nodes, Advertisements: v.Advertisements, IgnoreExcludeLabel: v.IgnoreExcludeLabel}, svcs) {
		if !chance(rnd, 0.7) {
			continue
		}
		if prev, ok := v.Incumbents[d.Key]; ok && !chance(rnd, 0.1) {
			v.Incumbents[d.IP] = prev
			continue
		}
		inc := Incumbent{Node: pick(rnd, names)}
		for _, n := range names {
			if chance(rnd, 0.5) {
				inc.Over = append(inc.Over, n)
			}
		}
		v.Incumbents[d.IP] = inc
	}
	return v
}

func TestIncumbentsMatchReference(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := randomView(rnd), randomServices(rnd)
		v = withRandomIncumbents(rnd, v, svcs)
		got := electAll(v, svcs)
		checkInvariants(t, v, svcs, got)
		ref := reference(v, svcs)
		for _, d := range got {
			if want := ref[d.IP]; !slices.Equal(d.Candidates, want) {
				t.Errorf("%s (incumbent %+v): candidates %v, reference %v", d.IP, v.Incumbents[d.IP], d.Candidates, want)
			}
		}
		// Speakers given the same incumbents agree, whatever the order of the inputs.
		sv, ss := shuffled(rnd, v, svcs)
		if again := electAll(sv, ss); !slices.EqualFunc(again, got, func(a, b Decision) bool { return a.IP == b.IP && a.Owner == b.Owner }) {
			t.Errorf("shuffled inputs elect other owners")
		}
	})
}

// A node that comes back takes nothing from the owner that stood in for it; a node
// the owner does not stand in for (new to the cluster) takes what the hash gives it;
// an incumbent that no longer fits loses its IP as before.
func TestNoFailBack(t *testing.T) {
	nodes := []Node{mkNode("a"), mkNode("b"), mkNode("c")}
	svcs := []Service{mkSvc("ns/s1", ips("10.0.0.1"), inPool("p"), endpoints(readyOn("c")))}
	all := View{Members: []string{"a", "b", "c"}, Nodes: nodes, Advertisements: ads(allPools("all"))}
	order := Order(ip("10.0.0.1"), all.Members)
	first, stand := order[0], order[1]
	without := all
	without.Members = []string{stand, order[2]}
	if got := Elect(without, svcs)[0].Owner; got != stand {
		t.Fatalf("test premise: without %s, %s owns 10.0.0.1, want %s", first, got, stand)
	}

	back := all
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: stand, Over: []string{first}}}
	if got := Elect(back, svcs)[0]; got.Owner != stand || got.Candidates[0] != stand {
		t.Errorf("%s came back: owner %s (candidates %v), want %s to keep it", first, got.Owner, got.Candidates, stand)
	}

	// Standing in for nobody (it took the IP while first was no speaker yet): first,
	// new to the IP, takes it by hash.
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: stand}}
	if got := Elect(back, svcs)[0]; got.Owner != first {
		t.Errorf("incumbent standing in for nobody: owner %s, want the hash's %s", got.Owner, first)
	}

	// The last in the hash's order, standing in for the second only: the first takes it.
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: order[2], Over: []string{stand}}}
	if got := Elect(back, svcs)[0]; got.Owner != first {
		t.Errorf("incumbent %s standing in for %s only: owner %s, want %s", order[2], stand, got.Owner, first)
	}
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: order[2], Over: []string{first, stand}}}
	if got := Elect(back, svcs)[0]; got.Owner != order[2] {
		t.Errorf("incumbent %s standing in for both: owner %s", order[2], got.Owner)
	}

	// An incumbent that is no member: placement by hash.
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: "ghost", Over: []string{first}}}
	if got := Elect(back, svcs)[0]; got.Owner != first {
		t.Errorf("incumbent not a member: owner %s, want the hash's %s", got.Owner, first)
	}

	// Local: the incumbent without a ready endpoint gives way to a node with one.
	local := []Service{mkSvc("ns/s1", ips("10.0.0.1"), inPool("p"), local, endpoints(readyOn(first), terminatingOn(stand)))}
	back.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: stand, Over: []string{first}}}
	if got := Elect(back, local)[0]; got.Owner != first {
		t.Errorf("Local, incumbent %s only terminating: owner %s, want %s (ready endpoint)", stand, got.Owner, first)
	}
}
