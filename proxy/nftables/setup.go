package nftables

import (
	"sigs.k8s.io/knftables"
)

// baseChain is one chain hooked to netfilter.
type baseChain struct {
	name      string
	chainType knftables.BaseChainType
	hook      knftables.BaseChainHook
	priority  knftables.BaseChainPriority
}

// baseChains are kube-proxy's: the pre-DNAT filter chains see the original destination
// for loadBalancerSourceRanges, the filter chains reject and drop, the nat chains DNAT
// and masquerade.
var baseChains = []baseChain{
	{chainFilterPreroutingPreDNAT, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
	{chainFilterOutputPreDNAT, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
	{chainFilterInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
	{chainFilterForward, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
	{chainFilterOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
	{chainNATPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
	{chainNATOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
	{chainNATPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
}

// jump is a rule in a base chain jumping to one of the shared regular chains, in
// kube-proxy's order. Rejecting happens in the input, forward and output hooks because
// kernels before 5.9 allow reject nowhere else.
type jump struct {
	to, from, match string
}

var jumps = []jump{
	{chainNodePortEndpointsCheck, chainFilterInput, "ct state new"},
	{chainServiceEndpointsCheck, chainFilterInput, "ct state new"},
	{chainServiceEndpointsCheck, chainFilterForward, "ct state new"},
	{chainServiceEndpointsCheck, chainFilterOutput, "ct state new"},
	{chainFirewallCheck, chainFilterPreroutingPreDNAT, "ct state new"},
	{chainFirewallCheck, chainFilterOutputPreDNAT, "ct state new"},
	{chainServices, chainNATOutput, ""},
	{chainServices, chainNATPrerouting, ""},
	{chainMasquerading, chainNATPostrouting, ""},
	{chainClusterIPsCheck, chainFilterForward, "ct state new"},
	{chainClusterIPsCheck, chainFilterOutput, "ct state new"},
}

func ptr[T any](v T) *T { return &v }

// writeSetup recreates the table with its shared chains, sets and maps, empty of
// services: deleting and re-adding the table in the same transaction replaces
// everything atomically, so a full sync needs neither listing nor flushing. It returns
// the number of rules written.
func writeSetup(tx *knftables.Transaction, node *nodeRules) (rules int) {
	addRule := func(r *knftables.Rule) { tx.Add(r); rules++ }
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: ptr(tableComment)})

	for _, bc := range baseChains {
		tx.Add(&knftables.Chain{Name: bc.name, Type: ptr(bc.chainType), Hook: ptr(bc.hook), Priority: ptr(bc.priority)})
	}
	created := map[string]bool{}
	for _, j := range jumps {
		if !created[j.to] {
			created[j.to] = true
			tx.Add(&knftables.Chain{Name: j.to})
		}
		addRule(&knftables.Rule{Chain: j.from, Rule: knftables.Concat(j.match, "jump", j.to)})
	}

	addrs := node.addrType
	tx.Add(&knftables.Set{Name: setHairpin, Type: addrs + " . " + addrs + " . inet_proto . inet_service",
		Comment: ptr("service hairpin connections")})
	addRule(&knftables.Rule{Chain: chainMasquerading, Rule: knftables.Concat(
		"mark", "and", node.mark, "!=", "0", "mark", "set", "mark", "xor", node.mark, "masquerade fully-random")})
	addRule(&knftables.Rule{Chain: chainMasquerading, Rule: knftables.Concat(
		"ct status dnat", node.ipX, "saddr", ".", node.ipX, "daddr", ".", "meta l4proto", ".", "th dport",
		"@", setHairpin, "masquerade fully-random")})

	tx.Add(&knftables.Set{Name: setClusterIPs, Type: addrs, Comment: ptr("Active ClusterIPs")})
	addRule(&knftables.Rule{Chain: chainClusterIPsCheck, Rule: knftables.Concat(node.ipX, "daddr", "@", setClusterIPs, "reject"),
		Comment: ptr("Reject traffic to invalid ports of ClusterIPs")})
	if node.serviceCIDRs != "" {
		addRule(&knftables.Rule{Chain: chainClusterIPsCheck, Rule: knftables.Concat(node.ipX, "daddr", "{", node.serviceCIDRs, "}", "drop"),
			Comment: ptr("Drop traffic to unallocated ClusterIPs")})
	}

	if node.nodePortIPs != nil {
		tx.Add(&knftables.Set{Name: setNodePortIPs, Type: addrs, Comment: ptr("IPs that accept NodePort traffic")})
		for _, ip := range node.nodePortIPs {
			tx.Add(&knftables.Element{Set: setNodePortIPs, Key: []string{ip.String()}})
		}
	}

	tx.Add(&knftables.Map{Name: mapNoEndpointServices, Type: addrs + " . inet_proto . inet_service : verdict",
		Comment: ptr("vmap to drop or reject packets to services with no endpoints")})
	tx.Add(&knftables.Map{Name: mapNoEndpointNodePort, Type: "inet_proto . inet_service : verdict",
		Comment: ptr("vmap to drop or reject packets to service nodeports with no endpoints")})
	tx.Add(&knftables.Chain{Name: chainReject, Comment: ptr("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	addRule(&knftables.Rule{Chain: chainReject, Rule: "reject"})
	addRule(&knftables.Rule{Chain: chainServiceEndpointsCheck, Rule: knftables.Concat(
		node.ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", mapNoEndpointServices)})
	if node.nodePortIPs == nil {
		addRule(&knftables.Rule{Chain: chainNodePortEndpointsCheck, Rule: knftables.Concat(
			node.noLocalhost, "meta l4proto . th dport", "vmap", "@", mapNoEndpointNodePort)})
	} else {
		addRule(&knftables.Rule{Chain: chainNodePortEndpointsCheck, Rule: knftables.Concat(
			node.ipX, "daddr", "@", setNodePortIPs, "meta l4proto . th dport", "vmap", "@", mapNoEndpointNodePort)})
	}

	tx.Add(&knftables.Map{Name: mapFirewallIPs, Type: addrs + " . inet_proto . inet_service : verdict",
		Comment: ptr("destinations that are subject to LoadBalancerSourceRanges")})
	addRule(&knftables.Rule{Chain: chainFirewallCheck, Rule: knftables.Concat(
		node.ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", mapFirewallIPs)})

	tx.Add(&knftables.Map{Name: mapServiceIPs, Type: addrs + " . inet_proto . inet_service : verdict",
		Comment: ptr("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	tx.Add(&knftables.Map{Name: mapServiceNodePorts, Type: "inet_proto . inet_service : verdict",
		Comment: ptr("NodePort traffic")})
	switch {
	case node.masqueradeAll:
		addRule(&knftables.Rule{Chain: chainServices, Rule: knftables.Concat(node.ipX, "daddr", "@", setClusterIPs, node.masquerade),
			Comment: ptr("masquerade all clusterIP traffic")})
	case len(node.ifNotLocal) > 0:
		// Traffic from off the cluster routed to a ClusterIP may leave the node again.
		addRule(&knftables.Rule{Chain: chainServices, Rule: knftables.Concat(node.ipX, "daddr", "@", setClusterIPs, node.ifNotLocal, node.masquerade),
			Comment: ptr("masquerade clusterIP traffic from outside cluster")})
	}
	addRule(&knftables.Rule{Chain: chainServices, Rule: knftables.Concat(
		node.ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", mapServiceIPs)})
	if node.nodePortIPs == nil {
		addRule(&knftables.Rule{Chain: chainServices, Rule: knftables.Concat(
			"fib daddr type local", node.noLocalhost, "meta l4proto . th dport", "vmap", "@", mapServiceNodePorts)})
	} else {
		addRule(&knftables.Rule{Chain: chainServices, Rule: knftables.Concat(
			node.ipX, "daddr @nodeport-ips", "meta l4proto . th dport", "vmap", "@", mapServiceNodePorts)})
	}
	return rules
}
