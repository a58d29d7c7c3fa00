package election

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// How an Elector tells what changed between two elections: by content, never by
// position or pointer, since callers build their inputs afresh from informer caches
// whose lists come in any order.

// canonicalAds returns the fingerprint of every ad, sorted, and the ads in that order.
// The election does not depend on the order of the ads, but a Service's evaluation
// refers to ads by position.
func canonicalAds(ads []Advertisement) ([]string, []Advertisement) {
	type printed struct {
		print string
		ad    Advertisement
	}
	ps := make([]printed, len(ads))
	for i, ad := range ads {
		ps[i] = printed{adPrint(ad), ad}
	}
	slices.SortStableFunc(ps, func(a, b printed) int { return cmp.Compare(a.print, b.print) })
	prints, out := make([]string, len(ps)), make([]Advertisement, len(ps))
	for i, p := range ps {
		prints[i], out[i] = p.print, p.ad
	}
	return prints, out
}

// adPrint is the content of ad as the election reads it: pools, interfaces and
// selectors as sets. Selectors print with %#v, their full structure (a selector
// holding pointers prints differently every time: slower, never wrong).
func adPrint(ad Advertisement) string {
	sels := func(ss []any) string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = fmt.Sprintf("%#v", s)
		}
		slices.Sort(out)
		return strings.Join(out, "|")
	}
	var nodes, svcs []any
	for _, s := range ad.NodeSelectors {
		nodes = append(nodes, s)
	}
	for _, s := range ad.ServiceSelectors {
		svcs = append(svcs, s)
	}
	set := func(s []string) []string { return sortedSet(slices.Clone(s)) }
	return fmt.Sprintf("%q %t %q %q %q %q", ad.Name, ad.AllPools, set(ad.Pools), set(ad.Interfaces), sels(nodes), sels(svcs))
}

// selection says, per eligible node, which ads select it: what a node contributes to
// every group besides its name.
func selection(c *cluster) map[string]bitset {
	out := make(map[string]bitset, len(c.names))
	for i, n := range c.names {
		// One bit per ad, and a last one for Leaving: either change moves the node in
		// every ranking.
		b := newBitset(len(c.ads) + 1)
		for a := range c.ads {
			if c.ads[a].nodes.has(i) {
				b.set(a)
			}
		}
		if c.leaving[i] {
			b.set(len(c.ads))
		}
		out[n] = b
	}
	return out
}

// diffNodes returns the nodes of before that are gone from after or changed, and the
// positions in c.names (sorted) of the nodes of after that are new or changed.
func diffNodes(before, after map[string]bitset) (gone map[string]bool, joined []int) {
	gone = map[string]bool{}
	for n, b := range before {
		if a, ok := after[n]; !ok || !slices.Equal(a, b) {
			gone[n] = true
		}
	}
	i := 0
	for _, n := range sortedKeys(after) {
		if b, ok := before[n]; !ok || !slices.Equal(after[n], b) {
			joined = append(joined, i)
		}
		i++
	}
	return gone, joined
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// canonicalService is a copy of s the caller cannot change: IPs normalized and sorted,
// endpoints sorted, conditions copied.
func canonicalService(s *Service) Service {
	out := *s
	out.IPs = normalize(s.IPs)
	slices.SortFunc(out.IPs, netip.Addr.Compare)
	out.Labels = maps.Clone(s.Labels)
	out.Endpoints = canonicalEndpoints(s.Endpoints)
	return out
}

func canonicalEndpoints(eps []Endpoint) []Endpoint {
	out := make([]Endpoint, len(eps))
	for i, ep := range eps {
		out[i] = Endpoint{Node: ep.Node, Ready: condition(ep.Ready), Serving: condition(ep.Serving)}
	}
	slices.SortFunc(out, compareEndpoints)
	return out
}

var conditionTrue, conditionFalse = true, false

// condition points at a package-level copy of *b, so a kept endpoint does not alias
// the caller's.
func condition(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &conditionTrue
	}
	return &conditionFalse
}

func conditionRank(b *bool) int {
	switch {
	case b == nil:
		return 0
	case *b:
		return 1
	}
	return 2
}

func compareEndpoints(a, b Endpoint) int {
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(conditionRank(a.Ready), conditionRank(b.Ready)),
		cmp.Compare(conditionRank(a.Serving), conditionRank(b.Serving)))
}

// sameService says whether s has the content of kept, a canonical copy.
func sameService(kept, s *Service) bool {
	if kept.Key != s.Key || kept.Pool != s.Pool || kept.Local != s.Local || !maps.Equal(kept.Labels, s.Labels) ||
		len(kept.Endpoints) != len(s.Endpoints) {
		return false
	}
	inOrder := len(s.IPs) == len(kept.IPs)
	for i := 0; inOrder && i < len(s.IPs); i++ {
		inOrder = s.IPs[i].Unmap() == kept.IPs[i]
	}
	if !inOrder {
		ips := normalize(s.IPs)
		slices.SortFunc(ips, netip.Addr.Compare)
		if !slices.Equal(ips, kept.IPs) {
			return false
		}
	}
	return sameEndpoints(kept.Endpoints, s.Endpoints)
}

// sameEndpoints says whether eps holds the endpoints of kept (sorted) in any order.
// Up to 64 endpoints it finds each in kept by binary search, allocating nothing: the
// comparison runs for every Service at every election.
func sameEndpoints(kept, eps []Endpoint) bool {
	eq := func(a, b Endpoint) bool { return compareEndpoints(a, b) == 0 }
	if slices.EqualFunc(eps, kept, eq) {
		return true
	}
	if len(eps) > 64 {
		return slices.EqualFunc(canonicalEndpoints(eps), kept, eq)
	}
	var used uint64
	for _, ep := range eps {
		i, found := slices.BinarySearchFunc(kept, ep, compareEndpoints)
		for found && i < len(kept) && used&(1<<i) != 0 {
			i++
			found = i < len(kept) && eq(kept[i], ep)
		}
		if !found {
			return false
		}
		used |= 1 << i
	}
	return true
}

func sameIncumbent(a, b Incumbent) bool {
	if a.Node != b.Node {
		return false
	}
	if slices.Equal(a.Over, b.Over) {
		return true
	}
	return slices.Equal(sortedSet(slices.Clone(a.Over)), sortedSet(slices.Clone(b.Over)))
}
