package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testkit"
)

// tenantService asks for ip with a sharing key on one TCP port.
func tenantService(ip, sharingKey string, port int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationAllowSharedIP: sharingKey}
		if ip != "" {
			s.Annotations[heraldv1.AnnotationLoadBalancerIPs] = ip
		}
		s.Spec.Ports = []corev1.ServicePort{{Name: "p", Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}}
	}
}

// refusal waits for the one AllocationFailed Event of a Service and returns its note
// with ip replaced by "IP", so that refusals of different IPs compare.
func (h *harness) refusal(namespace, name, ip string) string {
	h.t.Helper()
	h.waitEvent(namespace, name, "AllocationFailed", ip)
	notes := h.events(namespace, name, "AllocationFailed")
	return strings.ReplaceAll(notes[0], ip, "IP")
}

// A tenant cannot take another tenant's IP by copying its sharing key, and the refusal
// tells nothing of the other tenant: it reads as that of an IP outside the tenant's
// pools. A pool that allows sharing across namespaces lets them share.
func TestTenantCannotShareAnotherNamespacesIP(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.40.0/28")
	h.pool("team-a-only", func(p *heraldv1.IPAddressPool) {
		p.Spec.AllocateTo = &heraldv1.ServiceAllocation{Namespaces: []string{"team-a"}}
	}, "10.0.41.0/29")
	h.pool("shared", func(p *heraldv1.IPAddressPool) {
		auto := false
		p.Spec.AutoAssign, p.Spec.AllowCrossNamespaceSharing = &auto, true
	}, "10.0.42.0/29")
	h.startController(defaultOptions())

	h.service("team-a/web", tenantService("10.0.40.10", "a-key", 443))
	h.waitIPs("team-a/web", "10.0.40.10")
	h.service("team-b/copycat", tenantService("10.0.40.10", "a-key", 8080))
	h.service("team-b/fenced", tenantService("10.0.41.3", "a-key", 8080))
	h.service("team-b/outside", tenantService("10.0.99.1", "a-key", 8080))

	held := h.refusal("team-b", "copycat", "10.0.40.10")
	fenced := h.refusal("team-b", "fenced", "10.0.41.3")
	outside := h.refusal("team-b", "outside", "10.0.99.1")
	if held != fenced || held != outside {
		t.Errorf("refusals differ:\n held by team-a: %s\n in team-a's pool: %s\n outside every pool: %s", held, fenced, outside)
	}
	for _, secret := range []string{"team-a", "web", "a-key", "443"} {
		if strings.Contains(held, secret) {
			t.Errorf("team-b's Event %q tells %q", held, secret)
		}
	}
	h.stayNoIP("team-b/copycat", time.Second)
	h.waitIPs("team-a/web", "10.0.40.10")

	h.service("team-a/shared-web", tenantService("10.0.42.2", "s-key", 443))
	h.waitIPs("team-a/shared-web", "10.0.42.2")
	h.service("team-b/shared-api", func(s *corev1.Service) {
		tenantService("", "s-key", 8080)(s)
		s.Annotations[heraldv1.AnnotationAddressPool] = "shared"
	})
	h.waitIPs("team-b/shared-api", "10.0.42.2")

	// The pool stops allowing it: team-a keeps its IP, team-b's Service moves.
	shared := h.getPool("shared")
	h.update(shared, func() { shared.Spec.AllowCrossNamespaceSharing = false })
	testkit.Eventually(h.t, waitFor, poll, "team-b/shared-api leaves team-a's IP", func() error {
		if got := ips(h.getService("team-b/shared-api")); len(got) != 1 || got[0] == "10.0.42.2" {
			return fmt.Errorf("has %v", got)
		}
		return nil
	})
	h.waitIPs("team-a/shared-web", "10.0.42.2")
}

// Two tenants' Services showing the same IP in their status (shared under an older
// herald, or written while no controller ran): at start the older keeps it, the other
// namespace's Service moves, and its Event does not name the holder.
func TestTenantsDuplicateAtStart(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.43.0/29")
	web := h.service("team-a/web", tenantService("", "a-key", 443))
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	copycat := h.service("team-b/copycat", tenantService("", "a-key", 8080))
	for _, s := range []*corev1.Service{copycat, web} {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.43.3"}}
		if err := h.c.Status().Update(h.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	h.startController(defaultOptions())
	h.waitIPs("team-a/web", "10.0.43.3")
	testkit.Eventually(h.t, waitFor, poll, "team-b/copycat leaves team-a's IP", func() error {
		if got := ips(h.getService("team-b/copycat")); len(got) != 1 || got[0] == "10.0.43.3" {
			return fmt.Errorf("has %v", got)
		}
		return nil
	})
	h.waitEvent("team-b", "copycat", "IPAllocated", "10.0.43.3")
	for _, n := range h.events("team-b", "copycat", "IPAllocated") {
		for _, secret := range []string{"team-a", "web", "a-key", "443"} {
			if strings.Contains(n, secret) {
				t.Errorf("team-b's Event %q tells %q", n, secret)
			}
		}
	}
}
