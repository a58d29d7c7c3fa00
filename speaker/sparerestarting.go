package speaker

import (
	"net/netip"
	"slices"

	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
)

// spareRestarting keeps a restarting node to the IPs it claims. Its peers count it
// among the members while they keep its IPs for it, so that it keeps them; but an IP
// it did not announce (a new Service, or the IP of a node that died meanwhile) would
// stay unannounced until it is back, seconds later. Such IPs are elected again
// without any restarting node, among the Services that have them, and go to the best
// live candidate; the restarting node, back, does not take them from it (no
// fail-back). An IP that no live node can take stays with the restarting node. Pure:
// every peer keeping the same nodes decides the same.
func spareRestarting(v election.View, services []election.Service, decisions []election.Decision, restarting map[string]claims.Set) []election.Decision {
	if len(restarting) == 0 {
		return decisions
	}
	var affected []int
	keys := map[string]bool{}
	for i, d := range decisions {
		claims, isRestarting := restarting[d.Owner]
		if _, claimed := claims[d.IP]; !isRestarting || claimed {
			continue
		}
		affected = append(affected, i)
		for _, k := range d.Services {
			keys[k] = true
		}
	}
	if len(affected) == 0 {
		return decisions
	}
	var subset []election.Service
	for _, s := range services {
		if keys[s.Key] {
			subset = append(subset, s)
		}
	}
	live := v
	live.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m string) bool { _, r := restarting[m]; return r })
	again := map[netip.Addr]election.Decision{}
	for _, d := range election.Elect(live, subset) {
		again[d.IP] = d
	}
	// The Elector keeps the slice it returned: change a copy.
	out := slices.Clone(decisions)
	for _, i := range affected {
		if d, ok := again[out[i].IP]; ok && d.Owner != "" {
			out[i] = d
		}
	}
	return out
}
