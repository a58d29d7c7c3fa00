package iptables

import (
	"strconv"

	"herald.dev/herald/proxy/model"
)

// writeCaptures writes a service port's rules in the shared nat chains: KUBE-SERVICES
// jumps for its ClusterIP, externalIPs and LB IPs, and KUBE-NODEPORTS jumps for its
// NodePort. They are rewritten on every sync, partial or not.
func writeCaptures(out *lines, p *portInfo, pl *portPlan, node *nodeRules) {
	if pl.HasInternal {
		out.rule(chainServices, quote(p.Name, " cluster IP"),
			"-m", p.Protocol, "-p", p.Protocol, "-d", p.ClusterIP, "--dport", p.Port, "-j", pl.internalChain)
	}
	if !pl.Endpoints.Any {
		return
	}
	if len(p.ExternalIPs) > 0 {
		comment := quote(p.Name, " external IP")
		for _, ip := range p.ExternalIPs {
			out.rule(chainServices, comment,
				"-m", p.Protocol, "-p", p.Protocol, "-d", ip, "--dport", p.Port, "-j", p.chains.external)
		}
	}
	if len(p.LoadBalancerIPs) > 0 {
		comment := quote(p.Name, " loadbalancer IP")
		for _, ip := range p.LoadBalancerIPs {
			out.rule(chainServices, comment,
				"-m", p.Protocol, "-p", p.Protocol, "-d", ip, "--dport", p.Port, "-j", pl.loadBalancerChain)
		}
	}
	// NodePorts are not subject to loadBalancerSourceRanges (kube-proxy keeps it so).
	if p.NodePort != 0 {
		nodePort := strconv.Itoa(p.NodePort)
		if node.localhostNodePorts && node.nfacct {
			// Counts localhost NodePort traffic (a deprecated feature) before accepting it.
			out.rule(chainNodePorts, p.Name,
				"-m", p.Protocol, "-p", p.Protocol, "-d", "127.0.0.0/8", "--dport", nodePort,
				"-m", "nfacct", "--nfacct-name", "localhost_nps_accepted_pkts", "-j", p.chains.external)
		}
		out.rule(chainNodePorts, p.Name, "-m", p.Protocol, "-p", p.Protocol, "--dport", nodePort, "-j", p.chains.external)
	}
}

// serviceChains is where a port's own chains go: the real buffers, or discarding ones in
// a partial sync when the service did not change.
type serviceChains struct {
	decls, rules *lines
	// active collects every per-service chain in use, written or not, for stale-chain
	// detection; written collects those actually declared in the payload.
	active, written *[]string
	// bareComments drops the comments of endpoint rules (large cluster mode).
	bareComments bool
}

func (sc *serviceChains) declare(chain string) {
	sc.decls.chain(chain)
	*sc.active = append(*sc.active, chain)
	if !sc.decls.discard {
		*sc.written = append(*sc.written, chain)
	}
}

// writeServiceChains writes a port's KUBE-EXT-, KUBE-FW-, KUBE-SVC-, KUBE-SVL- and
// KUBE-SEP- chains, in kube-proxy's order. The ClusterIP masquerade rule comes first
// although its chain is declared later; iptables-restore accepts that.
func writeServiceChains(sc *serviceChains, p *portInfo, pl *portPlan, node *nodeRules) {
	if pl.HasInternal {
		writeClusterIPMasquerade(sc.rules, p, pl, node)
	}
	if pl.UsesExternalChain {
		sc.declare(p.chains.external)
		writeExternalChain(sc.rules, p, pl, node)
	}
	if pl.usesFirewallChain {
		sc.declare(p.chains.firewall)
		writeFirewallChain(sc.rules, p, node)
	}
	if pl.UsesClusterChain {
		sc.declare(p.chains.cluster)
		writeEndpointJumps(sc, p, p.chains.cluster, pl.Endpoints.Cluster)
	}
	if pl.UsesLocalChain {
		sc.declare(p.chains.local)
		writeEndpointJumps(sc, p, p.chains.local, pl.Endpoints.Local)
	}
	for _, ep := range pl.Endpoints.Reachable {
		sc.declare(p.endpointChain(ep))
		writeEndpointChain(sc, p, ep)
	}
}

// writeClusterIPMasquerade masquerades ClusterIP traffic that does not come from a pod
// (it may have been routed here from off-node and could leave again), or all of it with
// --masquerade-all. Without a local-traffic detector there is no rule at all.
func writeClusterIPMasquerade(out *lines, p *portInfo, pl *portPlan, node *nodeRules) {
	comment := quote(p.Name, " cluster IP")
	switch {
	case node.masqueradeAll:
		out.rule(pl.internalChain, comment,
			"-m", p.Protocol, "-p", p.Protocol, "-d", p.ClusterIP, "--dport", p.Port, "-j", chainMarkMasq)
	case node.ifLocal != "":
		out.rule(pl.internalChain, comment,
			"-m", p.Protocol, "-p", p.Protocol, "-d", p.ClusterIP, "--dport", p.Port, node.notLocal, "-j", chainMarkMasq)
	}
}

