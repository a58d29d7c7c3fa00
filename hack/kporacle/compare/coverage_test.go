//go:build linux

package compare

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// coverage counts what a run of TestOracleCompare exercised: features of kube-proxy's
// payloads (one count per matching line, or per payload) and of the generated input
// (one count per step and object). With the default seeds every one must show up, so a
// change to the generator that stops exercising one fails the test instead of silently
// narrowing it. `go test -v -run TestOracleCompare` prints the counts.
var coverage = &featureCounter{}

// lineFeatures are matched against each line of kube-proxy's payloads.
var lineFeatures = []struct{ name, pattern string }{
	{"out: ClusterIP rule", `cluster IP" -m`},
	{"out: NodePort rule", `^-A KUBE-NODEPORTS -m comment --comment \S+ -m`},
	{"out: LoadBalancer IP rule", `loadbalancer IP" -m`},
	{"out: externalIP rule", `external IP" -m`},
	{"out: TCP", `-p tcp`},
	{"out: UDP", `-p udp`},
	{"out: SCTP", `-p sctp`},
	{"out: unnamed port", `--comment "[a-z0-9]+/svc[0-9]+ cluster IP"`},
	{"out: named port", `--comment "[a-z0-9]+/svc[0-9]+:[a-z0-9]+ cluster IP"`},
	{"out: IPv6 endpoint", `--to-destination \[fd00:180::`},
	{"out: IPv4 endpoint", `--to-destination 10\.180\.`},
	{"out: several endpoints (probability)", `--probability 0\.`},
	{"out: local endpoint chain (KUBE-SVL)", `^:KUBE-SVL-`},
	{"out: ITP Local", `cluster IP" .* -j KUBE-SVL-`},
	{"out: ETP Local pod short-circuit", `"pod traffic for .* external destinations"`},
	{"out: ETP Local to SVL", `^-A KUBE-EXT-\S+ -j KUBE-SVL-`},
	{"out: ETP Cluster masquerade", `"masquerade traffic for .* external destinations"`},
	{"out: no endpoints REJECT", `has no endpoints" .* -j REJECT`},
	{"out: no local endpoints DROP", `has no local endpoints" .* -j DROP`},
	{"out: ClientIP affinity", `-m recent --name KUBE-SEP-\S+ --rcheck --seconds`},
	{"out: affinity timeout not default", `--rcheck --seconds (1|60|86400) `},
	{"out: source ranges (KUBE-FW)", `^-A KUBE-FW-\S+ .* -s \S+ -j KUBE-EXT-`},
	{"out: source range containing the node IP", `^-A KUBE-FW-\S+ .* -s (5\.6\.\S+|2001:db8:1::\S+) -j`},
	{"out: KUBE-PROXY-FIREWALL drop", `^-A KUBE-PROXY-FIREWALL .* -j DROP`},
	{"out: health check node port", `health check node port"`},
	{"out: masquerade-all", `cluster IP" -m \S+ -p \S+ -d \S+ --dport [0-9]+ -j KUBE-MARK-MASQ`},
	{"out: ClusterCIDR detector", `! -s (10\.0\.0\.0/8|fd00:10::/64) -j KUBE-MARK-MASQ`},
	{"out: bridge detector", `! -i cbr0 -j KUBE-MARK-MASQ`},
	{"out: interface prefix detector", `! -i veth\+ -j KUBE-MARK-MASQ`},
	{"out: no detector", `cluster IP" -m \S+ -p \S+ -d \S+ --dport [0-9]+ -j KUBE-SVC-`},
	{"out: random-fully", `MASQUERADE --random-fully`},
	{"out: no random-fully", `MASQUERADE$`},
	{"out: nfacct", `-m nfacct --nfacct-name`},
	{"out: localhost NodePorts", `^-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections"`},
	{"out: localhost NodePort nfacct rule", `-d 127\.0\.0\.0/8 --dport [0-9]+ -m nfacct`},
	{"out: restricted nodeport addresses", `^-A KUBE-SERVICES .*must be the last rule.* -d \S+ -j KUBE-NODEPORTS`},
	{"out: IPv6 NodePort guard", `! -d ::1/128 -j KUBE-NODEPORTS`},
	{"out: stale chain deleted", `^-X KUBE-`},
}

