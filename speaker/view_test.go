package speaker

import (
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/poolapi"
	"herald.dev/herald/internal/testkit"
)

func TestBuildViewServices(t *testing.T) {
	other := testkit.LBService("default", "other-class", testkit.Ingress("10.0.0.9"))
	other.Spec.LoadBalancerClass = ptr.To("example.com/lb")
	ours := testkit.LBService("default", "our-class", testkit.Ingress("10.0.0.8"))
	ours.Spec.LoadBalancerClass = ptr.To("herald.dev/lb")
	clusterIP := testkit.LBService("default", "cluster-ip", testkit.Ingress("10.0.0.7"))
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	local := testkit.LBService("default", "local", testkit.Ingress("10.0.0.2", "fd00::2"))
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	in := Inputs{
		LBClass: "herald.dev/lb",
		Services: []*corev1.Service{
			testkit.LBService("default", "plain", testkit.Ingress("10.0.0.1")), local,
			testkit.LBService("default", "pending"), testkit.LBService("default", "bad-ip", testkit.Ingress("10.0.0.300")),
			other, ours, clusterIP,
		},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local-abc",
				Labels: map[string]string{discoveryv1.LabelServiceName: "local"}},
			Endpoints: []discoveryv1.Endpoint{
				{NodeName: ptr.To("w1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{NodeName: ptr.To("w2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true)}},
			},
		}, {
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unlabelled"},
			Endpoints:  []discoveryv1.Endpoint{{NodeName: ptr.To("w3")}},
		}},
	}
	in.Pools = []*heraldv1.IPAddressPool{addressPool("pool1", time.Unix(0, 0), "10.0.0.0/24", "fd00::/120")}
	in.PoolOf = poolapi.Index(in.Pools).PoolOf
	_, svcs, problems := BuildView(in)
	got := map[string]int{}
	for i, s := range svcs {
		got[s.Key] = i
	}
	for _, want := range []string{"default/plain", "default/local", "default/our-class"} {
		if _, ok := got[want]; !ok {
			t.Errorf("%s missing from the election", want)
		}
	}
	for _, unwanted := range []string{"default/pending", "default/other-class", "default/cluster-ip", "default/bad-ip"} {
		if _, ok := got[unwanted]; ok {
			t.Errorf("%s should not be in the election", unwanted)
		}
	}
	if len(problems) != 1 || !strings.Contains(problems[0].String(), "Service/default/bad-ip: status.loadBalancer.ingress[0].ip") {
		t.Errorf("problems = %v, want the bad IP of bad-ip named", problems)
	}
	l := svcs[got["default/local"]]
	if !l.Local || l.Pool != "pool1" || len(l.IPs) != 2 || l.IPs[1] != netip.MustParseAddr("fd00::2") {
		t.Errorf("local = %+v", l)
	}
	if len(l.Endpoints) != 2 || l.Endpoints[0].Node != "w1" || !*l.Endpoints[0].Ready || *l.Endpoints[1].Ready {
		t.Errorf("local endpoints = %+v", l.Endpoints)
	}
}

// addressPool is an IPAddressPool named name, created at created, holding addrs.
func addressPool(name string, created time.Time, addrs ...string) *heraldv1.IPAddressPool {
	p := &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	for _, a := range addrs {
		p.Spec.Addresses = append(p.Spec.Addresses, heraldv1.AddressRange(a))
	}
	return p
}

// The pool of a Service's IP, which decides the advertisements that announce it, comes
// from the IP and the pools: an annotation naming another pool (its owner may write
// any) changes nothing, and an IP no pool holds has no pool.
func TestBuildViewPoolFromIP(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pools := []*heraldv1.IPAddressPool{
		addressPool("tenant", t0, "10.0.1.0/24"),
		addressPool("infra", t0, "10.0.2.0/24"),
		// Younger and overlapping "tenant": disabled, so tenant's addresses stay tenant's.
		addressPool("late", t0.Add(time.Minute), "10.0.1.128/25", "10.0.3.0/24"),
	}
	annotated := func(name, ip string, annotations ...string) *corev1.Service {
		s := testkit.LBService("default", name, testkit.Ingress(ip))
		s.Annotations = map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			s.Annotations[annotations[i]] = annotations[i+1]
		}
		return s
	}
	in := Inputs{
		Services: []*corev1.Service{
			annotated("claims-infra", "10.0.1.5", heraldv1.AnnotationAllocatedFromPool, "infra"),
			annotated("claims-infra-metallb", "10.0.1.6", "metallb.universe.tf/ip-allocated-from-pool", "infra"),
			annotated("overlap", "10.0.1.200", heraldv1.AnnotationAllocatedFromPool, "late"),
			annotated("only-late", "10.0.3.1"),
			annotated("outside", "10.9.9.9", heraldv1.AnnotationAllocatedFromPool, "tenant"),
		},
		Pools: pools,
	}
	in.PoolOf = poolapi.Index(in.Pools).PoolOf
	_, svcs, _ := BuildView(in)
	got := map[string]string{}
	for _, s := range svcs {
		got[strings.TrimPrefix(s.Key, "default/")] = s.Pool
	}
	want := map[string]string{
		"claims-infra": "tenant", "claims-infra-metallb": "tenant", "overlap": "tenant",
		"only-late": "late", "outside": "",
	}
	if !maps.Equal(got, want) {
		t.Errorf("pools = %v, want %v", got, want)
	}
}

