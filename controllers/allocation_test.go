package controllers_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testkit"
)

// The walkthrough: a fresh pool hands out its addresses in order, each Service gets an
// Event, the pool annotation and the pool's status follow.
func TestAllocateInOrderWithEventsAndStatus(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "172.18.255.200-172.18.255.250")
	h.startController(defaultOptions())
	for i, name := range []string{"svc1", "svc2", "svc3"} {
		h.service(name, nil)
		want := fmt.Sprintf("172.18.255.%d", 200+i)
		h.waitIPs(name, want)
		h.waitEvent("default", name, "IPAllocated", want)
		if got := h.getService(name).Annotations[heraldv1.AnnotationAllocatedFromPool]; got != "default" {
			t.Errorf("%s: %s=%q, want default", name, heraldv1.AnnotationAllocatedFromPool, got)
		}
	}
	testkit.Eventually(h.t, waitFor, poll, "pool status counts", func() error {
		st := h.getPool("default").Status
		if st.InUse == 3 && st.Available == 48 && st.AssignedIPv4 == 3 && st.AvailableIPv4 == 48 {
			return nil
		}
		return fmt.Errorf("status %+v", st)
	})
	if got := gauge(t, "herald_pool_addresses", map[string]string{"pool": "default", "family": "IPv4", "state": "in_use"}); got != 3 {
		t.Errorf("herald_pool_addresses{in_use} = %v, want 3", got)
	}
	if got := gauge(t, "herald_pool_addresses", map[string]string{"pool": "default", "family": "IPv4", "state": "available"}); got != 48 {
		t.Errorf("herald_pool_addresses{available} = %v, want 48", got)
	}
	for i, name := range []string{"svc1", "svc2", "svc3"} {
		labels := map[string]string{"ip": fmt.Sprintf("172.18.255.%d", 200+i), "service": "default/" + name, "pool": "default"}
		if got := gauge(t, "herald_service_ip_info", labels); got != 1 {
			t.Errorf("herald_service_ip_info%v = %v, want 1", labels, got)
		}
	}
	if got := gauge(t, "herald_allocations_total", map[string]string{"result": "allocated"}); got < 3 {
		t.Errorf("herald_allocations_total{allocated} = %v, want >= 3", got)
	}
	p := h.getPool("default")
	if c := meta.FindStatusCondition(p.Status.Conditions, heraldv1.ConditionReady); c == nil || c.Status != "True" {
		t.Errorf("Ready condition = %+v, want True", c)
	}
	if !strings.Contains(strings.Join(p.Finalizers, ","), heraldv1.PoolFinalizer) {
		t.Errorf("pool in use lacks finalizer %s: %v", heraldv1.PoolFinalizer, p.Finalizers)
	}
}

// Requests: spec.loadBalancerIP, the loadBalancerIPs annotation, the pool annotation,
// autoAssign=false, and an IP outside every pool (Warning, no IP, others unaffected).
func TestRequestedIPsAndPools(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.1.0/29")
	h.pool("manual", func(p *heraldv1.IPAddressPool) { p.Spec.AutoAssign = ptr.To(false) }, "10.0.2.0/29")
	h.startController(defaultOptions())

	h.service("by-spec", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.1.5" })
	h.service("by-annotation", func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationLoadBalancerIPs: "10.0.2.3"}
	})
	h.service("by-pool", func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationAddressPool: "manual"}
	})
	h.service("outside", func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationLoadBalancerIPs: "192.0.2.1"}
	})
	h.service("auto", nil)
	h.waitIPs("by-spec", "10.0.1.5")
	h.waitIPs("by-annotation", "10.0.2.3")
	h.waitIPs("by-pool", "10.0.2.0")
	h.waitIPs("auto", "10.0.1.0")
	h.waitEvent("default", "outside", "AllocationFailed", "192.0.2.1")
	h.stayNoIP("outside", time.Second)

	// Changing the request is the Service asking: it moves.
	h.update(h.getService("by-spec"), func() {})
	svc := h.getService("by-spec")
	h.update(svc, func() { svc.Spec.LoadBalancerIP = "10.0.1.6" })
	h.waitIPs("by-spec", "10.0.1.6")
	// Asking for an IP another Service holds, without a sharing key, fails and says who.
	h.service("taker", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.1.6" })
	h.waitEvent("default", "taker", "AllocationFailed", "default/by-spec")
	h.waitIPs("by-spec", "10.0.1.6")
	// Once the holder lets go, the waiting Service gets it without being touched.
	h.delete(h.getService("by-spec"))
	h.waitIPs("taker", "10.0.1.6")
}

