package election

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
)

// Random inputs for the property tests: a few nodes in zones, a few advertisements and
// Services over a handful of IPs, so that sharing, dual-stack chains, exclusions and
// every endpoint condition show up often.

var (
	randomNodeNames = []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	randomIPs       = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "fc00::1", "fc00::2", "fc00::3", "::ffff:10.0.0.1"}
	randomPools     = []string{"p1", "p2"}
	randomZones     = []string{"a", "b", "c"}
	tristate        = []*bool{nil, yes, no}
)

func chance(rnd *rand.Rand, p float64) bool { return rnd.Float64() < p }

func pick[T any](rnd *rand.Rand, s []T) T { return s[rnd.IntN(len(s))] }

func randomNode(rnd *rand.Rand, name string) Node {
	n := mkNode(name, label("zone", pick(rnd, randomZones)))
	if chance(rnd, 0.1) {
		excluded(&n)
	}
	n.NetworkUnavailable = chance(rnd, 0.1)
	if chance(rnd, 0.15) {
		n.Leaving = "cordoned"
	}
	return n
}

func randomView(rnd *rand.Rand) View {
	v := View{IgnoreExcludeLabel: chance(rnd, 0.1)}
	for _, name := range randomNodeNames[:rnd.IntN(len(randomNodeNames)+1)] {
		if chance(rnd, 0.9) {
			v.Nodes = append(v.Nodes, randomNode(rnd, name))
		}
		if chance(rnd, 0.8) {
			v.Members = append(v.Members, name)
		}
	}
	if chance(rnd, 0.1) {
		v.Members = append(v.Members, "ghost") // a speaker without Node object
	}
	for i := range rnd.IntN(4) {
		ad := Advertisement{Name: fmt.Sprint("l2-", i), AllPools: chance(rnd, 0.3)}
		for _, p := range randomPools {
			if chance(rnd, 0.5) {
				ad.Pools = append(ad.Pools, p)
			}
		}
		if chance(rnd, 0.4) {
			ad.NodeSelectors = sels("zone in (" + pick(rnd, randomZones) + "," + pick(rnd, randomZones) + ")")
			if chance(rnd, 0.3) {
				ad.NodeSelectors = append(ad.NodeSelectors, sel("kubernetes.io/hostname="+pick(rnd, randomNodeNames)))
			}
		}
		if chance(rnd, 0.3) {
			ad.ServiceSelectors = sels("app=" + pick(rnd, []string{"web", "db"}))
		}
		for _, i := range []string{"eth0", "eth1"} {
			if chance(rnd, 0.3) {
				ad.Interfaces = append(ad.Interfaces, i)
			}
		}
		v.Advertisements = append(v.Advertisements, ad)
	}
	return v
}

func randomServices(rnd *rand.Rand) []Service {
	var out []Service
	for i := range rnd.IntN(12) {
		s := Service{
			Key:    fmt.Sprintf("ns/s%d", i),
			Pool:   pick(rnd, randomPools),
			Labels: map[string]string{"app": pick(rnd, []string{"web", "db", "api"})},
			Local:  chance(rnd, 0.5),
		}
		if chance(rnd, 0.05) {
			s.Pool = "" // an IP outside every pool
		}
		for range 1 + rnd.IntN(2) {
			s.IPs = append(s.IPs, netip.MustParseAddr(pick(rnd, randomIPs)))
		}
		for range rnd.IntN(5) {
			node := pick(rnd, append([]string{"", "new", "ghost", "gone"}, randomNodeNames...))
			s.Endpoints = append(s.Endpoints, Endpoint{Node: node, Ready: pick(rnd, tristate), Serving: pick(rnd, tristate)})
		}
		out = append(out, s)
	}
	return out
}

// shuffled copies the inputs with every slice in a new order.
func shuffled(rnd *rand.Rand, v View, svcs []Service) (View, []Service) {
	shuffle := func(n int, swap func(i, j int)) { rnd.Shuffle(n, swap) }
	v2 := View{
		Members:            slices.Clone(v.Members),
		Nodes:              slices.Clone(v.Nodes),
		Advertisements:     slices.Clone(v.Advertisements),
		IgnoreExcludeLabel: v.IgnoreExcludeLabel,
		Incumbents:         v.Incumbents,
	}
	shuffle(len(v2.Members), func(i, j int) { v2.Members[i], v2.Members[j] = v2.Members[j], v2.Members[i] })
	shuffle(len(v2.Nodes), func(i, j int) { v2.Nodes[i], v2.Nodes[j] = v2.Nodes[j], v2.Nodes[i] })
	for i := range v2.Advertisements {
		ad := &v2.Advertisements[i]
		ad.Pools, ad.Interfaces = slices.Clone(ad.Pools), slices.Clone(ad.Interfaces)
		ad.NodeSelectors, ad.ServiceSelectors = slices.Clone(ad.NodeSelectors), slices.Clone(ad.ServiceSelectors)
		shuffle(len(ad.Pools), func(i, j int) { ad.Pools[i], ad.Pools[j] = ad.Pools[j], ad.Pools[i] })
		shuffle(len(ad.Interfaces), func(i, j int) { ad.Interfaces[i], ad.Interfaces[j] = ad.Interfaces[j], ad.Interfaces[i] })
		shuffle(len(ad.NodeSelectors), func(i, j int) {
			ad.NodeSelectors[i], ad.NodeSelectors[j] = ad.NodeSelectors[j], ad.NodeSelectors[i]
		})
	}
	shuffle(len(v2.Advertisements), func(i, j int) {
		v2.Advertisements[i], v2.Advertisements[j] = v2.Advertisements[j], v2.Advertisements[i]
	})
	s2 := slices.Clone(svcs)
	for i := range s2 {
		s := &s2[i]
		s.IPs, s.Endpoints = slices.Clone(s.IPs), slices.Clone(s.Endpoints)
		shuffle(len(s.IPs), func(i, j int) { s.IPs[i], s.IPs[j] = s.IPs[j], s.IPs[i] })
		shuffle(len(s.Endpoints), func(i, j int) { s.Endpoints[i], s.Endpoints[j] = s.Endpoints[j], s.Endpoints[i] })
	}
	shuffle(len(s2), func(i, j int) { s2[i], s2[j] = s2[j], s2[i] })
	return v2, s2
}
