package election

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestElectNodes follows MetalLB's TestShouldAnnounceFromNodes: which live nodes may be
// candidates (membership, NetworkUnavailable, the exclude label, nodeSelectors).
func TestElectNodes(t *testing.T) {
	const a = "172.18.255.200"
	svc := []Service{mkSvc("ns/a", ips(a))}
	l2 := ads(allPools("l2"))
	three := []Node{mkNode("worker"), mkNode("worker2"), mkNode("worker3")}
	all := hashOrder(a, "worker", "worker2", "worker3")

	withMembers := func(v View, members ...string) View { v.Members = members; return v }
	ignoring := func(v View) View { v.IgnoreExcludeLabel = true; return v }

	runElect(t, []electCase{
		{name: "every live node is a candidate",
			view: view(l2, three...), services: svc,
			want: map[string]want{a: owned(all)}},
		{name: "a node that is not a live member is not a candidate",
			view: withMembers(view(l2, three...), "worker", "worker3"), services: svc,
			want: map[string]want{a: owned(hashOrder(a, "worker", "worker3"))}},
		{name: "a member without Node object is not a candidate",
			view: withMembers(view(l2, three...), "worker", "worker2", "worker3", "ghost"), services: svc,
			want: map[string]want{a: owned(all)}},
		{name: "members listed twice count once",
			view: withMembers(view(l2, three...), "worker", "worker", "worker2", "worker3", ""), services: svc,
			want: map[string]want{a: owned(all)}},
		{name: "no live member: nobody",
			view: withMembers(view(l2, three...)), services: svc,
			want: map[string]want{a: none(ReasonNoLiveSpeaker)}},
		{name: "only members without Node: nobody",
			view: withMembers(view(l2, three...), "ghost"), services: svc,
			want: map[string]want{a: none(ReasonNoLiveSpeaker)}},
		{name: "NetworkUnavailable node is not a candidate",
			view: view(l2, mkNode("worker"), mkNode("worker2", unavailable), mkNode("worker3")), services: svc,
			want: map[string]want{a: owned(hashOrder(a, "worker", "worker3"))}},
		{name: "all NetworkUnavailable: nobody",
			view: view(l2, mkNode("worker", unavailable), mkNode("worker2", unavailable)), services: svc,
			want: map[string]want{a: none(ReasonNetworkUnavailable)}},
		{name: "excluded node is not a candidate, whatever the label value",
			view: view(l2, mkNode("worker", excluded), mkNode("worker2", label(ExcludeLabel, "true")), mkNode("worker3")), services: svc,
			want: map[string]want{a: owned(ranked(a, tier("worker3")))}},
		{name: "a label with a similar name does not exclude",
			view: view(l2, mkNode("worker", label("node.kubernetes.io/exclude-from-external-load-balancer", ""))), services: svc,
			want: map[string]want{a: owned([]string{"worker"})}},
		{name: "all excluded: nobody",
			view: view(l2, mkNode("worker", excluded), mkNode("worker2", excluded)), services: svc,
			want: map[string]want{a: none(ReasonExcluded)}},
		{name: "all excluded but the label is ignored: everybody",
			view: ignoring(view(l2, mkNode("worker", excluded), mkNode("worker2", excluded))), services: svc,
			want: map[string]want{a: owned(hashOrder(a, "worker", "worker2"))}},
		{name: "ignoring the label does not ignore NetworkUnavailable",
			view: ignoring(view(l2, mkNode("worker", excluded, unavailable), mkNode("worker2", excluded))), services: svc,
			want: map[string]want{a: owned([]string{"worker2"})}},
		{name: "nodeSelectors restrict the candidates",
			view: view(ads(mkAd("l2", []string{"default"}, onNodes("kubernetes.io/hostname=worker2"))), three...), services: svc,
			want: map[string]want{a: owned([]string{"worker2"})}},
		{name: "nodeSelectors of one ad are OR-ed",
			view: view(ads(mkAd("l2", []string{"default"}, onNodes("kubernetes.io/hostname=worker2", "kubernetes.io/hostname=worker3"))), three...), services: svc,
			want: map[string]want{a: owned(hashOrder(a, "worker2", "worker3"))}},
		{name: "nodeSelectors by set expression",
			view: view(ads(mkAd("l2", []string{"default"}, onNodes("zone in (a,b)"))),
				mkNode("worker", label("zone", "a")), mkNode("worker2", label("zone", "c")), mkNode("worker3", label("zone", "b"))), services: svc,
			want: map[string]want{a: owned(hashOrder(a, "worker", "worker3"))}},
		{name: "two ads for the pool: the union of their nodes",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, onNodes("kubernetes.io/hostname=worker")),
				mkAd("l2-b", []string{"default"}, onNodes("kubernetes.io/hostname=worker3"))), three...), services: svc,
			want: map[string]want{a: owned(hashOrder(a, "worker", "worker3"))}},
		{name: "an ad of another pool does not add nodes",
			view: view(ads(
				mkAd("l2-a", []string{"default"}, onNodes("kubernetes.io/hostname=worker")),
				mkAd("l2-b", []string{"other"})), three...), services: svc,
			want: map[string]want{a: owned([]string{"worker"})}},
		{name: "nodeSelectors matching no live node: nobody",
			view: view(ads(mkAd("l2", []string{"default"}, onNodes("kubernetes.io/hostname=worker9"))), three...), services: svc,
			want: map[string]want{a: none(ReasonNotSelected)}},
		{name: "selected node excluded: nobody",
			view: view(ads(mkAd("l2", []string{"default"}, onNodes("kubernetes.io/hostname=worker"))), mkNode("worker", excluded), mkNode("worker2")), services: svc,
			want: map[string]want{a: none(ReasonNotSelected)}},
		{name: "NodeSelectors nil or empty: every node",
			view: view(ads(
				Advertisement{Name: "l2-nil", Pools: []string{"default"}, NodeSelectors: nil},
				Advertisement{Name: "l2-empty", Pools: []string{"default"}, NodeSelectors: sels()}), three...), services: svc,
			want: map[string]want{a: owned(all)}},
		{name: "a list holding only a nil selector selects no node",
			view: view(ads(Advertisement{Name: "l2", Pools: []string{"default"}, NodeSelectors: make([]labels.Selector, 1)}), three...), services: svc,
			want: map[string]want{a: none(ReasonNotSelected)}},
		{name: "local: the selected node without endpoint is skipped",
			view:     view(ads(mkAd("l2", []string{"default"}, onNodes("kubernetes.io/hostname in (worker,worker2)"))), three...),
			services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("worker2"), readyOn("worker3")))},
			want:     map[string]want{a: owned([]string{"worker2"})}},
		{name: "local: endpoints only on unselected nodes: nobody",
			view:     view(ads(mkAd("l2", []string{"default"}, onNodes("kubernetes.io/hostname=worker"))), three...),
			services: []Service{mkSvc("ns/a", ips(a), local, endpoints(readyOn("worker2"), readyOn("worker3")))},
			want:     map[string]want{a: none(ReasonNoLocalEndpoint)}},
	})
}

// TestDuplicateNodes: a name listed twice keeps its least eligible entry, in any order.
func TestDuplicateNodes(t *testing.T) {
	const a = "10.0.0.1"
	svc := []Service{mkSvc("ns/a", ips(a))}
	for _, tc := range []struct {
		name string
		x, y Node
		want want
	}{
		{"NetworkUnavailable wins", mkNode("w"), mkNode("w", unavailable), none(ReasonNetworkUnavailable)},
		{"excluded wins", mkNode("w"), mkNode("w", excluded), none(ReasonExcluded)},
		// "kubernetes.io/hostname=w,zone=a" sorts first: that entry is kept, and selected.
		{"labels decide otherwise", mkNode("w", label("zone", "a")), mkNode("w", label("zone", "b")), owned([]string{"w"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l2 := ads(mkAd("l2", []string{"default"}, onNodes("zone!=b")))
			for _, order := range [][]Node{{tc.x, tc.y}, {tc.y, tc.x}} {
				v := View{Members: []string{"w"}, Nodes: order, Advertisements: l2}
				checkDecision(t, Elect(v, svc)[0], tc.want)
			}
		})
	}
}
