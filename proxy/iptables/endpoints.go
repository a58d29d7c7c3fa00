package iptables

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
)

// endpointInfo is one endpoint of one service port (kube-proxy's endpointInfo).
type endpointInfo struct {
	ip       string // "10.0.0.1", "fd00::1"
	hostPort string // "10.0.0.1:80", "[fd00::1]:80"; identity and sort key
	chain    string // KUBE-SEP-...

	local, ready, serving, terminating bool
	zoneHints, nodeHints               []string
}

// collectEndpoints gathers the endpoints of one service port from the service's slices:
// slice ports match by name and protocol, only addresses of the family count, the same
// "ip:port" seen twice keeps a non-terminating copy (as EndpointSliceCache does when a
// pod IP is reused), and the result is sorted by "ip:port" as a string, so 10.0.0.10:80
// comes before 10.0.0.2:80.
func collectEndpoints(svc *Service, sp *ServicePort, p *portInfo, node *nodeRules, probs *problems) []*endpointInfo {
	var list endpointList
	for _, slice := range svc.EndpointSlices {
		for _, ep := range slice.Ports {
			if ep.Name != sp.Name || ep.Protocol != sp.Protocol {
				continue
			}
			if ep.Port < 1 || ep.Port > 65535 {
				probs.add(p.svc, fmt.Sprintf("endpoint port %q", ep.Name), fmt.Errorf("%w: %d", ErrInvalidPort, ep.Port))
				continue
			}
			port := strconv.Itoa(ep.Port)
			for i := range slice.Endpoints {
				e := &slice.Endpoints[i]
				if !validAddr(e.IP) {
					probs.add(p.svc, fmt.Sprintf("endpoint %q", e.IP), ErrInvalidAddress)
					continue
				}
				ip := e.IP.Unmap()
				if !node.family.contains(ip) {
					continue
				}
				info := &endpointInfo{
					ip:          ip.String(),
					local:       node.name != "" && e.NodeName == node.name,
					ready:       e.Ready,
					serving:     e.Serving,
					terminating: e.Terminating,
					zoneHints:   e.ZoneHints,
					nodeHints:   e.NodeHints,
				}
				info.hostPort = net.JoinHostPort(info.ip, port)
				list.add(info)
			}
		}
	}
	eps := list.eps
	slices.SortFunc(eps, func(a, b *endpointInfo) int { return cmp.Compare(a.hostPort, b.hostPort) })
	for _, e := range eps {
		e.chain = endpointChain(p.name, p.protocol, e.hostPort)
	}
	return eps
}

// endpointList collects one port's endpoints without duplicate "ip:port"s. Most ports
// have a handful of endpoints, which a linear search handles without allocating; past
// that an index keeps large ports linear in time.
type endpointList struct {
	eps   []*endpointInfo
	index map[string]int
}

const endpointIndexAfter = 16

// add appends info unless its "ip:port" is already there; then a non-terminating info
// replaces the earlier one.
func (l *endpointList) add(info *endpointInfo) {
	at := -1
	if l.index != nil {
		if i, ok := l.index[info.hostPort]; ok {
			at = i
		}
	} else {
		for i, e := range l.eps {
			if e.hostPort == info.hostPort {
				at = i
				break
			}
		}
	}
	switch {
	case at >= 0:
		if !info.terminating {
			l.eps[at] = info
		}
		return
	case l.index == nil && len(l.eps) == endpointIndexAfter:
		l.index = make(map[string]int, 2*endpointIndexAfter)
		for i, e := range l.eps {
			l.index[e.hostPort] = i
		}
	}
	if l.index != nil {
		l.index[info.hostPort] = len(l.eps)
	}
	l.eps = append(l.eps, info)
}

// endpointSets is the outcome of kube-proxy's proxy.CategorizeEndpoints for one port.
type endpointSets struct {
	cluster   []*endpointInfo // endpoints for Cluster policy
	local     []*endpointInfo // endpoints for Local policy
	reachable []*endpointInfo // every endpoint some rule on this node jumps to
	any       bool            // some usable endpoint exists anywhere in the cluster
}

