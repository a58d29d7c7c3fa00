package model

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
)

// EndpointInfo is one endpoint of one service port (kube-proxy's endpointInfo).
type EndpointInfo struct {
	IP       string // "10.0.0.1", "fd00::1"
	Port     int    // the target port
	HostPort string // "10.0.0.1:80", "[fd00::1]:80"; identity and sort key
	// Index is the endpoint's position in its PortInfo.Endpoints, for rule generators
	// that keep per-endpoint names beside it.
	Index int

	Local, Ready, Serving, Terminating bool
	ZoneHints, NodeHints               []string
}

// collectEndpoints gathers the endpoints of one service port from the service's slices:
// slice ports match by name and protocol, only addresses of the family count, the same
// "ip:port" seen twice keeps a non-terminating copy (as EndpointSliceCache does when a
// pod IP is reused), and the result is sorted by "ip:port" as a string, so 10.0.0.10:80
// comes before 10.0.0.2:80.
func collectEndpoints(svc *Service, sp *ServicePort, p *PortInfo, family Family, nodeName string, probs *problems) []*EndpointInfo {
	var list endpointList
	for _, slice := range svc.EndpointSlices {
		for _, ep := range slice.Ports {
			if ep.Name != sp.Name || ep.Protocol != sp.Protocol {
				continue
			}
			if ep.Port < 1 || ep.Port > 65535 {
				probs.add(p.Service, fmt.Sprintf("endpoint port %q", ep.Name), fmt.Errorf("%w: %d", ErrInvalidPort, ep.Port))
				continue
			}
			for i := range slice.Endpoints {
				e := &slice.Endpoints[i]
				if !validAddr(e.IP) {
					probs.add(p.Service, fmt.Sprintf("endpoint %q", e.IP), ErrInvalidAddress)
					continue
				}
				ip := e.IP.Unmap()
				if !family.Contains(ip) {
					continue
				}
				info := &EndpointInfo{
					IP:          ip.String(),
					Port:        ep.Port,
					Local:       nodeName != "" && e.NodeName == nodeName,
					Ready:       e.Ready,
					Serving:     e.Serving,
					Terminating: e.Terminating,
					ZoneHints:   e.ZoneHints,
					NodeHints:   e.NodeHints,
				}
				info.HostPort = net.JoinHostPort(info.IP, strconv.Itoa(ep.Port))
				list.add(info)
			}
		}
	}
	eps := list.eps
	slices.SortFunc(eps, func(a, b *EndpointInfo) int { return cmp.Compare(a.HostPort, b.HostPort) })
	for i, e := range eps {
		e.Index = i
	}
	return eps
}

// endpointList collects one port's endpoints without duplicate "ip:port"s. Most ports
// have a handful of endpoints, which a linear search handles without allocating; past
// that an index keeps large ports linear in time.
type endpointList struct {
	eps   []*EndpointInfo
	index map[string]int
}

const endpointIndexAfter = 16

// add appends info unless its "ip:port" is already there; then a non-terminating info
// replaces the earlier one.
func (l *endpointList) add(info *EndpointInfo) {
	at := -1
	if l.index != nil {
		if i, ok := l.index[info.HostPort]; ok {
			at = i
		}
	} else {
		for i, e := range l.eps {
			if e.HostPort == info.HostPort {
				at = i
				break
			}
		}
	}
	switch {
	case at >= 0:
		if !info.Terminating {
			l.eps[at] = info
		}
		return
	case l.index == nil && len(l.eps) == endpointIndexAfter:
		l.index = make(map[string]int, 2*endpointIndexAfter)
		for i, e := range l.eps {
			l.index[e.HostPort] = i
		}
	}
	if l.index != nil {
		l.index[info.HostPort] = len(l.eps)
	}
	l.eps = append(l.eps, info)
}

// EndpointSets is the outcome of kube-proxy's proxy.CategorizeEndpoints for one port.
type EndpointSets struct {
	Cluster   []*EndpointInfo // endpoints for Cluster policy
	Local     []*EndpointInfo // endpoints for Local policy
	Reachable []*EndpointInfo // every endpoint some rule on this node jumps to
	Any       bool            // some usable endpoint exists anywhere in the cluster
}

