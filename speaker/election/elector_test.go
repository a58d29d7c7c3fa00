package election

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// An Elector given any sequence of views decides at every step what Elect decides on
// that step's view alone. The views start random (randomView, randomServices, with more
// nodes so that groups have more candidates than an Elector keeps) and change a few
// things at a time, the way a cluster does: members die and join, nodes are relabelled,
// excluded or lose their network, endpoints, incumbents, ads and Services change, and
// the inputs come in another order.

const electorSteps = 30

func TestElectorMatchesElect(t *testing.T) {
	forSeeds(t, func(t *testing.T, rnd *rand.Rand) {
		v, svcs := electorView(rnd), randomServices(rnd)
		var e Elector
		for step := range electorSteps {
			what := "start"
			if step > 0 {
				v, svcs, what = change(rnd, v, svcs)
			}
			want := Elect(v, svcs)
			sv, ss := shuffled(rnd, v, svcs)
			got := e.Elect(sv, ss)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d (%s): Elector and Elect differ\n got %+v\nwant %+v", step, what, got, want)
			}
		}
	})
}

// electorView is randomView with up to six more nodes, all live members.
func electorView(rnd *rand.Rand) View {
	v := randomView(rnd)
	for i := range rnd.IntN(7) {
		n := fmt.Sprint("m", i)
		v.Nodes = append(v.Nodes, randomNode(rnd, n))
		v.Members = append(v.Members, n)
	}
	return v
}

// change returns the inputs with one to three random changes, and what they were.
// It copies what it changes: the inputs given to an Elector before stay as they were.
func change(rnd *rand.Rand, v View, svcs []Service) (View, []Service, string) {
	v.Members, v.Nodes, v.Advertisements = slices.Clone(v.Members), slices.Clone(v.Nodes), slices.Clone(v.Advertisements)
	svcs = slices.Clone(svcs)
	var whats []string
	for range 1 + rnd.IntN(3) {
		var what string
		v, svcs, what = changeOne(rnd, v, svcs)
		whats = append(whats, what)
	}
	return v, svcs, fmt.Sprint(whats)
}

var electorNames = append(slices.Clone(randomNodeNames), "m0", "m1", "m2", "m3", "m4", "m5", "new", "ghost")

func changeOne(rnd *rand.Rand, v View, svcs []Service) (View, []Service, string) {
	switch k := rnd.IntN(14); {
	case k < 3 && len(v.Members) > 0: // the usual failover: a member dies
		gone := pick(rnd, v.Members)
		v.Members = slices.DeleteFunc(v.Members, func(m string) bool { return m == gone })
		return v, svcs, "death of " + gone
	case k < 5: // a member joins, with its Node object if it has none
		n := pick(rnd, electorNames)
		v.Members = append(v.Members, n)
		if !slices.ContainsFunc(v.Nodes, func(x Node) bool { return x.Name == n }) && chance(rnd, 0.8) {
			v.Nodes = append(v.Nodes, randomNode(rnd, n))
		}
		return v, svcs, "join of " + n
	case k < 7 && len(v.Nodes) > 0: // a node relabelled, excluded, unavailable, or its object gone
		i := rnd.IntN(len(v.Nodes))
		if chance(rnd, 0.15) {
			gone := v.Nodes[i].Name
			v.Nodes = slices.Delete(v.Nodes, i, i+1)
			return v, svcs, "node object of " + gone + " deleted"
		}
		v.Nodes[i] = randomNode(rnd, v.Nodes[i].Name)
		return v, svcs, "node " + v.Nodes[i].Name + " changed"
	case k < 9 && len(svcs) > 0: // endpoints move
		i := rnd.IntN(len(svcs))
		s := svcs[i]
		s.Endpoints = nil
		for range rnd.IntN(5) {
			s.Endpoints = append(s.Endpoints, Endpoint{Node: pick(rnd, append([]string{""}, electorNames...)), Ready: pick(rnd, tristate), Serving: pick(rnd, tristate)})
		}
		svcs[i] = s
		return v, svcs, "endpoints of " + s.Key
	case k < 11: // incumbents: random, or the owners standing in for those the hash ranks first
		if chance(rnd, 0.5) {
			v = withRandomIncumbents(rnd, v, svcs)
			return v, svcs, "random incumbents"
		}
		// A claim's Over is every node the hash ranks before the claimant
		// (speaker/claimsync.go); a stale claim names any node, and the walk of the
		// incumbent rule goes deep.
		stale := chance(rnd, 0.5)
		v.Incumbents = map[netip.Addr]Incumbent{}
		for _, d := range Elect(v, svcs) {
			node := d.Owner
			if stale {
				node = pick(rnd, electorNames)
			}
			if node != "" && chance(rnd, 0.8) {
				over := Order(d.Key, electorNames)
				over = over[:slices.Index(over, node)]
				v.Incumbents[d.IP] = Incumbent{Node: node, Over: over}
			}
		}
		return v, svcs, fmt.Sprintf("incumbents (stale %t)", stale)
	case k < 12: // an ad changes
		ads := randomView(rnd).Advertisements
		if len(ads) > 0 {
			v.Advertisements = append(v.Advertisements, ads[0])
		}
		if len(v.Advertisements) > 1 && chance(rnd, 0.5) {
			v.Advertisements = slices.Delete(v.Advertisements, 0, 1)
		}
		return v, svcs, "ads"
	case k < 13: // a Service added or removed (sharing and dual-stack come from the few IPs)
		if len(svcs) > 0 && chance(rnd, 0.5) {
			i := rnd.IntN(len(svcs))
			key := svcs[i].Key
			svcs = slices.Delete(svcs, i, i+1)
			return v, svcs, "removed " + key
		}
		s := randomServices(rnd)
		if len(s) == 0 {
			return v, svcs, "nothing"
		}
		s[0].Key = fmt.Sprint("ns/added", rnd.IntN(1000))
		if slices.ContainsFunc(svcs, func(x Service) bool { return x.Key == s[0].Key }) {
			return v, svcs, "nothing"
		}
		return v, append(svcs, s[0]), "added " + s[0].Key
	default:
		v.IgnoreExcludeLabel = !v.IgnoreExcludeLabel
		return v, svcs, "IgnoreExcludeLabel"
	}
}

