package nftables

import (
	"strconv"
	"strings"
	"time"

	"herald.dev/herald/proxy/model"
	"sigs.k8s.io/knftables"
)

// chain is one per-service chain and its rules, in order.
type chain struct {
	name  string
	rules []rule
}

// rule is one rule's text and its comment ("" for none).
type rule struct {
	text, comment string
}

// element is one element of a shared set or map; value is nil for sets.
type element struct {
	container string
	key       []string
	value     []string
	comment   string
}

// affinitySet is one endpoint's ClientIP affinity set.
type affinitySet struct {
	name    string
	timeout time.Duration
}

// serviceObjects is everything one Service owns in the table: its chains, its
// affinity sets and its elements in the shared sets and maps.
type serviceObjects struct {
	chains   []chain
	sets     []affinitySet
	elements []element
}

// portNames are the names of one service port's chains.
type portNames struct {
	cluster, local, external, firewall string
}

func newPortNames(p *model.PortInfo) portNames {
	base := portNameBase(p.Service.Namespace, p.Service.Name, p.Protocol, p.PortName)
	return portNames{
		cluster:  prefixClusterPolicy + base,
		local:    prefixLocalPolicy + base,
		external: prefixExternal + base,
		firewall: prefixFirewall + base,
	}
}

// endpointNames returns the chain and the affinity set of one endpoint.
func endpointNames(p *model.PortInfo, e *model.EndpointInfo) (chainName, setName string) {
	base := endpointNameBase(p.Service.Namespace, p.Service.Name, p.Protocol, p.PortName, e.HostPort)
	return prefixEndpoint + base, prefixAffinity + base
}

// addPort adds one service port's chains, sets and elements to objs, following the
// order of kube-proxy's syncProxyRules.
func addPort(objs *serviceObjects, p *model.PortInfo, node *nodeRules) {
	pl := model.PlanPort(p, node.topology)
	names := newPortNames(p)
	comment := p.Name

	// Local endpoints take part in hairpin masquerading (a pod reaching itself).
	for _, e := range pl.Endpoints.Reachable {
		if e.Local {
			objs.elements = append(objs.elements, element{container: setHairpin,
				key: []string{e.IP, e.IP, p.Protocol, strconv.Itoa(e.Port)}})
		}
	}

	internalChain, externalPolicyChain := names.cluster, names.cluster
	if p.InternalLocal {
		internalChain = names.local
	}
	if p.ExternalLocal {
		externalPolicyChain = names.local
	}
	var internalVerdict, externalVerdict string
	switch {
	case !pl.Endpoints.Any:
		internalVerdict, externalVerdict = "goto "+chainReject, "goto "+chainReject
	default:
		if !pl.HasInternal {
			internalVerdict = "drop"
		}
		if !pl.HasExternal {
			externalVerdict = "drop"
		}
	}

	objs.elements = append(objs.elements, element{container: setClusterIPs, key: []string{p.ClusterIP}})
	if pl.HasInternal {
		objs.elements = append(objs.elements, element{container: mapServiceIPs,
			key: []string{p.ClusterIP, p.Protocol, p.Port}, value: []string{"goto " + internalChain}})
	} else {
		objs.elements = append(objs.elements, element{container: mapNoEndpointServices,
			key: []string{p.ClusterIP, p.Protocol, p.Port}, value: []string{internalVerdict}, comment: comment})
	}
	for _, ip := range p.ExternalIPs {
		if pl.Endpoints.Any {
			objs.elements = append(objs.elements, element{container: mapServiceIPs,
				key: []string{ip, p.Protocol, p.Port}, value: []string{"goto " + names.external}})
		}
		if !pl.HasExternal {
			objs.elements = append(objs.elements, element{container: mapNoEndpointServices,
				key: []string{ip, p.Protocol, p.Port}, value: []string{externalVerdict}, comment: comment})
		}
	}
	// Unlike the iptables mode, the firewall applies whether or not there are endpoints.
	usesFirewall := len(p.LoadBalancerIPs) > 0 && len(p.SourceRanges) > 0
	for _, ip := range p.LoadBalancerIPs {
		if pl.Endpoints.Any {
			objs.elements = append(objs.elements, element{container: mapServiceIPs,
				key: []string{ip, p.Protocol, p.Port}, value: []string{"goto " + names.external}})
		}
		if usesFirewall {
			objs.elements = append(objs.elements, element{container: mapFirewallIPs,
				key: []string{ip, p.Protocol, p.Port}, value: []string{"goto " + names.firewall}})
		}
	}
	if !pl.HasExternal {
		for _, ip := range p.LoadBalancerIPs {
			objs.elements = append(objs.elements, element{container: mapNoEndpointServices,
				key: []string{ip, p.Protocol, p.Port}, value: []string{externalVerdict}, comment: comment})
		}
	}
	if p.NodePort != 0 {
		nodePort := strconv.Itoa(p.NodePort)
		// NodePorts are not subject to loadBalancerSourceRanges, as in kube-proxy.
		if pl.Endpoints.Any {
			objs.elements = append(objs.elements, element{container: mapServiceNodePorts,
				key: []string{p.Protocol, nodePort}, value: []string{"goto " + names.external}})
		}
		if !pl.HasExternal {
			objs.elements = append(objs.elements, element{container: mapNoEndpointNodePort,
				key: []string{p.Protocol, nodePort}, value: []string{externalVerdict}, comment: comment})
		}
	}

	if pl.UsesExternalChain {
		objs.chains = append(objs.chains, externalChain(p, &pl, names, externalPolicyChain, node))
	}
	if usesFirewall {
		objs.chains = append(objs.chains, firewallChain(p, names, node))
	}
	if p.Affinity {
		for _, e := range pl.Endpoints.Reachable {
			_, set := endpointNames(p, e)
			objs.sets = append(objs.sets, affinitySet{name: set, timeout: time.Duration(p.AffinitySeconds) * time.Second})
		}
	}
	if pl.UsesClusterChain {
		objs.chains = append(objs.chains, policyChain(p, names.cluster, pl.Endpoints.Cluster, node))
	}
	if pl.UsesLocalChain {
		objs.chains = append(objs.chains, policyChain(p, names.local, pl.Endpoints.Local, node))
	}
	if p.Affinity {
		for _, e := range pl.Endpoints.Reachable {
			c, set := endpointNames(p, e)
			objs.chains = append(objs.chains, chain{name: c, rules: []rule{
				{text: knftables.Concat("update", "@", set, "{", node.ipX, "saddr", "}")},
				{text: knftables.Concat("meta l4proto", p.Protocol, "dnat to", e.HostPort)},
			}})
		}
	}
}

