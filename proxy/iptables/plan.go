package iptables

// portPlan is what syncProxyRules decides for one service port before writing anything:
// which endpoint sets exist, which chains are used, and what the filter table does with
// traffic that has nowhere to go.
type portPlan struct {
	endpoints endpointSets

	// internalChain receives ClusterIP traffic: KUBE-SVC-, or KUBE-SVL- with
	// internalTrafficPolicy Local. hasInternal is false when that chain has no
	// endpoints, and the filter table answers instead.
	internalChain string
	hasInternal   bool
	// externalPolicyChain is where external traffic ends up after KUBE-EXT-: KUBE-SVC-,
	// or KUBE-SVL- with externalTrafficPolicy Local. hasExternal as hasInternal.
	externalPolicyChain string
	hasExternal         bool

	// usesExternalChain: KUBE-EXT- exists. It depends on any endpoint existing, not on
	// hasExternal, because pods and the node are short-circuited to all endpoints even
	// when no local endpoint exists.
	usesExternalChain bool
	// usesFirewallChain: KUBE-FW- exists (LB IPs with loadBalancerSourceRanges).
	usesFirewallChain bool
	usesClusterChain  bool
	usesLocalChain    bool
	// loadBalancerChain is the target of LB IP rules in KUBE-SERVICES.
	loadBalancerChain string

	// Filter-table verdicts for traffic without endpoints: REJECT when the service has
	// no endpoints at all, DROP when only the Local policy has none. Empty when the
	// corresponding traffic has endpoints.
	internalVerdict, internalComment string
	externalVerdict, externalComment string
}

func planPort(p *portInfo, node *nodeRules) portPlan {
	eps := categorize(p, node)
	pl := portPlan{
		endpoints:           eps,
		internalChain:       p.chains.cluster,
		hasInternal:         eps.any,
		externalPolicyChain: p.chains.cluster,
		hasExternal:         eps.any,
		usesExternalChain:   eps.any && p.externallyAccessible(),
		usesFirewallChain:   eps.any && len(p.lbIPs) > 0 && len(p.sourceRanges) > 0,
		usesClusterChain:    len(eps.cluster) > 0 && p.usesClusterEndpoints(),
		usesLocalChain:      len(eps.local) > 0 && p.usesLocalEndpoints(),
		loadBalancerChain:   p.chains.external,
	}
	if p.internalLocal {
		pl.internalChain = p.chains.local
		pl.hasInternal = pl.hasInternal && len(eps.local) > 0
	}
	if p.externalLocal {
		pl.externalPolicyChain = p.chains.local
		pl.hasExternal = pl.hasExternal && len(eps.local) > 0
	}
	if pl.usesFirewallChain {
		pl.loadBalancerChain = p.chains.firewall
	}

	switch {
	case !eps.any:
		pl.internalVerdict, pl.internalComment = "REJECT", quote(p.name, " has no endpoints")
		pl.externalVerdict, pl.externalComment = pl.internalVerdict, pl.internalComment
	default:
		if !pl.hasInternal {
			pl.internalVerdict, pl.internalComment = "DROP", quote(p.name, " has no local endpoints")
		}
		if !pl.hasExternal {
			pl.externalVerdict, pl.externalComment = "DROP", quote(p.name, " has no local endpoints")
		}
	}
	return pl
}