// payloadFeatures are decided per payload.
var payloadFeatures = []struct {
	name string
	has  func(filter, nat string) bool
}{
	{"out: INVALID drop", func(f, _ string) bool { return strings.Contains(f, "--ctstate INVALID") }},
	{"out: no INVALID drop (tcp_be_liberal)", func(f, _ string) bool { return !strings.Contains(f, "--ctstate INVALID") }},
	{"out: masquerade bit 14", func(_, n string) bool { return strings.Contains(n, "--or-mark 0x00004000\n") }},
	{"out: other masquerade bit", func(_, n string) bool { return !strings.Contains(n, "--or-mark 0x00004000\n") }},
}

type featureCounter struct {
	res    []*regexp.Regexp
	counts map[string]int
}

// changeKinds are the first two words of world.mutate's descriptions.
var changeKinds = []string{
	"add endpoint", "remove endpoint", "conditions of", "node of", "add slice", "delete slice",
	"target port", "add service", "delete service", "ports of", "externalTrafficPolicy of",
	"internalTrafficPolicy of", "ClientIP affinity", "affinity timeout", "externalIPs of",
	"load balancer", "loadBalancerSourceRanges of", "type of", "hints on", "duplicate endpoint",
	"re-create service",
}

func (c *featureCounter) reset() {
	c.res = make([]*regexp.Regexp, len(lineFeatures))
	for i, f := range lineFeatures {
		c.res[i] = regexp.MustCompile(f.pattern)
	}
	c.counts = map[string]int{}
	for _, k := range changeKinds {
		c.counts["change: "+k] = 0
	}
}

// recordChange counts one change made by world.mutate.
func (c *featureCounter) recordChange(description string) {
	words := strings.Fields(description)
	if c.counts == nil || len(words) < 2 {
		return
	}
	c.counts["change: "+words[0]+" "+words[1]]++
}

func (c *featureCounter) add(name string, n int) {
	if c.counts != nil {
		c.counts[name] += n
	}
}

// recordPayload counts the features of one sync of kube-proxy.
func (c *featureCounter) recordPayload(filter, nat string, full bool) {
	if c.counts == nil {
		return
	}
	for _, line := range strings.Split(filter+nat, "\n") {
		for i, re := range c.res {
			if re.MatchString(line) {
				c.counts[lineFeatures[i].name]++
			}
		}
	}
	for _, f := range payloadFeatures {
		if f.has(filter, nat) {
			c.counts[f.name]++
		}
	}
	if full {
		c.counts["sync: full"]++
	} else {
		c.counts["sync: partial"]++
	}
}

