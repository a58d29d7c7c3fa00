package model

// Plan is what kube-proxy decides for one service port before writing any rule, the
// same in its iptables and nftables modes: which endpoint sets exist, which of the
// port's chains are used, and whether each kind of traffic has somewhere to go.
type Plan struct {
	Endpoints EndpointSets

	// HasInternal: ClusterIP traffic has endpoints (the local ones with
	// internalTrafficPolicy Local). Without, the filter rules answer instead.
	HasInternal bool
	// HasExternal: external traffic has endpoints (the local ones with
	// externalTrafficPolicy Local).
	HasExternal bool
	// UsesExternalChain: the port's external chain exists. It depends on any endpoint
	// existing, not on HasExternal, because pods and the node are short-circuited to
	// all endpoints even when no local endpoint exists.
	UsesExternalChain bool
	// UsesClusterChain and UsesLocalChain: the policy chains holding the Cluster and
	// the Local endpoint sets exist.
	UsesClusterChain bool
	UsesLocalChain   bool
}

// PlanPort decides for p on the node.
func PlanPort(p *PortInfo, node Topology) Plan {
	eps := Categorize(p, node)
	pl := Plan{
		Endpoints:         eps,
		HasInternal:       eps.Any,
		HasExternal:       eps.Any,
		UsesExternalChain: eps.Any && p.ExternallyAccessible(),
		UsesClusterChain:  len(eps.Cluster) > 0 && p.UsesClusterEndpoints(),
		UsesLocalChain:    len(eps.Local) > 0 && p.UsesLocalEndpoints(),
	}
	if p.InternalLocal {
		pl.HasInternal = pl.HasInternal && len(eps.Local) > 0
	}
	if p.ExternalLocal {
		pl.HasExternal = pl.HasExternal && len(eps.Local) > 0
	}
	return pl
}