// Sharing: same key and disjoint ports share one IP; overlapping ports or a different
// traffic policy do not.
func TestSharing(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.3.0/29")
	h.startController(defaultOptions())
	shared := func(port int32, etp corev1.ServiceExternalTrafficPolicy) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{heraldv1.AnnotationAllowSharedIP: "web"}
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Spec.Ports[0].Port = port
			s.Spec.ExternalTrafficPolicy = etp
		}
	}
	h.service("http", shared(80, corev1.ServiceExternalTrafficPolicyCluster))
	ip := h.waitAnyIP("http", 1)[0]
	h.service("https", shared(443, corev1.ServiceExternalTrafficPolicyCluster))
	h.waitIPs("https", ip)
	h.service("http-again", shared(80, corev1.ServiceExternalTrafficPolicyCluster))
	if got := h.waitAnyIP("http-again", 1)[0]; got == ip {
		t.Errorf("http-again shares %s although port 80 is taken there", ip)
	}
	h.service("local", shared(8443, corev1.ServiceExternalTrafficPolicyLocal))
	if got := h.waitAnyIP("local", 1)[0]; got == ip {
		t.Errorf("a Local Service shares %s with Cluster ones", ip)
	}
	// Asking for the shared IP with a conflicting port is refused with the reason.
	h.service("clash", func(s *corev1.Service) {
		shared(443, corev1.ServiceExternalTrafficPolicyCluster)(s)
		s.Spec.LoadBalancerIP = ip
	})
	h.waitEvent("default", "clash", "AllocationFailed", "443")
	// The IP stays while one sharer holds it.
	h.delete(h.getService("http"))
	h.service("late", nil)
	if got := h.waitAnyIP("late", 1)[0]; got == ip {
		t.Errorf("late got %s, still held by https", ip)
	}
	h.waitIPs("https", ip)
	testkit.Eventually(h.t, waitFor, poll, "pool counts the shared IP once", func() error {
		if st := h.getPool("default").Status; st.InUse != 4 {
			return fmt.Errorf("inUse %d, want 4 (https, http-again, local, late)", st.InUse)
		}
		return nil
	})
}

// Dual-stack from ipFamilyPolicy: both families from one pool.
func TestDualStack(t *testing.T) {
	h := newHarness(t)
	h.pool("v4only", nil, "10.0.4.0/30")
	h.pool("dual", nil, "10.0.5.0/30", "fd00:5::/126")
	h.startController(defaultOptions())
	require := corev1.IPFamilyPolicyRequireDualStack
	prefer := corev1.IPFamilyPolicyPreferDualStack
	h.service("both", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &require
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	})
	h.waitIPs("both", "10.0.5.0", "fd00:5::")
	h.service("v6first", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &prefer
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	})
	h.waitIPs("v6first", "fd00:5::1", "10.0.5.1")
	h.service("v6", func(s *corev1.Service) {
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	})
	h.waitIPs("v6", "fd00:5::2")
	h.service("v4", nil)
	// Without serviceAllocation, pools are tried by name: "dual" before "v4only".
	h.waitIPs("v4", "10.0.5.2")
}

// Services of another loadBalancerClass are ignored; herald's own class is served.
func TestLoadBalancerClass(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.6.0/29")
	h.startController(defaultOptions())
	h.service("other", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") })
	h.service("ours", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("herald.dev/lb") })
	h.service("unclassed", nil)
	h.waitAnyIP("ours", 1)
	h.waitAnyIP("unclassed", 1)
	h.stayNoIP("other", time.Second)
	if ev := h.events("default", "other", "AllocationFailed"); len(ev) > 0 {
		t.Errorf("a Service of another class got events: %v", ev)
	}
}

