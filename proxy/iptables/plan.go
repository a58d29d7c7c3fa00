package iptables

import "herald.dev/herald/proxy/model"

// portPlan is model.PlanPort with the iptables names: which chain each kind of traffic
// goes to and what the filter table does with traffic that has nowhere to go.
type portPlan struct {
	model.Plan

	// internalChain receives ClusterIP traffic: KUBE-SVC-, or KUBE-SVL- with
	// internalTrafficPolicy Local.
	internalChain string
	// externalPolicyChain is where external traffic ends up after KUBE-EXT-: KUBE-SVC-,
	// or KUBE-SVL- with externalTrafficPolicy Local.
	externalPolicyChain string
	// usesFirewallChain: KUBE-FW- exists (LB IPs with loadBalancerSourceRanges, and
	// endpoints to send accepted traffic to).
	usesFirewallChain bool
	// loadBalancerChain is the target of LB IP rules in KUBE-SERVICES.
	loadBalancerChain string

	// Filter-table verdicts for traffic without endpoints: REJECT when the service has
	// no endpoints at all, DROP when only the Local policy has none. Empty when the
	// corresponding traffic has endpoints.
	internalVerdict, internalComment string
	externalVerdict, externalComment string
}

func planPort(p *portInfo, node *nodeRules) portPlan {
	pl := portPlan{
		Plan:                model.PlanPort(p.PortInfo, model.Topology{Node: node.name, Zone: node.zone}),
		internalChain:       p.chains.cluster,
		externalPolicyChain: p.chains.cluster,
		loadBalancerChain:   p.chains.external,
	}
	pl.usesFirewallChain = pl.Endpoints.Any && len(p.LoadBalancerIPs) > 0 && len(p.SourceRanges) > 0
	if p.InternalLocal {
		pl.internalChain = p.chains.local
	}
	if p.ExternalLocal {
		pl.externalPolicyChain = p.chains.local
	}
	if pl.usesFirewallChain {
		pl.loadBalancerChain = p.chains.firewall
	}

	switch {
	case !pl.Endpoints.Any:
		pl.internalVerdict, pl.internalComment = "REJECT", quote(p.Name, " has no endpoints")
		pl.externalVerdict, pl.externalComment = pl.internalVerdict, pl.internalComment
	default:
		if !pl.HasInternal {
			pl.internalVerdict, pl.internalComment = "DROP", quote(p.Name, " has no local endpoints")
		}
		if !pl.HasExternal {
			pl.externalVerdict, pl.externalComment = "DROP", quote(p.Name, " has no local endpoints")
		}
	}
	return pl
}
