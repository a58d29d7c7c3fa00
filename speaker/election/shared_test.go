package election

import (
	"slices"
	"testing"
)

// TestElectSharedIPs: Services sharing an IP, and the IPs of dual-stack Services, get one
// owner, chosen over all the Services holding them.
func TestElectSharedIPs(t *testing.T) {
	const (
		a  = "172.18.255.200"
		b  = "172.18.255.201"
		a6 = "fc00:f853:ccd:e793::1"
	)
	n3 := []Node{mkNode("n1"), mkNode("n2"), mkNode("n3")}
	all := hashOrder(a, "n1", "n2", "n3")
	host := func(n string) string { return "kubernetes.io/hostname in (" + n + ")" }

	runElect(t, []electCase{
		{name: "two cluster Services sharing an IP: one decision, both listed",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a)), mkSvc("other/b", ips(a))},
			want:     map[string]want{a: owned(all)}},
		{name: "shared IP where the ad selects only one Service: announced for it (MetalLB refuses)",
			view:     view(ads(mkAd("l2", []string{"default"}, forSvcs("app=web"), onNodes(host("n1,n2")))), n3...),
			services: []Service{mkSvc("ns/a", ips(a), svcLabel("app", "web")), mkSvc("ns/b", ips(a), svcLabel("app", "db"))},
			want:     map[string]want{a: owned(hashOrder(a, "n1", "n2"))}},
		{name: "shared IP, ads selecting different nodes: a node both allow wins",
			view: view(ads(
				mkAd("l2-web", []string{"default"}, forSvcs("app=web"), onNodes(host("n1,n2"))),
				mkAd("l2-db", []string{"default"}, forSvcs("app=db"), onNodes(host("n2,n3")))), n3...),
			services: []Service{mkSvc("ns/a", ips(a), svcLabel("app", "web")), mkSvc("ns/b", ips(a), svcLabel("app", "db"))},
			want:     map[string]want{a: owned(ranked(a, tier("n2"), tier("n1", "n3")))}},
		{name: "shared IP, ads with disjoint nodes: one owner, the Service it cannot serve reported",
			view: view(ads(
				mkAd("l2-web", []string{"default"}, forSvcs("app=web"), onNodes(host("n1"))),
				mkAd("l2-db", []string{"default"}, forSvcs("app=db"), onNodes(host("n2")))), n3...),
			services: []Service{mkSvc("ns/a", ips(a), svcLabel("app", "web")), mkSvc("ns/b", ips(a), svcLabel("app", "db"))},
			want: map[string]want{a: {candidates: hashOrder(a, "n1", "n2"),
				unserved: map[string][]string{"n1": {"ns/b"}, "n2": {"ns/a"}}[hashOrder(a, "n1", "n2")[0]]}}},
		{name: "shared IP, local Services with overlapping endpoints: the common node",
			view: view(ads(allPools("l2")), n3...),
			services: []Service{
				mkSvc("ns/a", ips(a), local, endpoints(readyOn("n1"), readyOn("n2"))),
				mkSvc("ns/b", ips(a), local, endpoints(readyOn("n2"), readyOn("n3"))),
			},
			want: map[string]want{a: owned(ranked(a, tier("n2"), tier("n1", "n3")))}},
		{name: "shared IP, local Services in two namespaces with disjoint endpoints (metallb/metallb#968)",
			view: view(ads(allPools("l2")), n3...),
			services: []Service{
				mkSvc("ns1/web", ips(a), local, endpoints(readyOn("n1"))),
				mkSvc("ns2/web", ips(a), local, endpoints(readyOn("n3"))),
			},
			want: map[string]want{a: {candidates: hashOrder(a, "n1", "n3"),
				unserved: map[string][]string{"n1": {"ns2/web"}, "n3": {"ns1/web"}}[hashOrder(a, "n1", "n3")[0]]}}},
		{name: "shared IP, local and cluster: nodes serving the local one first",
			view: view(ads(allPools("l2")), n3...),
			services: []Service{
				mkSvc("ns/a", ips(a), local, endpoints(readyOn("n3"))),
				mkSvc("ns/b", ips(a)),
			},
			want: map[string]want{a: owned(ranked(a, tier("n3"), tier("n1", "n2")))}},
		{name: "shared IP, local: ready beats terminating, coverage beats readiness",
			view: view(ads(allPools("l2")), n3...),
			services: []Service{
				mkSvc("ns/a", ips(a), local, endpoints(terminatingOn("n1"), readyOn("n2"), readyOn("n3"))),
				mkSvc("ns/b", ips(a), local, endpoints(terminatingOn("n1"), readyOn("n2"))),
			},
			// n2: 2 Services, both ready; n1: 2 Services, none ready; n3: 1 Service, ready.
			want: map[string]want{a: owned([]string{"n2", "n1", "n3"})}},
		{name: "shared IP, one Service without endpoints: the other decides",
			view: view(ads(allPools("l2")), n3...),
			services: []Service{
				mkSvc("ns/a", ips(a), local, endpoints(readyOn("n1"))),
				mkSvc("ns/b", ips(a), local, endpoints()),
			},
			want: map[string]want{a: owned([]string{"n1"})}},
		{name: "shared IP, no Service announceable: nobody, the furthest reason",
			view: view(ads(mkAd("l2", []string{"default"}, forSvcs("app=web"))), n3...),
			services: []Service{
				mkSvc("ns/a", ips(a), endpoints()),
				mkSvc("ns/b", ips(a), svcLabel("app", "web"), endpoints()),
			},
			want: map[string]want{a: {reason: ReasonNoEndpoints, message: "not announcing 172.18.255.200: " +
				"Service ns/b has no ready or serving endpoint; " +
				"the serviceSelectors of L2Advertisement l2 (pool default) do not select Service ns/a"}}},
		{name: "same IP held without sharing key (allocator conflict): still one owner",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a)), mkSvc("ns/a-dup", ips(a))},
			want:     map[string]want{a: owned(all)}},
		{name: "dual-stack: both IPs on one node, hashed by the IPv4",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a, a6))},
			want:     map[string]want{a: owned(all), a6: owned(all)}},
		{name: "dual-stack, IPv6 primary: same key, same node",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a6, a))},
			want:     map[string]want{a: owned(all), a6: owned(all)}},
		{name: "dual-stack local: both IPs follow the endpoints",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a6, a), local, endpoints(readyOn("n2"), readyOn("n3")))},
			want:     map[string]want{a: owned(hashOrder(a, "n2", "n3")), a6: owned(hashOrder(a, "n2", "n3"))}},
		{name: "single-stack v6 sharing the v6 of a dual-stack Service: tied to its v4",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a, a6)), mkSvc("ns/b", ips(a6), local, endpoints(readyOn("n1"), readyOn("n3")))},
			want: map[string]want{
				a:  {candidates: ranked(a, tier("n1", "n3"), tier("n2"))},
				a6: {candidates: ranked(a, tier("n1", "n3"), tier("n2"))}}},
		{name: "a chain of Services ties three IPs; the smallest IP is the key",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/x", ips(b, a6)), mkSvc("ns/y", ips(a6)), mkSvc("ns/z", ips(a6, a))},
			want:     map[string]want{a: owned(all), b: owned(all), a6: owned(all)}},
		{name: "IPv4-mapped IPv6 is the IPv4",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips("::ffff:"+a)), mkSvc("ns/b", ips(a, a))},
			want:     map[string]want{a: owned(all)}},
		{name: "a Service without IP is ignored",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", nil), mkSvc("ns/b", ips(a))},
			want:     map[string]want{a: owned(all)}},
		{name: "unrelated IPs are elected apart",
			view:     view(ads(allPools("l2")), n3...),
			services: []Service{mkSvc("ns/a", ips(a)), mkSvc("ns/b", ips(b))},
			want:     map[string]want{a: owned(all), b: owned(hashOrder(b, "n1", "n2", "n3"))}},
	})
}