// Topology is where the node stands, for topology hints.
type Topology struct {
	Node string // the node name
	Zone string // its topology.kubernetes.io/zone label
}

// Categorize picks the endpoints each traffic policy uses. Ready endpoints win; when a set
// has none, serving-and-terminating endpoints stand in (separately for the cluster-wide
// and the local set). Topology hints narrow the cluster set when every ready endpoint
// has them and one matches this node (or its zone).
func Categorize(p *PortInfo, node Topology) EndpointSets {
	var s EndpointSets
	eps := p.Endpoints
	if len(eps) == 0 {
		return s
	}
	hinted := ""
	if p.UsesClusterEndpoints() {
		hinted = topologyMode(eps, node)
		s.Cluster = filter(eps, func(e *EndpointInfo) bool { return e.Ready && availableForTopology(e, hinted, node) })
		if len(s.Cluster) == 0 {
			s.Cluster = filter(eps, func(e *EndpointInfo) bool { return e.Serving && e.Terminating })
		}
		s.Any = len(s.Cluster) > 0
	}
	if !p.UsesLocalEndpoints() {
		s.Reachable = s.Cluster
		return s
	}

	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.Ready:
			s.Any = true
			localReady = localReady || e.Local
		case e.Serving && e.Terminating:
			s.Any = true
			localTerminating = localTerminating || e.Local
		}
	}
	usesTerminating := false
	switch {
	case localReady:
		s.Local = filter(eps, func(e *EndpointInfo) bool { return e.Local && e.Ready })
	case localTerminating:
		usesTerminating = true
		s.Local = filter(eps, func(e *EndpointInfo) bool { return e.Local && e.Serving && e.Terminating })
	}
	if !p.UsesClusterEndpoints() {
		s.Reachable = s.Local
		return s
	}
	if hinted == "" && !usesTerminating {
		// Without hints the cluster set holds every ready endpoint, a superset of the
		// ready local ones.
		s.Reachable = s.Cluster
		return s
	}
	// The sets may each hold endpoints the other lacks. kube-proxy merges them through a
	// map (random order); this merge keeps "ip:port" order.
	s.Reachable = mergeSorted(s.Cluster, s.Local)
	return s
}

const (
	hintsSameNode = "PreferSameNode"
	hintsSameZone = "PreferSameZone"
)

// topologyMode mirrors proxy.topologyModeFromHints with PreferSameTrafficDistribution on
// (GA and locked in v1.36): node hints first, then zone hints, each only when every ready
// endpoint carries hints of that kind and one of them names this node or zone.
func topologyMode(eps []*EndpointInfo, node Topology) string {
	anyReady, allNode, forNode, allZone, forZone := false, true, false, true, false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		anyReady = true
		if len(e.NodeHints) == 0 {
			allNode = false
		} else if slices.Contains(e.NodeHints, node.Node) {
			forNode = true
		}
		if len(e.ZoneHints) == 0 {
			allZone = false
		} else if slices.Contains(e.ZoneHints, node.Zone) {
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

func availableForTopology(e *EndpointInfo, mode string, node Topology) bool {
	switch mode {
	case hintsSameNode:
		return slices.Contains(e.NodeHints, node.Node)
	case hintsSameZone:
		return slices.Contains(e.ZoneHints, node.Zone)
	}
	return true
}

func filter(eps []*EndpointInfo, keep func(*EndpointInfo) bool) []*EndpointInfo {
	out := make([]*EndpointInfo, 0, len(eps))
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// mergeSorted unions two "ip:port"-sorted endpoint lists.
func mergeSorted(a, b []*EndpointInfo) []*EndpointInfo {
	out := make([]*EndpointInfo, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0].HostPort < b[0].HostPort):
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0].HostPort < a[0].HostPort:
			out, b = append(out, b[0]), b[1:]
		default: // same endpoint in both
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}
