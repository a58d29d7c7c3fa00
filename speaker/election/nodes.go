package election

import (
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// cluster is the part of a View that does not depend on the Service: the eligible nodes
// and, for each advertisement, which of them it selects. Built once per Elect call.
type cluster struct {
	names   []string       // eligible nodes, sorted by name
	index   map[string]int // name -> position in names
	leaving []bool         // per position in names: Node.Leaving set

	// Live members that are not eligible, sorted, for the no-owner message.
	unknown     []string // no Node object
	unavailable []string // NetworkUnavailable=True
	excluded    []string // ExcludeLabel
	live        int      // distinct live members

	ads []advertisement
	// incumbents is View.Incumbents.
	incumbents map[netip.Addr]Incumbent
}

// advertisement is an Advertisement with its pool list as a set and its node selection
// evaluated over the eligible nodes.
type advertisement struct {
	*Advertisement
	pools map[string]bool // nil when AllPools
	nodes bitset
}

func newCluster(v View) *cluster {
	nodes := nodesByName(v.Nodes)
	c := &cluster{index: map[string]int{}, incumbents: v.Incumbents}
	seen := make(map[string]bool, len(v.Members))
	for _, m := range v.Members {
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		n, ok := nodes[m]
		switch {
		case !ok:
			c.unknown = append(c.unknown, m)
		case n.NetworkUnavailable:
			c.unavailable = append(c.unavailable, m)
		case isExcluded(n) && !v.IgnoreExcludeLabel:
			c.excluded = append(c.excluded, m)
		default:
			c.names = append(c.names, m)
		}
	}
	c.live = len(seen)
	for _, l := range [][]string{c.names, c.unknown, c.unavailable, c.excluded} {
		slices.Sort(l)
	}
	c.leaving = make([]bool, len(c.names))
	for i, n := range c.names {
		c.index[n] = i
		c.leaving[i] = nodes[n].Leaving != ""
	}
	c.ads = make([]advertisement, len(v.Advertisements))
	for i := range v.Advertisements {
		ad := &v.Advertisements[i]
		a := advertisement{Advertisement: ad, nodes: newBitset(len(c.names))}
		if !ad.AllPools {
			a.pools = make(map[string]bool, len(ad.Pools))
			for _, p := range ad.Pools {
				a.pools[p] = true
			}
		}
		for j, n := range c.names {
			if selectsAny(ad.NodeSelectors, nodes[n].Labels) {
				a.nodes.set(j)
			}
		}
		c.ads[i] = a
	}
	return c
}

func (a *advertisement) coversPool(pool string) bool {
	return pool != "" && (a.AllPools || a.pools[pool])
}

// selectsAny: no selector selects everything; otherwise one matching selector is enough.
func selectsAny(sels []labels.Selector, set map[string]string) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s != nil && s.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

func isExcluded(n Node) bool {
	_, ok := n.Labels[ExcludeLabel]
	return ok
}

// nodesByName indexes nodes by name. Should a name repeat, the least eligible entry wins
// so that the outcome does not depend on which entry came first.
func nodesByName(nodes []Node) map[string]Node {
	m := make(map[string]Node, len(nodes))
	for _, n := range nodes {
		if old, ok := m[n.Name]; !ok || lessEligible(n, old) {
			m[n.Name] = n
		}
	}
	return m
}

func lessEligible(a, b Node) bool {
	if a.NetworkUnavailable != b.NetworkUnavailable {
		return a.NetworkUnavailable
	}
	if ea, eb := isExcluded(a), isExcluded(b); ea != eb {
		return ea
	}
	if a.Leaving != b.Leaving {
		return a.Leaving > b.Leaving
	}
	return labels.Set(a.Labels).String() < labels.Set(b.Labels).String()
}
