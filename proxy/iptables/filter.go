package iptables

import "strconv"

// writeFilterRules writes the filter-table rules of one service port: REJECT/DROP for
// destinations without endpoints, the loadBalancerSourceRanges DROP, and the health
// check node port ACCEPT. Order is kube-proxy's: ClusterIP, externalIPs, firewall drops
// per LB IP, LB IPs, NodePort, health check port.
func writeFilterRules(out *lines, p *portInfo, pl *portPlan) {
	if !pl.HasInternal {
		out.rule(chainServices, pl.internalComment,
			"-m", p.Protocol, "-p", p.Protocol, "-d", p.ClusterIP, "--dport", p.Port, "-j", pl.internalVerdict)
	}
	if !pl.HasExternal {
		for _, ip := range p.ExternalIPs {
			out.rule(chainExternalServices, pl.externalComment,
				"-m", p.Protocol, "-p", p.Protocol, "-d", ip, "--dport", p.Port, "-j", pl.externalVerdict)
		}
	}
	// Packets to an LB IP that KUBE-FW- did not send on were not DNATed, so they
	// still carry the LB IP when they reach this rule.
	if pl.usesFirewallChain {
		comment := quote(p.Name, " traffic not accepted by ", p.chains.firewall)
		for _, ip := range p.LoadBalancerIPs {
			out.rule(chainProxyFirewall, comment,
				"-m", p.Protocol, "-p", p.Protocol, "-d", ip, "--dport", p.Port, "-j", "DROP")
		}
	}
	if !pl.HasExternal {
		for _, ip := range p.LoadBalancerIPs {
			out.rule(chainExternalServices, pl.externalComment,
				"-m", p.Protocol, "-p", p.Protocol, "-d", ip, "--dport", p.Port, "-j", pl.externalVerdict)
		}
		if p.NodePort != 0 {
			out.rule(chainExternalServices, pl.externalComment, "-m", "addrtype", "--dst-type", "LOCAL",
				"-m", p.Protocol, "-p", p.Protocol, "--dport", strconv.Itoa(p.NodePort), "-j", pl.externalVerdict)
		}
	}
	// The health check port is opened whether or not this node has local endpoints:
	// the answer (200 or 503) is what tells the load balancer.
	if p.HealthCheckNodePort != 0 {
		out.rule(chainNodePorts, quote(p.Name, " health check node port"),
			"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(p.HealthCheckNodePort), "-j", "ACCEPT")
	}
}
