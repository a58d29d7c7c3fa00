package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/testkit"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestProxierSyncs runs the proxier against real iptables-restore in a namespace and
// follows its chains through a first full sync, a partial sync, a deletion, and a full
// resync after the nat table was flushed behind its back.
func TestProxierSyncs(t *testing.T) {
	lab := newLab(t, "hpxs-")
	node := addNode(t, lab)
	h := startProxier(t, node, nil)

	web := webService()
	api := testkit.LBService("demo", "api",
		testkit.ClusterIP("10.96.0.11"), testkit.Ingress("198.51.100.11"), testkit.NodePort(30081))
	webEPs := slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node", "172.31.0.66@other")
	apiEPs := slice("api", 8080, corev1.ProtocolTCP, "172.31.0.67@node")
	webC, apiC := portChains("demo/web:http", "tcp"), portChains("demo/api:http", "tcp")
	webSEP1 := sepChain("demo/web:http", "tcp", "172.31.0.65:8080")
	webSEP2 := sepChain("demo/web:http", "tcp", "172.31.0.66:8080")
	apiSEP := sepChain("demo/api:http", "tcp", "172.31.0.67:8080")

	// A Service the proxier cannot fully express: an unparsable external IP (the
	// conversion drops it) and a protocol iptables has no rules for (the generator
	// drops the port). It is counted and blocks nobody.
	bad := testkit.LBService("demo", "bad",
		testkit.ClusterIP("10.96.0.12"), testkit.Ingress("198.51.100.12"), testkit.NodePort(30082), func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"nonsense"}
			s.Spec.Ports[0].Protocol = "ICMP"
		})
	h.p.Update([]*corev1.Service{web, api, bad}, []*discoveryv1.EndpointSlice{webEPs, apiEPs})

	// 1. The first sync is full: the whole path of a LoadBalancer Service, and the
	// jumps from the built-in chains.
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "first sync", func() error {
		nat := save(t, node, "nat")
		services, _ := chainRules(nat, "KUBE-SERVICES")
		if !containsAll(services, "-d 198.51.100.10/32", "-j "+webC.ext, "-d 10.96.0.10/32", "-j "+webC.svc) {
			return fmt.Errorf("KUBE-SERVICES lacks web's VIP and ClusterIP rules:\n%s", strings.Join(services, "\n"))
		}
		if ext, _ := chainRules(nat, webC.ext); !jumpsTo(ext, "KUBE-MARK-MASQ") || !jumpsTo(ext, webC.svc) {
			return fmt.Errorf("%s = %q", webC.ext, ext)
		}
		if svc, _ := chainRules(nat, webC.svc); !jumpsTo(svc, webSEP1) || !jumpsTo(svc, webSEP2) {
			return fmt.Errorf("%s = %q", webC.svc, svc)
		}
		if sep, _ := chainRules(nat, webSEP1); !containsAll(sep, "-j DNAT --to-destination 172.31.0.65:8080") {
			return fmt.Errorf("%s = %q", webSEP1, sep)
		}
		if nodePorts, _ := chainRules(nat, "KUBE-NODEPORTS"); !containsAll(nodePorts, "--dport 30080 -j "+webC.ext) {
			return fmt.Errorf("KUBE-NODEPORTS = %q", nodePorts)
		}
		for _, want := range []string{"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
			"-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
			"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING"} {
			if !strings.Contains(nat, want) {
				return fmt.Errorf("nat lacks %q", want)
			}
		}
		filter := save(t, node, "filter")
		if !strings.Contains(filter, "-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD") {
			return fmt.Errorf("filter lacks the FORWARD jump:\n%s", filter)
		}
		return nil
	})
	if got := h.metric("herald_proxy_sync_seconds", "mode", "full"); got != 1 {
		t.Errorf("full syncs = %v, want 1", got)
	}
	if got := h.metric("herald_proxy_skipped_objects"); got != 2 {
		t.Errorf("skipped objects = %v, want 2 (bad's external IP and port)", got)
	}
	if got := h.metric("herald_proxy_rules", "family", "IPv4", "table", "nat"); got < 20 {
		t.Errorf("nat rules gauge = %v", got)
	}
	if st := h.p.Status(); !st.Synced || st.Disabled != "" || st.LastError != "" {
		t.Errorf("status %+v", st)
	}
	for _, table := range canaryTables {
		if _, ok := chainRules(save(t, node, table), heraldCanary); !ok {
			t.Errorf("no %s in %s", heraldCanary, table)
		}
	}

	// 2. A partial sync rewrites only the changed Service's chains. A marker rule
	// added to api's chain from outside survives it; a full sync would wipe it.
	const marker = `-m comment --comment herald-test-marker -j RETURN`
	mustExec(t, node, "iptables", "-t", "nat", "-A", apiC.svc, "-m", "comment", "--comment", "herald-test-marker", "-j", "RETURN")
	webEPs2 := slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node", "172.31.0.68@other")
	webSEP3 := sepChain("demo/web:http", "tcp", "172.31.0.68:8080")
	h.p.Update([]*corev1.Service{web, api}, []*discoveryv1.EndpointSlice{webEPs2, apiEPs})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "partial sync", func() error {
		nat := save(t, node, "nat")
		svc, _ := chainRules(nat, webC.svc)
		if !jumpsTo(svc, webSEP3) || jumpsTo(svc, webSEP2) {
			return fmt.Errorf("%s = %q, want the new endpoint only", webC.svc, svc)
		}
		if _, ok := chainRules(nat, webSEP2); ok {
			return fmt.Errorf("stale %s not deleted", webSEP2)
		}
		return nil
	})
	nat := save(t, node, "nat")
	if rules, _ := chainRules(nat, apiC.svc); !containsAll(rules, marker) {
		t.Errorf("api's chain was rewritten by a change of web: %q", rules)
	}
	if got := h.metric("herald_proxy_sync_seconds", "mode", "partial"); got < 1 {
		t.Errorf("partial syncs = %v", got)
	}
	if got := h.metric("herald_proxy_programming_seconds"); got != 1 {
		t.Errorf("programming latency samples = %v, want 1 (one EndpointSlice change)", got)
	}

	// 3. Deleting a Service deletes its chains.
	h.p.Update([]*corev1.Service{web}, []*discoveryv1.EndpointSlice{webEPs2})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "deletion", func() error {
		nat := save(t, node, "nat")
		for _, c := range []string{apiC.svc, apiC.ext, apiSEP} {
			if _, ok := chainRules(nat, c); ok {
				return fmt.Errorf("%s still there", c)
			}
		}
		if services, _ := chainRules(nat, "KUBE-SERVICES"); containsAll(services, "10.96.0.11") {
			return fmt.Errorf("KUBE-SERVICES still has api")
		}
		return nil
	})

	// 4. Someone flushes and deletes every nat chain (a firewall reload): the canary
	// is gone, and a full resync puts everything back.
	fullBefore := h.metric("herald_proxy_sync_seconds", "mode", "full")
	mustExec(t, node, "iptables", "-t", "nat", "-F")
	mustExec(t, node, "iptables", "-t", "nat", "-X")
	if _, ok := chainRules(save(t, node, "nat"), webC.svc); ok {
		t.Fatal("flush did not flush")
	}
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "resync after flush", func() error {
		nat := save(t, node, "nat")
		if svc, _ := chainRules(nat, webC.svc); !jumpsTo(svc, webSEP1) || !jumpsTo(svc, webSEP3) {
			return fmt.Errorf("%s = %q", webC.svc, svc)
		}
		if !strings.Contains(nat, "-j KUBE-SERVICES") {
			return fmt.Errorf("jump from PREROUTING/OUTPUT missing")
		}
		if _, ok := chainRules(nat, heraldCanary); !ok {
			return fmt.Errorf("canary not recreated")
		}
		return nil
	})
	if got := h.metric("herald_proxy_sync_seconds", "mode", "full"); got != fullBefore+1 {
		t.Errorf("full syncs %v → %v, want one more", fullBefore, got)
	}
	if got := h.metric("herald_proxy_sync_errors_total"); got != 0 {
		t.Errorf("sync errors = %v", got)
	}
}