// TestDecisionServices: each Decision lists the Services holding its own IP, and its
// Unserved only among them.
func TestDecisionServices(t *testing.T) {
	v := view(ads(allPools("l2")), mkNode("n1"), mkNode("n2"))
	got := Elect(v, []Service{
		mkSvc("ns/dual", ips("10.0.0.1", "fc00::1"), local, endpoints(readyOn("n1"))),
		mkSvc("ns/v6", ips("fc00::1"), local, endpoints(readyOn("n2"))),
		mkSvc("ns/v4", ips("10.0.0.1"), local, endpoints(readyOn("n1"))),
	})
	// n1 serves ns/dual and ns/v4, n2 only ns/v6: n1 owns both IPs.
	v4, v6 := decisionFor(t, got, "10.0.0.1"), decisionFor(t, got, "fc00::1")
	for _, tc := range []struct {
		d                  Decision
		services, unserved []string
	}{
		{v4, []string{"ns/dual", "ns/v4"}, nil},
		{v6, []string{"ns/dual", "ns/v6"}, []string{"ns/v6"}},
	} {
		if tc.d.Owner != "n1" || tc.d.Key != ip("10.0.0.1") {
			t.Errorf("%s: owner %s key %s, want n1 10.0.0.1", tc.d.IP, tc.d.Owner, tc.d.Key)
		}
		if !slices.Equal(tc.d.Services, tc.services) || !slices.Equal(tc.d.Unserved, tc.unserved) {
			t.Errorf("%s: services %v unserved %v, want %v %v", tc.d.IP, tc.d.Services, tc.d.Unserved, tc.services, tc.unserved)
		}
	}
	// The Decisions of one group do not share slices.
	v4.Candidates[0] = "changed"
	if v6.Candidates[0] != "n1" {
		t.Error("Decisions of a group share their Candidates")
	}
}