func TestBuildViewNodesAndAdvertisements(t *testing.T) {
	in := Inputs{
		Nodes: []*corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "w1"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "w2"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}}}},
		},
		Pools: []*heraldv1.IPAddressPool{
			{ObjectMeta: metav1.ObjectMeta{Name: "gold", Labels: map[string]string{"tier": "gold"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "silver", Labels: map[string]string{"tier": "silver"}}},
		},
		Advertisements: []*heraldv1.L2Advertisement{
			{ObjectMeta: metav1.ObjectMeta{Name: "all"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "gold-by-label"}, Spec: heraldv1.L2AdvertisementSpec{
				IPAddressPools:         []string{"bronze"},
				IPAddressPoolSelectors: []heraldv1.LabelSelector{{MatchLabels: map[string]heraldv1.LabelValue{"tier": "gold"}}},
				Interfaces:             []string{"eth1"},
			}},
			{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: heraldv1.L2AdvertisementSpec{
				NodeSelectors: []heraldv1.LabelSelector{{MatchExpressions: []heraldv1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}},
			}},
		},
	}
	v, _, problems := BuildView(in)
	if len(v.Nodes) != 2 || v.Nodes[0].NetworkUnavailable || !v.Nodes[1].NetworkUnavailable {
		t.Errorf("nodes = %+v", v.Nodes)
	}
	if len(v.Advertisements) != 2 {
		t.Fatalf("advertisements = %+v, want all and gold-by-label", v.Advertisements)
	}
	if a := v.Advertisements[0]; !a.AllPools {
		t.Errorf("ad without pools: %+v, want AllPools", a)
	}
	if a := v.Advertisements[1]; a.AllPools || strings.Join(a.Pools, ",") != "bronze,gold" || a.Interfaces[0] != "eth1" {
		t.Errorf("gold-by-label = %+v, want pools bronze,gold on eth1", a)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].String(), "L2Advertisement//bad: spec.nodeSelectors[0]") {
		t.Errorf("problems = %v, want the bad node selector named", problems)
	}
}

func TestPeerAddrs(t *testing.T) {
	node := func(name string, addrs ...string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
		return n
	}
	nodes := []corev1.Node{node("self", "172.18.0.3"), node("w2", "fc00::4", "172.18.0.4"), node("w3", "172.18.0.5"), node("nodeip")}
	got := strings.Join(peerAddrs(nodes, "self", "172.18.0.3", 7946), " ")
	if got != "172.18.0.4:7946 172.18.0.5:7946" {
		t.Errorf("v4 peers = %q", got)
	}
	got = strings.Join(peerAddrs(nodes, "self", "fc00::3", 0), " ")
	if got != "[fc00::4]:7946" {
		t.Errorf("v6 peers = %q", got)
	}
}

func TestNodeIPs(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
		{Type: corev1.NodeInternalIP, Address: "172.18.0.9"},
		{Type: corev1.NodeInternalIP, Address: "fc00::3"},
		{Type: corev1.NodeInternalIP, Address: "fc00::4"},
	}}}
	got := nodeIPs(n, "172.18.0.3")
	want := []netip.Addr{netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("fc00::3")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("nodeIPs = %v, want %v (bind address first, one per family, InternalIPs only)", got, want)
	}
	if got := nodeIPs(&corev1.Node{}, "fc00::5"); len(got) != 1 || got[0] != netip.MustParseAddr("fc00::5") {
		t.Errorf("nodeIPs without a Node = %v", got)
	}
}

func TestElectionSeesNodeChanges(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"zone": "a"}}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	heartbeat := node.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	if electionSees(node, heartbeat) {
		t.Error("a kubelet's status heartbeat runs an election")
	}
	relabelled := node.DeepCopy()
	relabelled.Labels["zone"] = "b"
	if !electionSees(node, relabelled) {
		t.Error("a label change runs no election")
	}
	netDown := node.DeepCopy()
	netDown.Status.Conditions = append(netDown.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue})
	if !electionSees(node, netDown) {
		t.Error("NetworkUnavailable=True runs no election")
	}
}

func TestLeavingReason(t *testing.T) {
	taint := func(key string) corev1.Taint { return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule} }
	for _, c := range []struct {
		spec corev1.NodeSpec
		want string
	}{
		{corev1.NodeSpec{}, ""},
		{corev1.NodeSpec{Taints: []corev1.Taint{taint("node.kubernetes.io/not-ready")}}, ""},
		{corev1.NodeSpec{Unschedulable: true}, "cordoned"},
		{corev1.NodeSpec{Taints: []corev1.Taint{taint("node.kubernetes.io/out-of-service")}}, "tainted node.kubernetes.io/out-of-service"},
		{corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{taint("ToBeDeletedByClusterAutoscaler")}}, "tainted ToBeDeletedByClusterAutoscaler"},
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: c.spec}
		if got := nodeView(n).Leaving; got != c.want {
			t.Errorf("%+v: Leaving %q, want %q", c.spec, got, c.want)
		}
	}
	ready := func(status corev1.ConditionStatus, msg string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, Reason: "KubeletNotReady", Message: msg}}}}
	}
	// The kubelet's Ready condition during a graceful node shutdown; other NotReady
	// reasons are no shutdown.
	if got := leavingReason(ready(corev1.ConditionFalse, "[container runtime status check may not have completed yet, node is shutting down]")); got != "shutting down" {
		t.Errorf("node shutting down: Leaving %q", got)
	}
	if got := leavingReason(ready(corev1.ConditionFalse, "container runtime network not ready")); got != "" {
		t.Errorf("network not ready: Leaving %q, want none", got)
	}
}