// A node joins that a stale claim names and stands in for every node ranked before
// it: deeper in the ranking than an Elector keeps, it still owns the IP.
func TestElectorIncumbentBeyondKept(t *testing.T) {
	var nodes []Node
	for i := range 10 {
		nodes = append(nodes, mkNode(fmt.Sprint("n", i)))
	}
	all := view(ads(allPools("l2")), nodes...)
	svcs := []Service{mkSvc("ns/s", ips("10.0.0.1"), inPool("p"))}
	order := Order(ip("10.0.0.1"), all.Members)
	x := order[keptCandidates+2]
	all.Incumbents = map[netip.Addr]Incumbent{ip("10.0.0.1"): {Node: x, Over: order[:keptCandidates+2]}}
	without := all
	without.Members = slices.DeleteFunc(slices.Clone(all.Members), func(m string) bool { return m == x })

	var e Elector
	for _, v := range []View{all, without, all, without} {
		want := Elect(v, svcs)
		if got := e.Elect(v, svcs); !reflect.DeepEqual(got, want) {
			t.Fatalf("members %v: Elector %+v, Elect %+v", v.Members, got, want)
		}
	}
	if got := Elect(all, svcs)[0].Owner; got != x {
		t.Errorf("test premise: owner %s, want the incumbent %s", got, x)
	}
}

// Duplicate Service keys (a caller bug) are elected as Elect does, and the Elector
// recovers once they are gone.
func TestElectorDuplicateKeys(t *testing.T) {
	v := view(ads(allPools("l2")), mkNode("a"), mkNode("b"))
	dup := []Service{mkSvc("ns/s", ips("10.0.0.1"), inPool("p")), mkSvc("ns/s", ips("10.0.0.2"), inPool("p"))}
	var e Elector
	for _, svcs := range [][]Service{dup, dup[:1], dup, dup[1:]} {
		if got, want := e.Elect(v, svcs), Elect(v, svcs); !reflect.DeepEqual(got, want) {
			t.Fatalf("%d Services: Elector %+v, Elect %+v", len(svcs), got, want)
		}
	}
}

// One death re-ranks only the groups that kept the dead node among their best, and
// few of them from scratch; a join ranks from scratch only groups without candidate.
func TestElectorFailoverIsIncremental(t *testing.T) {
	v, svcs := benchNodes(100, 2_000)
	var e Elector
	e.Elect(v, svcs)
	if !e.last.full {
		t.Fatal("the first election is not full")
	}
	// Groups without a candidate are written again on every membership change: their
	// message names the nodes.
	unowned := 0
	for g := range e.groups {
		if len(g.active) > 0 && len(g.best) == 0 {
			unowned++
		}
	}
	gone := v.Members[17]
	dead := v
	dead.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m string) bool { return m == gone })
	if got, want := e.Elect(dead, svcs), Elect(dead, svcs); !reflect.DeepEqual(got, want) {
		t.Fatal("after a death, Elector and Elect differ")
	}
	// The dead node was among the kept 5 of about 5% of the 2,000 groups; a group
	// needs a full ranking only when fewer than 3 remain, so far fewer.
	if e.last.full || e.last.ranked > unowned+20 {
		t.Errorf("after a death: full %t, %d groups ranked from scratch", e.last.full, e.last.ranked)
	}
	if got, want := e.Elect(v, svcs), Elect(v, svcs); !reflect.DeepEqual(got, want) {
		t.Fatal("after a join, Elector and Elect differ")
	}
	if e.last.full || e.last.ranked > unowned {
		t.Errorf("after a join: full %t, %d groups ranked from scratch, %d without candidate", e.last.full, e.last.ranked, unowned)
	}
}

// sameEndpoints agrees with comparing sorted copies, short lists and long.
func TestSameEndpoints(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var eps []Endpoint
		for range rnd.IntN(80) {
			eps = append(eps, Endpoint{Node: pick(rnd, []string{"", "a", "b"}), Ready: pick(rnd, tristate), Serving: pick(rnd, tristate)})
		}
		kept := canonicalEndpoints(eps)
		other := slices.Clone(eps)
		rnd.Shuffle(len(other), func(i, j int) { other[i], other[j] = other[j], other[i] })
		if len(other) > 0 && chance(rnd, 0.5) {
			other[rnd.IntN(len(other))] = Endpoint{Node: pick(rnd, []string{"", "a", "b"}), Ready: pick(rnd, tristate), Serving: pick(rnd, tristate)}
		}
		want := slices.EqualFunc(canonicalEndpoints(other), kept, func(a, b Endpoint) bool { return compareEndpoints(a, b) == 0 })
		if got := sameEndpoints(kept, other); got != want {
			t.Fatalf("sameEndpoints(%v, %v) = %t, want %t", kept, other, got, want)
		}
	}
}
