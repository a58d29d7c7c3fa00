package election

import "testing"

// TestMessages pins the Event-ready text of every reason.
func TestMessages(t *testing.T) {
	const a = "172.18.255.200"
	svc := []Service{mkSvc("ns/web", ips(a))}
	l2 := ads(allPools("l2"))
	excl := ExcludeLabel
	runElect(t, []electCase{
		{name: "all excluded",
			view: view(l2, mkNode("worker", excluded), mkNode("worker2", excluded), mkNode("control-plane", excluded)), services: svc,
			want: map[string]want{a: {reason: ReasonExcluded, message: "no node may announce 172.18.255.200: " +
				"all 3 candidates (control-plane, worker, worker2) are excluded (label " + excl + ")"}}},
		{name: "the only candidate excluded (single-node kind)",
			view: view(l2, mkNode("kind-control-plane", excluded)), services: svc,
			want: map[string]want{a: {reason: ReasonExcluded, message: "no node may announce 172.18.255.200: " +
				"the only candidate, kind-control-plane, is excluded (label " + excl + ")"}}},
		{name: "mixed filters: the last one names the reason",
			view: view(l2, mkNode("a", unavailable), mkNode("b", excluded), mkNode("c", excluded)), services: svc,
			want: map[string]want{a: {reason: ReasonExcluded, message: "no node may announce 172.18.255.200: " +
				"of 3 candidates, 1 (a) has condition NetworkUnavailable=True, 2 (b, c) are excluded (label " + excl + ")"}}},
		{name: "many nodes are counted, a few named",
			view:     view(l2, mkNode("n1", unavailable), mkNode("n2", unavailable), mkNode("n3", unavailable), mkNode("n4", unavailable), mkNode("n5", unavailable)),
			services: svc,
			want: map[string]want{a: {reason: ReasonNetworkUnavailable, message: "no node may announce 172.18.255.200: " +
				"all 5 candidates (n1, n2, n3 and 2 more) have condition NetworkUnavailable=True"}}},
		{name: "no speaker",
			view: View{Advertisements: l2}, services: svc,
			want: map[string]want{a: {reason: ReasonNoLiveSpeaker, message: "no node may announce 172.18.255.200: no speaker is alive"}}},
		{name: "speakers without Node",
			view: View{Members: []string{"w1", "w2"}, Advertisements: l2}, services: svc,
			want: map[string]want{a: {reason: ReasonNoLiveSpeaker, message: "no node may announce 172.18.255.200: " +
				"all 2 candidates (w1, w2) have no Node object"}}},
		{name: "not selected",
			view: view(ads(mkAd("l2-b", []string{"default"}, onNodes("zone=b")), mkAd("l2-a", []string{"default"}, onNodes("zone=a"))),
				mkNode("w1"), mkNode("w2", excluded)), services: svc,
			want: map[string]want{a: {reason: ReasonNotSelected, message: "no node may announce 172.18.255.200: " +
				"of 2 candidates, 1 (w2) is excluded (label " + excl + "), 1 (w1) is not selected by the nodeSelectors of L2Advertisement l2-a, l2-b"}}},
		{name: "no local endpoint",
			view:     view(l2, mkNode("w1"), mkNode("w2")),
			services: []Service{mkSvc("ns/web", ips(a), local, endpoints(readyOn("w3"), notReadyOn("w1")))},
			want: map[string]want{a: {reason: ReasonNoLocalEndpoint, message: "no node may announce 172.18.255.200: " +
				"all 2 candidates (w1, w2) have no ready or serving endpoint of ns/web (externalTrafficPolicy Local)"}}},
		{name: "no endpoint",
			view: view(l2, mkNode("w1")), services: []Service{mkSvc("ns/web", ips(a), endpoints(notReadyOn("w1")))},
			want: map[string]want{a: {reason: ReasonNoEndpoints, message: "not announcing 172.18.255.200: Service ns/web has no ready or serving endpoint"}}},
		{name: "no advertisement for the pool",
			view: view(ads(mkAd("l2", []string{"other"})), mkNode("w1")), services: svc,
			want: map[string]want{a: {reason: ReasonNoAdvertisement, message: "not announcing 172.18.255.200: no L2Advertisement announces pool default (Service ns/web)"}}},
		{name: "serviceSelectors refuse",
			view: view(ads(mkAd("l2-y", []string{"default"}, forSvcs("app=db")), mkAd("l2-x", []string{"default"}, forSvcs("app=api"))), mkNode("w1")), services: svc,
			want: map[string]want{a: {reason: ReasonNoAdvertisement, message: "not announcing 172.18.255.200: " +
				"the serviceSelectors of L2Advertisement l2-x, l2-y (pool default) do not select Service ns/web"}}},
		{name: "no pool; a dual-stack Service names both IPs",
			view: view(l2, mkNode("w1")), services: []Service{mkSvc("ns/web", ips("fc00::1", a), inPool(""))},
			want: map[string]want{
				a:         {reason: ReasonNoPool, message: "not announcing 172.18.255.200, fc00::1: the IPs of Service ns/web are in no IPAddressPool"},
				"fc00::1": {reason: ReasonNoPool, message: "not announcing 172.18.255.200, fc00::1: the IPs of Service ns/web are in no IPAddressPool"}}},
	})
}
