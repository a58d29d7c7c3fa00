package controllers_test

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testkit"
)

func annotate(kv ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// MetalLB's annotation names, under either prefix, ask for the same things as herald's.
func TestMetalLBAnnotationsAreAliases(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.30.0/29")
	h.pool("manual", func(p *heraldv1.IPAddressPool) { p.Spec.AutoAssign = new(false) }, "10.0.31.0/29")
	h.startController(defaultOptions())

	h.service("legacy-ip", annotate("metallb.universe.tf/loadBalancerIPs", "10.0.30.5"))
	h.service("new-ip", annotate("metallb.io/loadBalancerIPs", "10.0.31.3"))
	h.service("legacy-pool", annotate("metallb.universe.tf/address-pool", "manual"))
	h.service("new-pool", annotate("metallb.io/address-pool", "manual"))
	h.waitIPs("legacy-ip", "10.0.30.5")
	h.waitIPs("new-ip", "10.0.31.3")
	for _, name := range []string{"legacy-pool", "new-pool"} {
		got := h.waitAnyIP(name, 1)
		if got[0] < "10.0.31.0" || got[0] > "10.0.31.7" {
			t.Errorf("%s got %s, want an IP of pool manual", name, got[0])
		}
		if p := h.getService(name).Annotations[heraldv1.AnnotationAllocatedFromPool]; p != "manual" {
			t.Errorf("%s: %s=%q, want manual", name, heraldv1.AnnotationAllocatedFromPool, p)
		}
	}

	sharing := func(key string, port int32) func(*corev1.Service) {
		return func(s *corev1.Service) {
			annotate(key, "web")(s)
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Spec.Ports[0].Port = port
		}
	}
	h.service("share-legacy", sharing("metallb.universe.tf/allow-shared-ip", 80))
	ip := h.waitAnyIP("share-legacy", 1)[0]
	h.service("share-new", sharing("metallb.io/allow-shared-ip", 443))
	h.service("share-herald", sharing(heraldv1.AnnotationAllowSharedIP, 8443))
	h.waitIPs("share-new", ip)
	h.waitIPs("share-herald", ip)

	// An error about an annotation names the one the Service set.
	h.service("bad-ip", annotate("metallb.universe.tf/loadBalancerIPs", "not-an-ip"))
	h.waitEvent("default", "bad-ip", "AllocationFailed", `annotation metallb.universe.tf/loadBalancerIPs="not-an-ip"`)
	h.service("bad-share", func(s *corev1.Service) {
		annotate("metallb.io/allow-shared-ip", "other", "metallb.io/loadBalancerIPs", ip)(s)
		s.Spec.Ports[0].Port = 9000
	})
	h.waitEvent("default", "bad-share", "AllocationFailed", "need the same non-empty metallb.io/allow-shared-ip key")
}

// herald's name wins over MetalLB's, and the Service is told so once per change of its
// annotations, not on every reconcile.
func TestHeraldAnnotationWinsWithOneWarning(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.32.0/29")
	h.startController(defaultOptions())
	h.service("both", annotate(heraldv1.AnnotationLoadBalancerIPs, "10.0.32.2", "metallb.universe.tf/loadBalancerIPs", "10.0.32.3"))
	h.waitIPs("both", "10.0.32.2")
	h.waitEvent("default", "both", "AnnotationConflict",
		`annotation herald.dev/loadBalancerIPs="10.0.32.2" is used; ignored: metallb.universe.tf/loadBalancerIPs="10.0.32.3"`)

	// Reconciles that change nothing in the annotations give no further Warning.
	for i := range 3 {
		svc := h.getService("both")
		h.update(svc, func() { svc.Labels = map[string]string{"touch": string(rune('a' + i))} })
	}
	time.Sleep(time.Second)
	if n := len(h.events("default", "both", "AnnotationConflict")); n != 1 {
		t.Errorf("%d AnnotationConflict events after unrelated updates, want 1", n)
	}

	// Another conflicting value is news.
	svc := h.getService("both")
	h.update(svc, func() { svc.Annotations["metallb.io/loadBalancerIPs"] = "10.0.32.4" })
	h.waitEvent("default", "both", "AnnotationConflict", `metallb.io/loadBalancerIPs="10.0.32.4"`)
	h.waitIPs("both", "10.0.32.2")
}

// A Service MetalLB served, with MetalLB's annotations and the IP MetalLB wrote into its
// status, keeps that IP when herald's controller starts. The pools overlap (MetalLB
// allowed it when its webhook was off); the pool the Service asks for lost the overlap,
// and MetalLB's record of the pool still lets herald see the IP came from it.
func TestMetalLBServiceKeepsItsIPAtStart(t *testing.T) {
	h := newHarness(t)
	h.pool("first", nil, "10.0.33.0/28")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	h.pool("second", nil, "10.0.33.8/29")
	fromMetalLB := func(pool, ip string, extra ...string) func(*corev1.Service) {
		return annotate(append([]string{
			"metallb.universe.tf/address-pool", pool,
			"metallb.universe.tf/ip-allocated-from-pool", pool,
		}, extra...)...)
	}
	served := map[string]string{
		"in-second":  "10.0.33.9",
		"in-first":   "10.0.33.3",
		"requested":  "10.0.33.12",
		"no-annots":  "10.0.33.5",
		"new-prefix": "10.0.33.13",
	}
	h.service("in-second", fromMetalLB("second", served["in-second"]))
	h.service("in-first", fromMetalLB("first", served["in-first"]))
	h.service("requested", annotate("metallb.universe.tf/loadBalancerIPs", served["requested"],
		"metallb.universe.tf/ip-allocated-from-pool", "second"))
	h.service("no-annots", nil)
	h.service("new-prefix", annotate("metallb.io/address-pool", "second", "metallb.io/ip-allocated-from-pool", "second"))
	for name, ip := range served {
		svc := h.getService(name)
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if err := h.c.Status().Update(h.ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	h.service("newcomer", nil) // created while MetalLB was gone and herald not yet there

	h.startController(defaultOptions())
	got := h.waitAnyIP("newcomer", 1)[0]
	for name, ip := range served {
		if got == ip {
			t.Errorf("newcomer got %s, which %s holds", got, name)
		}
	}
	testkit.Eventually(h.t, waitFor, poll, "herald records the pools", func() error {
		if p := h.getService("in-second").Annotations[heraldv1.AnnotationAllocatedFromPool]; p != "second" {
			return errors.New("in-second: pool " + p)
		}
		return nil
	})
	for name, ip := range served {
		if ips := ips(h.getService(name)); len(ips) != 1 || ips[0] != ip {
			t.Errorf("%s: IP %v after herald started, want %s", name, ips, ip)
		}
		if n := len(h.events("default", name, "AllocationFailed")); n != 0 {
			t.Errorf("%s: %d AllocationFailed events, want none", name, n)
		}
	}
}