// Exhaustion: the Service waits with a Warning and gets the IP freed by a deletion
// without anyone touching it; a type change releases too.
func TestExhaustionThenRelease(t *testing.T) {
	h := newHarness(t)
	h.pool("small", nil, "10.0.7.0/31")
	h.startController(defaultOptions())
	h.service("a", nil)
	h.waitIPs("a", "10.0.7.0")
	h.service("b", nil)
	h.waitIPs("b", "10.0.7.1")
	h.service("c", nil)
	h.waitEvent("default", "c", "AllocationFailed", "no available IPs")
	h.stayNoIP("c", 500*time.Millisecond)

	h.delete(h.getService("a"))
	h.waitIPs("c", "10.0.7.0")

	b := h.getService("b")
	h.update(b, func() { b.Spec.Type = corev1.ServiceTypeClusterIP; b.Spec.Ports[0].NodePort = 0 })
	h.waitIPs("b")
	h.waitEvent("default", "b", "IPReleased", "10.0.7.1")
	if _, ok := h.getService("b").Annotations[heraldv1.AnnotationAllocatedFromPool]; ok {
		t.Errorf("ClusterIP Service keeps the pool annotation")
	}
	h.service("d", nil)
	h.waitIPs("d", "10.0.7.1")
}

// serviceAllocation: namespaces, namespace selectors, service selectors and priority.
func TestServiceAllocation(t *testing.T) {
	h := newHarness(t)
	h.pool("general", nil, "10.0.8.0/30")
	h.pool("team-a-low", func(p *heraldv1.IPAddressPool) {
		p.Spec.AllocateTo = &heraldv1.ServiceAllocation{Priority: 20, Namespaces: []string{"team-a"}}
	}, "10.0.9.0/30")
	h.pool("team-a-high", func(p *heraldv1.IPAddressPool) {
		p.Spec.AllocateTo = &heraldv1.ServiceAllocation{Priority: 10,
			NamespaceSelectors: []heraldv1.LabelSelector{{MatchLabels: map[string]heraldv1.LabelValue{"team": "team-a"}}}}
	}, "10.0.10.0/30")
	h.pool("web-only", func(p *heraldv1.IPAddressPool) {
		p.Spec.AllocateTo = &heraldv1.ServiceAllocation{
			ServiceSelectors: []heraldv1.LabelSelector{{MatchLabels: map[string]heraldv1.LabelValue{"tier": "web"}}}}
	}, "10.0.11.0/30")
	h.startController(defaultOptions())
	h.service("team-a/api", nil)
	h.waitIPs("team-a/api", "10.0.10.0")
	h.service("team-b/api", nil)
	h.waitIPs("team-b/api", "10.0.8.0")
	h.service("team-b/web", func(s *corev1.Service) { s.Labels = map[string]string{"tier": "web"} })
	h.waitIPs("team-b/web", "10.0.11.0")
	// A restricted pool refuses an explicit request from a Service it does not match.
	h.service("team-b/sneaky", func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationAddressPool: "team-a-high"}
	})
	h.waitEvent("team-b", "sneaky", "AllocationFailed", "team-a-high")
	// Relabelling its namespace admits it: the Namespace watch retries it.
	var nsObj corev1.Namespace
	nsObj.Name = "team-b"
	h.update(&nsObj, func() { nsObj.Labels["team"] = "team-a" })
	h.waitIPs("team-b/sneaky", "10.0.10.1")
}

// A freed address goes back to the Services only after every never-used one, least
// recently freed first, so a deleted Service's IP is not handed to the next at once.
func TestFreedAddressesAreReusedLast(t *testing.T) {
	h := newHarness(t)
	h.pool("p", nil, "10.0.12.0/29")
	h.startController(defaultOptions())
	for i, name := range []string{"a", "b", "c"} {
		h.service(name, nil)
		h.waitIPs(name, fmt.Sprintf("10.0.12.%d", i))
	}
	h.delete(h.getService("b")) // frees .1 first
	testkit.Eventually(h.t, waitFor, poll, "b's address released", func() error {
		if h.getPool("p").Status.InUse == 2 {
			return nil
		}
		return errors.New("still counted")
	})
	h.delete(h.getService("a")) // then .0
	testkit.Eventually(h.t, waitFor, poll, "a's address released", func() error {
		if h.getPool("p").Status.InUse == 1 {
			return nil
		}
		return errors.New("still counted")
	})
	for i, name := range []string{"d", "e", "f", "g", "h"} {
		h.service(name, nil)
		h.waitIPs(name, fmt.Sprintf("10.0.12.%d", 3+i))
	}
	h.service("i", nil)
	h.waitIPs("i", "10.0.12.1")
	h.service("j", nil)
	h.waitIPs("j", "10.0.12.0")
}

// gauge reads one sample of a herald metric from the controller's registry.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s%v not registered", name, labels)
	return 0
}
