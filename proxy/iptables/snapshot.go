package iptables

import (
	"strconv"

	"herald.dev/herald/proxy/model"
)

// Snapshot is everything the generator needs for one IP family. Services may hold
// addresses of both families (a shell can build the list once and share it between an
// IPv4 and an IPv6 Snapshot); Generate keeps those of Family, like kube-proxy's
// per-family service and endpoint trackers.
type Snapshot struct {
	// Family selects which addresses of Services are used and which payload is built.
	Family model.Family
	// Node holds the per-node settings of the proxier.
	Node Node
	// Services lists every Service with its EndpointSlices. Order does not matter;
	// names must be unique.
	Services []model.Service
}

// ChangedServices is model.ChangedServices between two snapshots; a nil prev marks
// every service.
func ChangedServices(prev, next *Snapshot) model.ServiceSet {
	var before []model.Service
	if prev != nil {
		before = prev.Services
	}
	return model.ChangedServices(before, next.Services)
}

// portInfo is a resolved service port with the names of its iptables chains.
type portInfo struct {
	*model.PortInfo
	chains portChains
	// endpointChains[i] is the KUBE-SEP- chain of Endpoints[i].
	endpointChains []string
	// affinityTimeout is AffinitySeconds as rule text.
	affinityTimeout string
}

func newPortInfo(p *model.PortInfo) *portInfo {
	pi := &portInfo{PortInfo: p, chains: newPortChains(p.Name, p.Protocol)}
	pi.endpointChains = make([]string, len(p.Endpoints))
	for i, e := range p.Endpoints {
		pi.endpointChains[i] = endpointChain(p.Name, p.Protocol, e.HostPort)
	}
	if p.Affinity {
		pi.affinityTimeout = strconv.Itoa(p.AffinitySeconds)
	}
	return pi
}

// endpointChain returns the KUBE-SEP- chain of one of the port's endpoints.
func (p *portInfo) endpointChain(e *model.EndpointInfo) string { return p.endpointChains[e.Index] }
