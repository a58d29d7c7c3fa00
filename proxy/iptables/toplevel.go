package iptables

import "herald.dev/herald/proxy/model"

// The fixed chains and rules every sync rewrites, whatever changed. The jumps into them
// from INPUT, FORWARD, OUTPUT, PREROUTING and POSTROUTING are not part of the restore
// input (kube-proxy adds them with single iptables calls); see JumpRules.

// topLevelChains returns the shared chains of each table, in kube-proxy's declaration
// order. KUBE-FIREWALL only carries a rule with localhost NodePorts.
func topLevelChains(node *nodeRules) (filter, nat []string) {
	filter = []string{chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall}
	if node.localhostNodePorts {
		filter = append(filter, chainKubeletFirewall)
	}
	return filter, []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq}
}

// writeNATHead writes the masquerade machinery: KUBE-MARK-MASQ marks a packet,
// KUBE-POSTROUTING masquerades marked packets and clears the mark so that a packet
// traversing the stack again is not masqueraded twice.
func writeNATHead(out *lines, node *nodeRules) {
	mask := node.mark + "/" + node.mark
	out.rule(chainPostrouting, "", "-m", "mark", "!", "--mark", mask, "-j", "RETURN")
	out.rule(chainPostrouting, "", "-j", "MARK", "--xor-mark", node.mark)
	comment := quote("kubernetes service traffic requiring SNAT")
	if node.randomFully {
		out.rule(chainPostrouting, comment, "-j", "MASQUERADE", "--random-fully")
	} else {
		out.rule(chainPostrouting, comment, "-j", "MASQUERADE")
	}
	out.rule(chainMarkMasq, "", "-j", "MARK", "--or-mark", node.mark)
}

// writeFilterHead writes kube-proxy's copy of kubelet's anti-martian rule. Localhost
// NodePorts need route_localnet=1, which would otherwise let remote hosts reach
// 127.0.0.0/8 services (CVE-2020-8558).
func writeFilterHead(out *lines, node *nodeRules) {
	if !node.localhostNodePorts {
		return
	}
	out.rule(chainKubeletFirewall, quote("block incoming localnet connections"),
		"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
		"-j", "DROP")
}

// writeNodePortsJump ends KUBE-SERVICES with the jump to KUBE-NODEPORTS; it must be the
// last rule so that ClusterIPs, externalIPs and LB IPs that are local addresses match
// their own rules first.
func writeNodePortsJump(out *lines, node *nodeRules) {
	comment := quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
	if node.nodePortIPs == nil {
		// Localhost NodePorts never work for model.IPv6, and for IPv4 only with route_localnet.
		switch {
		case node.family == model.IPv6:
			out.rule(chainServices, comment, "-m", "addrtype", "--dst-type", "LOCAL", "!", "-d", "::1/128", "-j", chainNodePorts)
		case !node.localhostNodePorts:
			out.rule(chainServices, comment, "-m", "addrtype", "--dst-type", "LOCAL", "!", "-d", "127.0.0.0/8", "-j", chainNodePorts)
		default:
			out.rule(chainServices, comment, "-m", "addrtype", "--dst-type", "LOCAL", "-j", chainNodePorts)
		}
		return
	}
	for _, ip := range node.nodePortIPs {
		if ip.IsLoopback() && (node.family == model.IPv6 || !node.localhostNodePorts) {
			continue
		}
		out.rule(chainServices, comment, "-d", ip.String(), "-j", chainNodePorts)
	}
}

// writeForward writes KUBE-FORWARD: drop conntrack-INVALID packets (they would otherwise
// reset connections, https://github.com/kubernetes/kubernetes/issues/74839), accept marked (service) traffic even when the
// FORWARD policy is DROP, and accept the rest of those connections.
func writeForward(out *lines, node *nodeRules) {
	switch {
	case !node.invalidDrop:
	case node.nfacct:
		out.rule(chainForward, "", "-m", "conntrack", "--ctstate", "INVALID",
			"-m", "nfacct", "--nfacct-name", "ct_state_invalid_dropped_pkts", "-j", "DROP")
	default:
		out.rule(chainForward, "", "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	}
	out.rule(chainForward, quote("kubernetes forwarding rules"),
		"-m", "mark", "--mark", node.mark+"/"+node.mark, "-j", "ACCEPT")
	out.rule(chainForward, quote("kubernetes forwarding conntrack rule"),
		"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
}
