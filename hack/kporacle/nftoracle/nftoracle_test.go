//go:build linux

package nftoracle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// world is the test cluster; chain name hashes are kube-proxy's (they depend
// only on namespace, name, protocol and port name, and match the ones in
// kube-proxy's own nftables proxier_test.go).
//
//   - ns1/svc1: LoadBalancer 1.2.3.4, ETP=Local, NodePort 3001, one local and
//     one remote endpoint (chains *-ULMVA6XW-ns1/svc1/tcp/p80)
//   - ns5/svc5: ClusterIP with ClientIP session affinity, one endpoint
//     (service-HVFWP5L3-..., endpoint-GTK6MW7G-...__10.180.0.3/80)
//   - ns3/svc3: LoadBalancer 5.6.7.8 with loadBalancerSourceRanges
//     203.0.113.0/25 (chains *-4AT6LBPK-ns3/svc3/tcp/p80)
//   - ns6/svc6: ClusterIP without endpoints
func world() ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	services := []*v1.Service{
		service("ns1", "svc1", v1.ServiceTypeLoadBalancer, "172.30.0.41", loadBalancer(3001, "1.2.3.4"), func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30000
		}),
		service("ns5", "svc5", v1.ServiceTypeClusterIP, "172.30.0.45", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
		}),
		service("ns3", "svc3", v1.ServiceTypeLoadBalancer, "172.30.0.43", loadBalancer(3003, "5.6.7.8"), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25"}
		}),
		service("ns6", "svc6", v1.ServiceTypeClusterIP, "172.30.0.46"),
	}
	slices := []*discoveryv1.EndpointSlice{
		slice("ns1", "svc1", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.1", testNodeName}, endpoint{"10.180.1.1", otherNodeName}),
		slice("ns5", "svc5", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.3", otherNodeName}),
		slice("ns3", "svc3", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.5", otherNodeName}),
	}
	return services, slices
}

// newWorld is an Oracle fed world() and synced once.
func newWorld(t *testing.T, opts Options) (*Oracle, Result) {
	t.Helper()
	o, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	services, slices := world()
	Populate(o, services, slices)
	result, err := o.Sync()
	if err != nil {
		t.Fatalf("first Sync: %v\n%s", err, result.Transaction)
	}
	return o, result
}

// requireLines fails unless text has each of want as a whole line.
func requireLines(t *testing.T, what, text string, want ...string) {
	t.Helper()
	have := make(map[string]bool)
	for _, line := range strings.Split(text, "\n") {
		have[line] = true
	}
	missing := false
	for _, line := range want {
		if !have[line] {
			t.Errorf("%s lacks the line\n\t%s", what, line)
			missing = true
		}
	}
	if missing {
		t.Logf("%s:\n%s", what, text)
	}
}

// refuse fails if text contains any of dontWant.
func refuse(t *testing.T, what, text string, dontWant ...string) {
	t.Helper()
	for _, s := range dontWant {
		if strings.Contains(text, s) {
			t.Errorf("%s contains %q:\n%s", what, s, text)
		}
	}
}

func TestFirstSyncIsKubeProxysRuleset(t *testing.T) {
	o, result := newWorld(t, testOptions())
	if !result.Full {
		t.Error("first Sync: Full is false")
	}
	dump, err := o.Dump()
	if err != nil {
		t.Fatal(err)
	}
	requireLines(t, "Dump", dump,
		// the table and fixed chains, with mark bit 14 and the pod CIDR
		`add table ip kube-proxy { comment "rules for kube-proxy" ; }`,
		`add rule ip kube-proxy masquerading mark and 0x00004000 != 0 mark set mark xor 0x00004000 masquerade fully-random`,
		`add rule ip kube-proxy services ip daddr @cluster-ips ip saddr != 10.0.0.0/8 mark set mark or 0x00004000 comment "masquerade clusterIP traffic from outside cluster"`,
		`add rule ip kube-proxy cluster-ips-check ip daddr { 172.30.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"`,
		`add rule ip kube-proxy reject-chain reject`,

		// ns1/svc1: ETP=Local LB, numgen DNAT over both endpoints for
		// internal traffic, the local one only for external traffic
		`add element ip kube-proxy service-ips { 1.2.3.4 . tcp . 80 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }`,
		`add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }`,
		`add element ip kube-proxy service-nodeports { tcp . 3001 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }`,
		`add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.1.1 . 80 }`,
		`add rule ip kube-proxy local-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat ip addr . port to numgen random mod 1 map { 0 : 10.180.0.1 . 80 }`,
		`add rule ip kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80 ip saddr 10.0.0.0/8 goto service-ULMVA6XW-ns1/svc1/tcp/p80 comment "short-circuit pod traffic"`,
		`add rule ip kube-proxy external-ULMVA6XW-ns1/svc1/tcp/p80 goto local-ULMVA6XW-ns1/svc1/tcp/p80`,

		// ns5/svc5: session affinity through a per-endpoint chain and set
		`add set ip kube-proxy affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }`,
		`add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 ip saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80`,
		`add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 }`,
		`add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 update @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip saddr }`,
		`add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 meta l4proto tcp dnat to 10.180.0.3:80`,

		// ns3/svc3: loadBalancerSourceRanges
		`add element ip kube-proxy firewall-ips { 5.6.7.8 . tcp . 80 : goto firewall-4AT6LBPK-ns3/svc3/tcp/p80 }`,
		`add rule ip kube-proxy firewall-4AT6LBPK-ns3/svc3/tcp/p80 ip saddr != { 203.0.113.0/25 } drop`,
		`add element ip kube-proxy service-ips { 5.6.7.8 . tcp . 80 : goto external-4AT6LBPK-ns3/svc3/tcp/p80 }`,

		// ns6/svc6: no endpoints
		`add element ip kube-proxy cluster-ips { 172.30.0.46 }`,
		`add element ip kube-proxy no-endpoint-services { 172.30.0.46 . tcp . 80 comment "ns6/svc6:p80" : goto reject-chain }`,
	)
	refuse(t, "Dump", dump, "service-LAUZTJTB", "ns6/svc6/tcp/p80")
	// The transaction of a first sync creates everything the Dump holds.
	requireLines(t, "first transaction", result.Transaction,
		`add table ip kube-proxy { comment "rules for kube-proxy" ; }`,
		`add element ip kube-proxy service-ips { 1.2.3.4 . tcp . 80 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }`,
	)
}

func TestPartialSyncTouchesOnlyTheChangedService(t *testing.T) {
	o, _ := newWorld(t, testOptions())
	_, slices := world()
	old := slices[2]
	changed := old.DeepCopy()
	changed.Endpoints[0].Addresses = []string{"10.180.0.6"}
	o.OnEndpointSliceUpdate(old, changed)
	result, err := o.Sync()
	if err != nil {
		t.Fatal(err)
	}
	if result.Full {
		t.Errorf("second Sync after one EndpointSlice change is Full:\n%s", result.Transaction)
	}
	requireLines(t, "partial transaction", result.Transaction,
		`flush chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80`,
		`add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 meta l4proto tcp dnat ip addr . port to numgen random mod 1 map { 0 : 10.180.0.6 . 80 }`,
	)
	refuse(t, "partial transaction", result.Transaction,
		"add table", "ULMVA6XW-ns1/svc1", "ns5/svc5", "ns6/svc6", "10.180.0.5 . 80")
	dump, err := o.Dump()
	if err != nil {
		t.Fatal(err)
	}
	refuse(t, "Dump after the partial sync", dump, "10.180.0.5 . 80")

	// An unchanged world gives a partial sync without service chains; a
	// forced one rewrites everything.
	if result, err = o.Sync(); err != nil || result.Full {
		t.Fatalf("idle Sync: Full=%v err=%v", result.Full, err)
	}
	refuse(t, "idle transaction", result.Transaction, "service-")
	o.ForceFullSync()
	if result, err = o.Sync(); err != nil || !result.Full {
		t.Fatalf("forced Sync: Full=%v err=%v", result.Full, err)
	}
	requireLines(t, "forced full transaction", result.Transaction,
		`add table ip kube-proxy { comment "rules for kube-proxy" ; }`,
		`add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.1.1 . 80 }`,
	)
}

func TestIPv6(t *testing.T) {
	o, err := New(Options{NodeName: testNodeName, NodeIP: testNodeIPv6, ClusterCIDRs: []string{podCIDR, "fd00:10::/64"}})
	if err != nil {
		t.Fatal(err)
	}
	svc := service("ns1", "svc1", v1.ServiceTypeLoadBalancer, "fd00:172:30::41", loadBalancer(3001, "2001:db8:1::4"))
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	Populate(o, []*v1.Service{svc},
		[]*discoveryv1.EndpointSlice{slice("ns1", "svc1", discoveryv1.AddressTypeIPv6, endpoint{"fd00:10::1", otherNodeName})})
	if _, err := o.Sync(); err != nil {
		t.Fatal(err)
	}
	dump, err := o.Dump()
	if err != nil {
		t.Fatal(err)
	}
	requireLines(t, "IPv6 Dump", dump,
		`add table ip6 kube-proxy { comment "rules for kube-proxy" ; }`,
		`add rule ip6 kube-proxy services ip6 daddr @cluster-ips ip6 saddr != fd00:10::/64 mark set mark or 0x00004000 comment "masquerade clusterIP traffic from outside cluster"`,
		`add rule ip6 kube-proxy services fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports`,
		`add element ip6 kube-proxy service-ips { 2001:db8:1::4 . tcp . 80 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }`,
		`add rule ip6 kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat ip6 addr . port to numgen random mod 1 map { 0 : fd00:10::1 . 80 }`,
	)
	refuse(t, "IPv6 Dump", dump, " ip kube-proxy", "10.0.0.0/8")
}

// kube-proxy adds map elements in Go map order; Dump must not depend on it.
func TestDumpIsDeterministic(t *testing.T) {
	o, _ := newWorld(t, testOptions())
	want, err := o.Dump()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		o, _ := newWorld(t, testOptions())
		if got, _ := o.Dump(); got != want {
			t.Fatalf("two Dumps of the same world differ:\n%s\n---\n%s", want, got)
		}
	}
}