// writeExternalChain fills KUBE-EXT-. With Cluster policy everything is masqueraded
// (it may cross nodes). With Local policy the client address is kept, except that pods
// and the node itself are sent to all endpoints as if they had gone out to the load
// balancer and back; node traffic is masqueraded since its source would be the VIP.
func writeExternalChain(out *lines, p *portInfo, pl *portPlan, node *nodeRules) {
	chain := p.chains.external
	if !p.ExternalLocal {
		out.rule(chain, quote("masquerade traffic for ", p.Name, " external destinations"), "-j", chainMarkMasq)
	} else {
		if node.ifLocal != "" {
			out.rule(chain, quote("pod traffic for ", p.Name, " external destinations"), node.ifLocal, "-j", p.chains.cluster)
		}
		out.rule(chain, quote("masquerade LOCAL traffic for ", p.Name, " external destinations"),
			"-m", "addrtype", "--src-type", "LOCAL", "-j", chainMarkMasq)
		out.rule(chain, quote("route LOCAL traffic for ", p.Name, " external destinations"),
			"-m", "addrtype", "--src-type", "LOCAL", "-j", p.chains.cluster)
	}
	// Without local endpoints, other external traffic falls through and the filter
	// table drops it.
	if pl.HasExternal {
		out.rule(chain, "", "-j", pl.externalPolicyChain)
	}
}

// writeFirewallChain fills KUBE-FW- from loadBalancerSourceRanges. Traffic reaching the
// end is not DNATed and is dropped by KUBE-PROXY-FIREWALL in the filter table.
func writeFirewallChain(out *lines, p *portInfo, node *nodeRules) {
	chain, comment := p.chains.firewall, quote(p.Name, " loadbalancer IP")
	allowFromNode := false
	for _, cidr := range p.SourceRanges {
		out.rule(chain, comment, "-s", cidr.String(), "-j", p.chains.external)
		allowFromNode = allowFromNode || (node.nodeIP.IsValid() && cidr.Contains(node.nodeIP))
	}
	// When the VIP is a local address, the node's own requests to it loop back with the
	// VIP as source; let them through if the node itself is allowed.
	if allowFromNode {
		for _, ip := range p.LoadBalancerIPs {
			out.rule(chain, comment, "-s", ip, "-j", p.chains.external)
		}
	}
	out.rule(chain, quote("other traffic to ", p.Name, " will be dropped by KUBE-PROXY-FIREWALL"))
}

// writeEndpointJumps fills KUBE-SVC- or KUBE-SVL-: with ClientIP affinity, first a
// "recent" check per endpoint; then one random jump per endpoint, endpoint i of n taken
// with probability 1/(n-i), the last unconditionally.
func writeEndpointJumps(sc *serviceChains, p *portInfo, chain string, eps []*model.EndpointInfo) {
	comment := func(ep *model.EndpointInfo) string {
		if sc.bareComments {
			return ""
		}
		return quote(p.Name, " -> ", ep.HostPort)
	}
	if p.Affinity {
		for _, ep := range eps {
			sc.rules.rule(chain, comment(ep),
				"-m", "recent", "--name", p.endpointChain(ep), "--rcheck", "--seconds", p.affinityTimeout, "--reap", "-j", p.endpointChain(ep))
		}
	}
	for i, ep := range eps {
		if i < len(eps)-1 {
			sc.rules.rule(chain, comment(ep),
				"-m", "statistic", "--mode", "random", "--probability", probability(len(eps)-i), "-j", p.endpointChain(ep))
		} else {
			sc.rules.rule(chain, comment(ep), "-j", p.endpointChain(ep))
		}
	}
}

// writeEndpointChain fills KUBE-SEP-: masquerade hairpin traffic (an endpoint reaching
// itself through the service), then DNAT, recording the client for affinity.
func writeEndpointChain(sc *serviceChains, p *portInfo, ep *model.EndpointInfo) {
	comment := p.Name
	if sc.bareComments {
		comment = ""
	}
	sc.rules.rule(p.endpointChain(ep), comment, "-s", ep.IP, "-j", chainMarkMasq)
	if p.Affinity {
		sc.rules.rule(p.endpointChain(ep), comment, "-m", "recent", "--name", p.endpointChain(ep), "--set",
			"-m", p.Protocol, "-p", p.Protocol, "-j", "DNAT", "--to-destination", ep.HostPort)
	} else {
		sc.rules.rule(p.endpointChain(ep), comment, "-m", p.Protocol, "-p", p.Protocol, "-j", "DNAT", "--to-destination", ep.HostPort)
	}
}
