package iptables

// JumpRule is a rule in a built-in chain that leads into one of the generator's chains.
// kube-proxy does not put these in the restore input (that would replace whole built-in
// chains); it creates the target chain and prepends the rule with separate iptables calls,
// on full syncs only. A runner does the same, e.g. with go-iptables' InsertUnique.
type JumpRule struct {
	Table string // "filter" or "nat"
	Chain string // built-in chain: INPUT, FORWARD, OUTPUT, PREROUTING, POSTROUTING
	// Args is the rule specification after the chain, ending in "-j <target>".
	Args []string
}

// JumpRules returns kube-proxy's jump rules (iptablesJumpChains plus kubelet's
// KUBE-FIREWALL jumps, which kube-proxy also ensures), in the order kube-proxy ensures
// them. They are the same for both families.
func JumpRules() []JumpRule {
	newConn := []string{"-m", "conntrack", "--ctstate", "NEW"}
	jump := func(table, chain string, extra []string, comment, target string) JumpRule {
		args := append([]string(nil), extra...)
		if comment != "" {
			args = append(args, "-m", "comment", "--comment", comment)
		}
		return JumpRule{Table: table, Chain: chain, Args: append(args, "-j", target)}
	}
	const (
		external = "kubernetes externally-visible service portals"
		portals  = "kubernetes service portals"
		firewall = "kubernetes load balancer firewall"
	)
	return []JumpRule{
		jump("filter", "INPUT", newConn, external, chainExternalServices),
		jump("filter", "FORWARD", newConn, external, chainExternalServices),
		jump("filter", "INPUT", nil, "kubernetes health check service ports", chainNodePorts),
		jump("filter", "FORWARD", newConn, portals, chainServices),
		jump("filter", "OUTPUT", newConn, portals, chainServices),
		jump("filter", "FORWARD", nil, "kubernetes forwarding rules", chainForward),
		jump("filter", "INPUT", newConn, firewall, chainProxyFirewall),
		jump("filter", "OUTPUT", newConn, firewall, chainProxyFirewall),
		jump("filter", "FORWARD", newConn, firewall, chainProxyFirewall),
		jump("nat", "OUTPUT", nil, portals, chainServices),
		jump("nat", "PREROUTING", nil, portals, chainServices),
		jump("nat", "POSTROUTING", nil, "kubernetes postrouting rules", chainPostrouting),
		jump("filter", "INPUT", nil, "", chainKubeletFirewall),
		jump("filter", "OUTPUT", nil, "", chainKubeletFirewall),
	}
}