// externalChain is where NodePort, externalIP and LB traffic goes. With Cluster policy
// it is masqueraded (it may cross nodes); with Local policy the client address is kept,
// except for pods and the node itself, which go to every endpoint as if they had gone
// out to the load balancer and back (the node masqueraded, its source being the VIP).
func externalChain(p *model.PortInfo, pl *model.Plan, names portNames, policyChain string, node *nodeRules) chain {
	c := chain{name: names.external}
	if !p.ExternalLocal {
		c.rules = append(c.rules, rule{node.masquerade, "masquerade"})
	} else {
		if len(node.ifLocal) > 0 {
			c.rules = append(c.rules, rule{knftables.Concat(node.ifLocal, "goto", names.cluster), "short-circuit pod traffic"})
		}
		c.rules = append(c.rules,
			rule{knftables.Concat("fib", "saddr", "type", "local", node.masquerade), "masquerade local traffic"},
			rule{knftables.Concat("fib", "saddr", "type", "local", "goto", names.cluster), "short-circuit local traffic"})
	}
	if pl.HasExternal {
		c.rules = append(c.rules, rule{text: knftables.Concat("goto", policyChain)})
	}
	return c
}

// firewallChain drops LB traffic from outside loadBalancerSourceRanges. When the node
// itself is inside them, the VIPs are allowed as sources too: the node's own requests
// to a local VIP loop back with the VIP as source.
func firewallChain(p *model.PortInfo, names portNames, node *nodeRules) chain {
	var sources []string
	allowFromNode := false
	for _, cidr := range p.SourceRanges {
		if len(sources) > 0 {
			sources = append(sources, ",")
		}
		sources = append(sources, cidr.String())
		allowFromNode = allowFromNode || (node.nodeIP.IsValid() && cidr.Contains(node.nodeIP))
	}
	if allowFromNode {
		for _, ip := range p.LoadBalancerIPs {
			sources = append(sources, ",", ip)
		}
	}
	return chain{name: names.firewall, rules: []rule{
		{text: knftables.Concat(node.ipX, "saddr", "!=", "{", sources, "}", "drop")},
	}}
}

// policyChain picks an endpoint at random. kube-proxy writes one rule with a numgen
// map ({ 0 : ep0, 1 : ep1, ... }), an anonymous set in the kernel; the kernel names
// each new anonymous set by scanning every set of the table, so a table of 10,000
// Services takes over a minute to load (measured: BenchmarkKubeProxyNFTables). herald
// writes the same choice as a cascade without sets, as kube-proxy's iptables mode does:
// endpoint i of n is taken with probability 1/(n-i), the last one always, which is
// uniform. With ClientIP affinity the endpoint the client is known to comes first, and
// the cascade jumps to the endpoint chains, which record the client.
func policyChain(p *model.PortInfo, name string, eps []*model.EndpointInfo, node *nodeRules) chain {
	c := chain{name: name}
	if p.Affinity {
		for _, e := range eps {
			epChain, set := endpointNames(p, e)
			c.rules = append(c.rules, rule{text: knftables.Concat(node.ipX, "saddr", "@", set, "goto", epChain)})
		}
	}
	for i, e := range eps {
		var pick []string
		if i < len(eps)-1 {
			pick = []string{"numgen random mod", strconv.Itoa(len(eps) - i), "0"}
		}
		if p.Affinity {
			epChain, _ := endpointNames(p, e)
			c.rules = append(c.rules, rule{text: knftables.Concat(pick, "goto", epChain)})
		} else {
			c.rules = append(c.rules, rule{text: knftables.Concat(pick, "meta l4proto", p.Protocol, "dnat to", e.HostPort)})
		}
	}
	return c
}

// key joins an element key or value the way nft prints it.
func key(parts []string) string { return strings.Join(parts, " . ") }
