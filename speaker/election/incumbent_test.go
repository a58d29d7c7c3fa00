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
	v.Incumbents = map[netip.Addr]string{}
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
		v.Incumbents[d.IP] = pick(rnd, names)
	}
	return v
}

func TestIncumbentsMatchReference(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := randomView(rnd), randomServices(rnd)
		v = withRandomIncumbents(rnd, v, svcs)
		got := Elect(v, svcs)
		checkInvariants(t, v, svcs, got)
		ref := reference(v, svcs)
		for _, d := range got {
			if want := ref[d.IP]; !slices.Equal(d.Candidates, want) {
				t.Errorf("%s (incumbent %q): candidates %v, reference %v", d.IP, v.Incumbents[d.IP], d.Candidates, want)
			}
		}
		// Speakers given the same incumbents agree, whatever the order of the inputs.
		sv, ss := shuffled(rnd, v, svcs)
		if again := Elect(sv, ss); !slices.EqualFunc(again, got, func(a, b Decision) bool { return a.IP == b.IP && a.Owner == b.Owner }) {
			t.Errorf("shuffled inputs elect other owners")
		}
	})
}

// A node that comes back takes nothing from the owners that stood in for it, and an
// incumbent that no longer fits loses its IP as before.
func TestNoFailBack(t *testing.T) {
	nodes := []Node{mkNode("a"), mkNode("b"), mkNode("c")}
	svcs := []Service{mkSvc("ns/s1", ips("10.0.0.1"), inPool("p"), endpoints(readyOn("c")))}
	all := View{Members: []string{"a", "b", "c"}, Nodes: nodes, Advertisements: ads(allPools("all"))}
	first := Elect(all, svcs)[0].Owner
	rest := slices.DeleteFunc(slices.Clone(all.Members), func(n string) bool { return n == first })
	without := all
	without.Members = rest
	stand := Elect(without, svcs)[0].Owner
	if stand == first {
		t.Fatalf("test premise: %s owns 10.0.0.1 without itself", first)
	}

	back := all
	back.Incumbents = map[netip.Addr]string{ip("10.0.0.1"): stand}
	if got := Elect(back, svcs)[0]; got.Owner != stand || got.Candidates[0] != stand {
		t.Errorf("%s came back: owner %s (candidates %v), want %s to keep it", first, got.Owner, got.Candidates, stand)
	}

	// Conflicting or unknown incumbents: placement by hash.
	back.Incumbents = map[netip.Addr]string{ip("10.0.0.1"): "ghost"}
	if got := Elect(back, svcs)[0]; got.Owner != first {
		t.Errorf("incumbent not a member: owner %s, want the hash's %s", got.Owner, first)
	}

	// Local: the incumbent without a ready endpoint gives way to a node with one.
	local := []Service{mkSvc("ns/s1", ips("10.0.0.1"), inPool("p"), local, endpoints(readyOn(first), terminatingOn(stand)))}
	back.Incumbents = map[netip.Addr]string{ip("10.0.0.1"): stand}
	if got := Elect(back, local)[0]; got.Owner != first {
		t.Errorf("Local, incumbent %s only terminating: owner %s, want %s (ready endpoint)", stand, got.Owner, first)
	}
}
