package iptables

import "strconv"

// writeFilterRules writes the filter-table rules of one service port: REJECT/DROP for
// destinations without endpoints, the loadBalancerSourceRanges DROP, and the health
// check node port ACCEPT. Order is kube-proxy's: ClusterIP, externalIPs, firewall drops
// per LB IP, LB IPs, NodePort, health check port.
func writeFilterRules(out *lines, p *portInfo, pl *portPlan) {
	if !pl.hasInternal {
		out.rule(chainServices, pl.internalComment,
			"-m", p.protocol, "-p", p.protocol, "-d", p.clusterIP, "--dport", p.port, "-j", pl.internalVerdict)
	}
	if !pl.hasExternal {
		for _, ip := range p.externalIPs {
			out.rule(chainExternalServices, pl.externalComment,
				"-m", p.protocol, "-p", p.protocol, "-d", ip, "--dport", p.port, "-j", pl.externalVerdict)
		}
	}
	// Packets to an LB IP that KUBE-FW- did not send on were not DNATed, so they
	// still carry the LB IP when they reach this rule.
	if pl.usesFirewallChain {
		comment := quote(p.name, " traffic not accepted by ", p.chains.firewall)
		for _, ip := range p.lbIPs {
			out.rule(chainProxyFirewall, comment,
				"-m", p.protocol, "-p", p.protocol, "-d", ip, "--dport", p.port, "-j", "DROP")
		}
	}
	if !pl.hasExternal {
		for _, ip := range p.lbIPs {
			out.rule(chainExternalServices, pl.externalComment,
				"-m", p.protocol, "-p", p.protocol, "-d", ip, "--dport", p.port, "-j", pl.externalVerdict)
		}
		if p.nodePort != 0 {
			out.rule(chainExternalServices, pl.externalComment, "-m", "addrtype", "--dst-type", "LOCAL",
				"-m", p.protocol, "-p", p.protocol, "--dport", strconv.Itoa(p.nodePort), "-j", pl.externalVerdict)
		}
	}
	// The health check port is opened whether or not this node has local endpoints:
	// the answer (200 or 503) is what tells the load balancer.
	if p.healthCheckPort != 0 {
		out.rule(chainNodePorts, quote(p.name, " health check node port"),
			"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(p.healthCheckPort), "-j", "ACCEPT")
	}
}