// recordWorld counts the input features of one step's world.
func (c *featureCounter) recordWorld(w *world) {
	if c.counts == nil {
		return
	}
	count := func(name string, ok bool) {
		if ok {
			c.counts[name]++
		} else if _, seen := c.counts[name]; !seen {
			c.counts[name] = 0
		}
	}
	slicesPer := map[string]int{}
	for _, es := range w.slices {
		slicesPer[key(es.Namespace, es.Labels[discoveryv1.LabelServiceName])+" "+string(es.AddressType)]++
		_, hasSvc := w.services[key(es.Namespace, es.Labels[discoveryv1.LabelServiceName])]
		count("in: slice without its Service", !hasSvc)
		count("in: slice port with a name no Service port has", slices.ContainsFunc(es.Ports, func(p discoveryv1.EndpointPort) bool { return p.Name != nil && *p.Name == "other" }))
		count("in: slice port without a number", slices.ContainsFunc(es.Ports, func(p discoveryv1.EndpointPort) bool { return p.Port == nil }))
		count("in: empty slice", len(es.Endpoints) == 0)
		for _, ep := range es.Endpoints {
			cd := ep.Conditions
			count("in: endpoint ready unset", cd.Ready == nil)
			count("in: endpoint ready", cd.Ready != nil && *cd.Ready)
			count("in: endpoint not ready, serving, terminating", cd.Ready != nil && !*cd.Ready && cd.Serving != nil && *cd.Serving && cd.Terminating != nil && *cd.Terminating)
			count("in: endpoint not ready, not serving, terminating", cd.Ready != nil && !*cd.Ready && cd.Serving != nil && !*cd.Serving && cd.Terminating != nil && *cd.Terminating)
			count("in: endpoint not ready, not terminating", cd.Ready != nil && !*cd.Ready && (cd.Terminating == nil || !*cd.Terminating))
			count("in: endpoint on this node", ep.NodeName != nil && *ep.NodeName == localNode)
			count("in: endpoint on another node", ep.NodeName != nil && *ep.NodeName != localNode)
			count("in: endpoint without node name", ep.NodeName == nil)
			count("in: endpoint with zone hints", ep.Hints != nil && len(ep.Hints.ForZones) > 0)
			count("in: endpoint with node hints", ep.Hints != nil && len(ep.Hints.ForNodes) > 0)
		}
	}
	for _, n := range slicesPer {
		count("in: several slices of one family", n > 1)
	}
	ips := map[string]int{}
	for _, es := range w.slices {
		for _, ep := range es.Endpoints {
			ips[es.Namespace+"/"+es.Labels[discoveryv1.LabelServiceName]+" "+ep.Addresses[0]]++
		}
	}
	for _, n := range ips {
		count("in: endpoint IP in two places", n > 1)
	}
	for _, s := range w.services {
		spec := s.Spec
		count("in: ClusterIP Service", spec.Type == v1.ServiceTypeClusterIP && spec.ClusterIP != v1.ClusterIPNone)
		count("in: headless Service", spec.ClusterIP == v1.ClusterIPNone)
		count("in: ExternalName Service", spec.Type == v1.ServiceTypeExternalName)
		count("in: NodePort Service", spec.Type == v1.ServiceTypeNodePort)
		count("in: LoadBalancer Service", spec.Type == v1.ServiceTypeLoadBalancer)
		count("in: LoadBalancer without NodePorts", spec.Type == v1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts != nil && !*spec.AllocateLoadBalancerNodePorts)
		count("in: dual-stack Service", len(spec.IPFamilies) == 2)
		count("in: IPv6-primary Service", len(spec.IPFamilies) > 0 && spec.IPFamilies[0] == v1.IPv6Protocol)
		count("in: several ports", len(spec.Ports) > 1)
		count("in: externalIPs", len(spec.ExternalIPs) > 0)
		count("in: ETP Local", spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal)
		count("in: ITP Local", spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal)
		count("in: ITP unset", spec.InternalTrafficPolicy == nil)
		count("in: ClientIP affinity", spec.SessionAffinity == v1.ServiceAffinityClientIP)
		count("in: healthCheckNodePort", spec.HealthCheckNodePort != 0)
		count("in: loadBalancerSourceRanges", len(spec.LoadBalancerSourceRanges) > 0)
		for _, ing := range s.Status.LoadBalancer.Ingress {
			count("in: ingress ipMode Proxy", ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy)
			count("in: ingress ipMode VIP", ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeVIP)
			count("in: ingress hostname only", ing.IP == "")
		}
	}
}

// check logs the counts and fails for features never seen.
func (c *featureCounter) check(t *testing.T) {
	t.Helper()
	names := []string{"sync: full", "sync: partial"}
	for _, f := range lineFeatures {
		names = append(names, f.name)
	}
	for _, f := range payloadFeatures {
		names = append(names, f.name)
	}
	var in []string
	for name := range c.counts {
		if strings.HasPrefix(name, "in: ") || strings.HasPrefix(name, "change: ") {
			in = append(in, name)
		}
	}
	slices.Sort(in)
	names = append(names, in...)
	var lines, missing []string
	for _, name := range names {
		lines = append(lines, fmt.Sprintf("%7d  %s", c.counts[name], name))
		if c.counts[name] == 0 {
			missing = append(missing, name)
		}
	}
	t.Logf("coverage (syncs of both families; input counted per step):\n%s", strings.Join(lines, "\n"))
	if len(missing) > 0 {
		t.Errorf("the generated inputs no longer cover: %s", strings.Join(missing, "; "))
	}
}
