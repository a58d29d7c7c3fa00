package election

import (
	"fmt"
	"slices"
	"strings"
)

// service is a Service of a group with what the election derived from it.
type service struct {
	*Service
	// reason is "" for an active Service; detail then explains nothing.
	reason Reason
	detail string
	ads    []int  // the advertisements covering it (positions in cluster.ads)
	nodes  bitset // eligible nodes selected by one of those ads; ranker scratch space
}

// evaluate decides whether s is active and, if so, which ads cover it and which nodes
// they let announce it. nodes is the caller's storage for the node set.
func (c *cluster) evaluate(s *Service, nodes bitset) service {
	sv := service{Service: s, nodes: nodes}
	if s.Pool == "" {
		sv.reason, sv.detail = ReasonNoPool, fmt.Sprintf("the IPs of Service %s are in no IPAddressPool", s.Key)
		return sv
	}
	var refused []string // ads of the pool whose serviceSelectors refuse s
	for i := range c.ads {
		ad := &c.ads[i]
		if !ad.coversPool(s.Pool) {
			continue
		}
		if !selectsAny(ad.ServiceSelectors, s.Labels) {
			refused = append(refused, ad.Name)
			continue
		}
		sv.ads = append(sv.ads, i)
		nodes.or(ad.nodes)
	}
	switch {
	case len(sv.ads) == 0 && len(refused) == 0:
		sv.reason, sv.detail = ReasonNoAdvertisement, fmt.Sprintf("no L2Advertisement announces pool %s (Service %s)", s.Pool, s.Key)
	case len(sv.ads) == 0:
		slices.Sort(refused)
		sv.reason, sv.detail = ReasonNoAdvertisement, fmt.Sprintf("the serviceSelectors of L2Advertisement %s (pool %s) do not select Service %s",
			strings.Join(slices.Compact(refused), ", "), s.Pool, s.Key)
	case !s.canServeAnywhere():
		sv.reason, sv.detail = ReasonNoEndpoints, fmt.Sprintf("Service %s has no ready or serving endpoint", s.Key)
	}
	return sv
}

func (s *Service) canServeAnywhere() bool {
	for _, ep := range s.Endpoints {
		if endpointFit(ep) != fitNone {
			return true
		}
	}
	return false
}

// fitOn says how well node i fits the active Service sv (see package doc). It reads
// the ads of sv, not sv.nodes, so it holds for an Elector's Services kept across views.
func (c *cluster) fitOn(sv *service, i int) fit {
	if !slices.ContainsFunc(sv.ads, func(a int) bool { return c.ads[a].nodes.has(i) }) {
		return fitNone
	}
	if !sv.Local {
		return fitReady
	}
	best := fitNone
	for _, ep := range sv.Endpoints {
		if ep.Node == c.names[i] {
			best = max(best, endpointFit(ep))
		}
	}
	return best
}
