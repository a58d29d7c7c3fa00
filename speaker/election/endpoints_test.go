package election

import "testing"

func TestCanServe(t *testing.T) {
	for _, tc := range []struct {
		ready, serving *bool
		want           bool
	}{
		{nil, nil, true}, // unknown means ready
		{nil, no, true},
		{nil, yes, true},
		{yes, nil, true},
		{yes, no, true},
		{yes, yes, true},
		{no, nil, false}, // serving unset defers to ready
		{no, no, false},
		{no, yes, true}, // terminating but serving
	} {
		if got := CanServe(tc.ready, tc.serving); got != tc.want {
			t.Errorf("CanServe(%v, %v) = %v, want %v", str(tc.ready), str(tc.serving), got, tc.want)
		}
	}
}

func str(b *bool) string {
	if b == nil {
		return "nil"
	}
	if *b {
		return "true"
	}
	return "false"
}

// TestElectEndpoints follows MetalLB's TestShouldAnnounceEPSlices: readiness and serving
// combinations for both traffic policies, with two speakers iris1 and iris2.
func TestElectEndpoints(t *testing.T) {
	const a = "10.20.30.1"
	v := view(ads(allPools("l2")), mkNode("iris1"), mkNode("iris2"))
	both := hashOrder(a, "iris1", "iris2")
	runElect(t, []electCase{
		{name: "local, two ready endpoints on one host: that host",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris1"), readyOn("iris1")))},
			want: map[string]want{a: owned(ranked(a, tier("iris1")))}},
		{name: "local, ready endpoint on iris2 only: iris2",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris2")))},
			want: map[string]want{a: owned(ranked(a, tier("iris2")))}},
		{name: "local, neither endpoint ready: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(notReadyOn("iris1"), notReadyOn("iris1")))},
			want: map[string]want{a: none(ReasonNoEndpoints)}},
		{name: "local, ready endpoints on both hosts: hash decides",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris1"), readyOn("iris2")))},
			want: map[string]want{a: owned(both)}},
		{name: "local, endpoints on both hosts, none ready: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(notReadyOn("iris1"), notReadyOn("iris2")))},
			want: map[string]want{a: none(ReasonNoEndpoints)}},
		{name: "local, endpoint on iris2 not ready: iris1",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris1"), notReadyOn("iris2")))},
			want: map[string]want{a: owned(ranked(a, tier("iris1")))}},
		{name: "local, conditions unset count as ready",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(unknownOn("iris2")))},
			want: map[string]want{a: owned(ranked(a, tier("iris2")))}},
		{name: "local, terminating but serving endpoint counts",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(terminatingOn("iris1")))},
			want: map[string]want{a: owned(ranked(a, tier("iris1")))}},
		{name: "local, terminating on iris1 and ready on iris2: iris2 first, iris1 kept as fallback",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(terminatingOn("iris1"), readyOn("iris2")))},
			want: map[string]want{a: owned(ranked(a, tier("iris2"), tier("iris1")))}},
		{name: "local, terminating and ready on the same node: ready wins for that node",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(terminatingOn("iris1"), readyOn("iris1"), readyOn("iris2")))},
			want: map[string]want{a: owned(both)}},
		{name: "local, endpoints only on a node without speaker: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris3")))},
			want: map[string]want{a: none(ReasonNoLocalEndpoint)}},
		{name: "local, endpoint without nodeName: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("")))},
			want: map[string]want{a: none(ReasonNoLocalEndpoint)}},
		{name: "local, no endpoint at all: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), local, endpoints())},
			want: map[string]want{a: none(ReasonNoEndpoints)}},
		{name: "cluster, no endpoint at all: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), endpoints())},
			want: map[string]want{a: none(ReasonNoEndpoints)}},
		{name: "cluster, no endpoint ready: nobody",
			view: v, services: []Service{mkSvc("ns/a", ips(a), endpoints(notReadyOn("iris1"), notReadyOn("iris2")))},
			want: map[string]want{a: none(ReasonNoEndpoints)}},
		{name: "cluster, one ready endpoint on iris1: every speaker is a candidate",
			view: v, services: []Service{mkSvc("ns/a", ips(a), endpoints(readyOn("iris1"), notReadyOn("iris2")))},
			want: map[string]want{a: owned(both)}},
		{name: "cluster, ready endpoint on a node without speaker: every speaker is a candidate",
			view: v, services: []Service{mkSvc("ns/a", ips(a), endpoints(readyOn("iris9")))},
			want: map[string]want{a: owned(both)}},
		{name: "cluster, only terminating serving endpoints: announced",
			view: v, services: []Service{mkSvc("ns/a", ips(a), endpoints(terminatingOn("iris1")))},
			want: map[string]want{a: owned(both)}},
		{name: "two local services, endpoints on both hosts: each IP by its own hash",
			view: v, services: []Service{
				mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris1"), readyOn("iris2"))),
				mkSvc("ns/b", ips("10.20.30.2"), local, endpoints(readyOn("iris1"), readyOn("iris2"))),
			},
			want: map[string]want{a: owned(both), "10.20.30.2": owned(hashOrder("10.20.30.2", "iris1", "iris2"))}},
		{name: "two local services, one not ready on iris2: that one stays off iris2",
			view: v, services: []Service{
				mkSvc("ns/a", ips(a), local, endpoints(readyOn("iris1"), readyOn("iris2"))),
				mkSvc("ns/b", ips("10.20.30.2"), local, endpoints(readyOn("iris1"), notReadyOn("iris2"))),
			},
			want: map[string]want{a: owned(both), "10.20.30.2": owned(ranked("10.20.30.2", tier("iris1")))}},
	})
}