// TestProxierStaysOffBesideKubeProxy: kube-proxy's canary, there before the proxier
// starts or appearing later, keeps it from writing.
func TestProxierStaysOffBesideKubeProxy(t *testing.T) {
	canary := []string{"iptables", "-t", "mangle", "-N", kubeProxyCanary}
	expectOffBesideKubeProxy(t, "hpxk-", canary, "kube-proxy", canary, "kube-proxy")
}

// expectOffBesideKubeProxy runs mark (a command leaving what kube-proxy leaves on a
// node) on a node before a proxier starts there, and laterMark on a second node once
// its proxier has synced: each proxier must turn off, its status saying want and
// wantLater, and the first must have written nothing.
func expectOffBesideKubeProxy(t *testing.T, prefix string, mark []string, want string, laterMark []string, wantLater string) {
	t.Helper()
	lab := newLab(t, prefix)
	node := addNode(t, lab)
	mustExec(t, node, mark...)
	h := startProxier(t, node, nil)
	h.p.Update([]*corev1.Service{webService()},
		[]*discoveryv1.EndpointSlice{slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node")})
	testkit.Eventually(t, 5*time.Second, 50*time.Millisecond, "disabled", func() error {
		if st := h.p.Status(); !strings.Contains(st.Disabled, want) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // ten sync periods
	if nat := save(t, node, "nat"); strings.Contains(nat, "KUBE-SERVICES") || strings.Contains(nat, heraldCanary) {
		t.Errorf("the proxier wrote next to kube-proxy:\n%s", nat)
	}
	if got := h.metric("herald_proxy_disabled", "reason", "kube-proxy"); got != 1 {
		t.Errorf("herald_proxy_disabled{reason=kube-proxy} = %v", got)
	}

	// Later: kube-proxy starts on a node the proxier already programs.
	node2 := addHost(t, lab, "node2", "172.31.0.4")
	h2 := startProxier(t, node2, func(c *Config) { c.NodeName = "node2" })
	h2.p.Update([]*corev1.Service{webService()}, nil)
	testkit.Eventually(t, 5*time.Second, 50*time.Millisecond, "first sync", func() error {
		if !h2.p.Status().Synced {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	mustExec(t, node2, laterMark...)
	testkit.Eventually(t, 5*time.Second, 50*time.Millisecond, "disabled later", func() error {
		if st := h2.p.Status(); !strings.Contains(st.Disabled, wantLater) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// TestProxierModeNone does nothing and says so.
func TestProxierModeNone(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeNone
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Update([]*corev1.Service{webService()}, nil)
	if st := p.Status(); !strings.Contains(st.Disabled, "--proxy=none") || st.Mode != ModeNone {
		t.Errorf("status %+v", st)
	}
}

// TestProxierDualStack programs both families: iptables for the IPv4 addresses,
// ip6tables for the IPv6 ones, from one Service and one EndpointSlice per family.
func TestProxierDualStack(t *testing.T) {
	lab := newLab(t, "hpxd-")
	if err := lab.AddSubnet(netip.MustParsePrefix("fd00:31::/64")); err != nil {
		t.Fatal(err)
	}
	node := addNode(t, lab)
	if err := node.AddAddr(netip.MustParseAddr("fd00:31::3")); err != nil {
		t.Fatal(err)
	}
	h := startProxier(t, node, func(c *Config) {
		c.NodeIPs = append(c.NodeIPs, netip.MustParseAddr("fd00:31::3"))
		c.ClusterCIDRs = append(c.ClusterCIDRs, "fd00:31::40/122")
	})
	web := webService()
	web.Spec.ClusterIPs = append(web.Spec.ClusterIPs, "fd00:96::10")
	web.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	web.Status.LoadBalancer.Ingress = append(web.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "fd00:51::10"})
	v4 := slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node")
	v6 := slice("web", 8080, corev1.ProtocolTCP, "fd00:31::65@node")
	v6.Name, v6.AddressType = "web-6", discoveryv1.AddressTypeIPv6
	h.p.Update([]*corev1.Service{web}, []*discoveryv1.EndpointSlice{v4, v6})

	c := portChains("demo/web:http", "tcp")
	sep4 := sepChain("demo/web:http", "tcp", "172.31.0.65:8080")
	sep6 := sepChain("demo/web:http", "tcp", "[fd00:31::65]:8080")
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "both families", func() error {
		nat4 := save(t, node, "nat")
		nat6 := mustExec(t, node, "ip6tables-save", "-t", "nat")
		if rules, _ := chainRules(nat4, sep4); !containsAll(rules, "--to-destination 172.31.0.65:8080") {
			return fmt.Errorf("IPv4 %s = %q", sep4, rules)
		}
		if rules, _ := chainRules(nat6, sep6); !containsAll(rules, "--to-destination [fd00:31::65]:8080") {
			return fmt.Errorf("IPv6 %s = %q", sep6, rules)
		}
		if rules, _ := chainRules(nat6, "KUBE-SERVICES"); !containsAll(rules, "-d fd00:51::10/128", "-j "+c.ext, "-d fd00:96::10/128") {
			return fmt.Errorf("IPv6 KUBE-SERVICES = %q", rules)
		}
		if strings.Contains(nat4, "fd00:") || strings.Contains(nat6, "172.31.0.65") {
			return fmt.Errorf("a family holds the other's addresses")
		}
		return nil
	})
	if got := h.metric("herald_proxy_sync_seconds", "mode", "full"); got != 2 {
		t.Errorf("full syncs = %v, want 2 (one per family)", got)
	}
}

// TestProxierRecoversFromFailedRestore: a partial restore that the kernel refuses
// (someone deleted a chain the partial sync leaves in place but still jumps to, as in
// kube-proxy's TestSyncProxyRulesRepeated) is counted and followed by a full sync.
func TestProxierRecoversFromFailedRestore(t *testing.T) {
	lab := newLab(t, "hpxf-")
	node := addNode(t, lab)
	h := startProxier(t, node, nil)
	web := webService()
	api := testkit.LBService("demo", "api",
		testkit.ClusterIP("10.96.0.11"), testkit.Ingress("198.51.100.11"), testkit.NodePort(30081))
	apiC := portChains("demo/api:http", "tcp")
	apiEPs := slice("api", 8080, corev1.ProtocolTCP, "172.31.0.67@node")
	h.p.Update([]*corev1.Service{web, api}, []*discoveryv1.EndpointSlice{
		slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node"), apiEPs})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "first sync", func() error {
		if !h.p.Status().Synced {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	for _, args := range [][]string{{"-F", "KUBE-SERVICES"}, {"-F", apiC.ext}, {"-F", apiC.svc}, {"-X", apiC.svc}} {
		mustExec(t, node, append([]string{"iptables", "-t", "nat"}, args...)...)
	}
	h.p.Update([]*corev1.Service{web, api}, []*discoveryv1.EndpointSlice{
		slice("web", 8080, corev1.ProtocolTCP, "172.31.0.66@node"), apiEPs})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "failed partial sync", func() error {
		if got := h.metric("herald_proxy_sync_errors_total"); got != 1 {
			return fmt.Errorf("sync errors %v", got)
		}
		return nil
	})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "recovery", func() error {
		nat := save(t, node, "nat")
		if rules, _ := chainRules(nat, apiC.svc); !jumpsTo(rules, sepChain("demo/api:http", "tcp", "172.31.0.67:8080")) {
			return fmt.Errorf("%s = %q", apiC.svc, rules)
		}
		if st := h.p.Status(); st.LastError != "" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if got := h.metric("herald_proxy_sync_seconds", "mode", "full"); got != 2 {
		t.Errorf("full syncs = %v, want 2 (first, after the failure)", got)
	}
}
