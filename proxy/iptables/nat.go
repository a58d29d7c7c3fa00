package iptables

import "strconv"

// writeCaptures writes a service port's rules in the shared nat chains: KUBE-SERVICES
// jumps for its ClusterIP, externalIPs and LB IPs, and KUBE-NODEPORTS jumps for its
// NodePort. They are rewritten on every sync, partial or not.
func writeCaptures(out *lines, p *portInfo, pl *portPlan, node *nodeRules) {
	if pl.hasInternal {
		out.rule(chainServices, quote(p.name, " cluster IP"),
			"-m", p.protocol, "-p", p.protocol, "-d", p.clusterIP, "--dport", p.port, "-j", pl.internalChain)
	}
	if !pl.endpoints.any {
		return
	}
	if len(p.externalIPs) > 0 {
		comment := quote(p.name, " external IP")
		for _, ip := range p.externalIPs {
			out.rule(chainServices, comment,
				"-m", p.protocol, "-p", p.protocol, "-d", ip, "--dport", p.port, "-j", p.chains.external)
		}
	}
	if len(p.lbIPs) > 0 {
		comment := quote(p.name, " loadbalancer IP")
		for _, ip := range p.lbIPs {
			out.rule(chainServices, comment,
				"-m", p.protocol, "-p", p.protocol, "-d", ip, "--dport", p.port, "-j", pl.loadBalancerChain)
		}
	}
	// NodePorts are not subject to loadBalancerSourceRanges (kube-proxy keeps it so).
	if p.nodePort != 0 {
		nodePort := strconv.Itoa(p.nodePort)
		if node.localhostNodePorts && node.nfacct {
			// Counts localhost NodePort traffic (a deprecated feature) before accepting it.
			out.rule(chainNodePorts, p.name,
				"-m", p.protocol, "-p", p.protocol, "-d", "127.0.0.0/8", "--dport", nodePort,
				"-m", "nfacct", "--nfacct-name", "localhost_nps_accepted_pkts", "-j", p.chains.external)
		}
		out.rule(chainNodePorts, p.name, "-m", p.protocol, "-p", p.protocol, "--dport", nodePort, "-j", p.chains.external)
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
	if pl.hasInternal {
		writeClusterIPMasquerade(sc.rules, p, pl, node)
	}
	if pl.usesExternalChain {
		sc.declare(p.chains.external)
		writeExternalChain(sc.rules, p, pl, node)
	}
	if pl.usesFirewallChain {
		sc.declare(p.chains.firewall)
		writeFirewallChain(sc.rules, p, node)
	}
	if pl.usesClusterChain {
		sc.declare(p.chains.cluster)
		writeEndpointJumps(sc, p, p.chains.cluster, pl.endpoints.cluster)
	}
	if pl.usesLocalChain {
		sc.declare(p.chains.local)
		writeEndpointJumps(sc, p, p.chains.local, pl.endpoints.local)
	}
	for _, ep := range pl.endpoints.reachable {
		sc.declare(ep.chain)
		writeEndpointChain(sc, p, ep)
	}
}

// writeClusterIPMasquerade masquerades ClusterIP traffic that does not come from a pod
// (it may have been routed here from off-node and could leave again), or all of it with
// --masquerade-all. Without a local-traffic detector there is no rule at all.
func writeClusterIPMasquerade(out *lines, p *portInfo, pl *portPlan, node *nodeRules) {
	comment := quote(p.name, " cluster IP")
	switch {
	case node.masqueradeAll:
		out.rule(pl.internalChain, comment,
			"-m", p.protocol, "-p", p.protocol, "-d", p.clusterIP, "--dport", p.port, "-j", chainMarkMasq)
	case node.ifLocal != "":
		out.rule(pl.internalChain, comment,
			"-m", p.protocol, "-p", p.protocol, "-d", p.clusterIP, "--dport", p.port, node.notLocal, "-j", chainMarkMasq)
	}
}

// writeExternalChain fills KUBE-EXT-. With Cluster policy everything is masqueraded
// (it may cross nodes). With Local policy the client address is kept, except that pods
// and the node itself are sent to all endpoints as if they had gone out to the load
// balancer and back; node traffic is masqueraded since its source would be the VIP.
func writeExternalChain(out *lines, p *portInfo, pl *portPlan, node *nodeRules) {
	chain := p.chains.external
	if !p.externalLocal {
		out.rule(chain, quote("masquerade traffic for ", p.name, " external destinations"), "-j", chainMarkMasq)
	} else {
		if node.ifLocal != "" {
			out.rule(chain, quote("pod traffic for ", p.name, " external destinations"), node.ifLocal, "-j", p.chains.cluster)
		}
		out.rule(chain, quote("masquerade LOCAL traffic for ", p.name, " external destinations"),
			"-m", "addrtype", "--src-type", "LOCAL", "-j", chainMarkMasq)
		out.rule(chain, quote("route LOCAL traffic for ", p.name, " external destinations"),
			"-m", "addrtype", "--src-type", "LOCAL", "-j", p.chains.cluster)
	}
	// Without local endpoints, other external traffic falls through and the filter
	// table drops it.
	if pl.hasExternal {
		out.rule(chain, "", "-j", pl.externalPolicyChain)
	}
}

// writeFirewallChain fills KUBE-FW- from loadBalancerSourceRanges. Traffic reaching the
// end is not DNATed and is dropped by KUBE-PROXY-FIREWALL in the filter table.
func writeFirewallChain(out *lines, p *portInfo, node *nodeRules) {
	chain, comment := p.chains.firewall, quote(p.name, " loadbalancer IP")
	allowFromNode := false
	for _, cidr := range p.sourceRanges {
		out.rule(chain, comment, "-s", cidr.String(), "-j", p.chains.external)
		allowFromNode = allowFromNode || (node.nodeIP.IsValid() && cidr.Contains(node.nodeIP))
	}
	// When the VIP is a local address, the node's own requests to it loop back with the
	// VIP as source; let them through if the node itself is allowed.
	if allowFromNode {
		for _, ip := range p.lbIPs {
			out.rule(chain, comment, "-s", ip, "-j", p.chains.external)
		}
	}
	out.rule(chain, quote("other traffic to ", p.name, " will be dropped by KUBE-PROXY-FIREWALL"))
}

// writeEndpointJumps fills KUBE-SVC- or KUBE-SVL-: with ClientIP affinity, first a
// "recent" check per endpoint; then one random jump per endpoint, endpoint i of n taken
// with probability 1/(n-i), the last unconditionally.
func writeEndpointJumps(sc *serviceChains, p *portInfo, chain string, eps []*endpointInfo) {
	comment := func(ep *endpointInfo) string {
		if sc.bareComments {
			return ""
		}
		return quote(p.name, " -> ", ep.hostPort)
	}
	if p.affinity {
		for _, ep := range eps {
			sc.rules.rule(chain, comment(ep),
				"-m", "recent", "--name", ep.chain, "--rcheck", "--seconds", p.affinityTimeout, "--reap", "-j", ep.chain)
		}
	}
	for i, ep := range eps {
		if i < len(eps)-1 {
			sc.rules.rule(chain, comment(ep),
				"-m", "statistic", "--mode", "random", "--probability", probability(len(eps)-i), "-j", ep.chain)
		} else {
			sc.rules.rule(chain, comment(ep), "-j", ep.chain)
		}
	}
}

// writeEndpointChain fills KUBE-SEP-: masquerade hairpin traffic (an endpoint reaching
// itself through the service), then DNAT, recording the client for affinity.
func writeEndpointChain(sc *serviceChains, p *portInfo, ep *endpointInfo) {
	comment := p.name
	if sc.bareComments {
		comment = ""
	}
	sc.rules.rule(ep.chain, comment, "-s", ep.ip, "-j", chainMarkMasq)
	if p.affinity {
		sc.rules.rule(ep.chain, comment, "-m", "recent", "--name", ep.chain, "--set",
			"-m", p.protocol, "-p", p.protocol, "-j", "DNAT", "--to-destination", ep.hostPort)
	} else {
		sc.rules.rule(ep.chain, comment, "-m", p.protocol, "-p", p.protocol, "-j", "DNAT", "--to-destination", ep.hostPort)
	}
}