// categorize picks the endpoints each traffic policy uses. Ready endpoints win; when a set
// has none, serving-and-terminating endpoints stand in (separately for the cluster-wide
// and the local set). Topology hints narrow the cluster set when every ready endpoint
// has them and one matches this node (or its zone).
func categorize(p *portInfo, node *nodeRules) endpointSets {
	var s endpointSets
	eps := p.endpoints
	if len(eps) == 0 {
		return s
	}
	hinted := ""
	if p.usesClusterEndpoints() {
		hinted = topologyMode(eps, node)
		s.cluster = filter(eps, func(e *endpointInfo) bool { return e.ready && availableForTopology(e, hinted, node) })
		if len(s.cluster) == 0 {
			s.cluster = filter(eps, func(e *endpointInfo) bool { return e.serving && e.terminating })
		}
		s.any = len(s.cluster) > 0
	}
	if !p.usesLocalEndpoints() {
		s.reachable = s.cluster
		return s
	}

	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.ready:
			s.any = true
			localReady = localReady || e.local
		case e.serving && e.terminating:
			s.any = true
			localTerminating = localTerminating || e.local
		}
	}
	usesTerminating := false
	switch {
	case localReady:
		s.local = filter(eps, func(e *endpointInfo) bool { return e.local && e.ready })
	case localTerminating:
		usesTerminating = true
		s.local = filter(eps, func(e *endpointInfo) bool { return e.local && e.serving && e.terminating })
	}
	if !p.usesClusterEndpoints() {
		s.reachable = s.local
		return s
	}
	if hinted == "" && !usesTerminating {
		// Without hints the cluster set holds every ready endpoint, a superset of the
		// ready local ones.
		s.reachable = s.cluster
		return s
	}
	// The sets may each hold endpoints the other lacks. kube-proxy merges them through a
	// map (random order); this merge keeps "ip:port" order.
	s.reachable = mergeSorted(s.cluster, s.local)
	return s
}

const (
	hintsSameNode = "PreferSameNode"
	hintsSameZone = "PreferSameZone"
)

// topologyMode mirrors proxy.topologyModeFromHints with PreferSameTrafficDistribution on
// (GA and locked in v1.36): node hints first, then zone hints, each only when every ready
// endpoint carries hints of that kind and one of them names this node or zone.
func topologyMode(eps []*endpointInfo, node *nodeRules) string {
	anyReady, allNode, forNode, allZone, forZone := false, true, false, true, false
	for _, e := range eps {
		if !e.ready {
			continue
		}
		anyReady = true
		if len(e.nodeHints) == 0 {
			allNode = false
		} else if slices.Contains(e.nodeHints, node.name) {
			forNode = true
		}
		if len(e.zoneHints) == 0 {
			allZone = false
		} else if slices.Contains(e.zoneHints, node.zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return ""
	case allNode && forNode:
		return hintsSameNode
	case allZone && forZone:
		return hintsSameZone
	}
	return ""
}

func availableForTopology(e *endpointInfo, mode string, node *nodeRules) bool {
	switch mode {
	case hintsSameNode:
		return slices.Contains(e.nodeHints, node.name)
	case hintsSameZone:
		return slices.Contains(e.zoneHints, node.zone)
	}
	return true
}

func filter(eps []*endpointInfo, keep func(*endpointInfo) bool) []*endpointInfo {
	out := make([]*endpointInfo, 0, len(eps))
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// mergeSorted unions two "ip:port"-sorted endpoint lists.
func mergeSorted(a, b []*endpointInfo) []*endpointInfo {
	out := make([]*endpointInfo, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0].hostPort < b[0].hostPort):
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0].hostPort < a[0].hostPort:
			out, b = append(out, b[0]), b[1:]
		default: // same endpoint in both
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}
