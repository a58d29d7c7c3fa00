package controllers_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testkit"
)

// vipStatus publishes, as a speaker would, the VIPStatus of ip in namespace with the
// given reason. The CRD has no status subresource: status is written with the object.
func (h *harness) vipStatus(namespace, ip, reason string) *heraldv1.VIPStatus {
	h.t.Helper()
	v := &heraldv1.VIPStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: heraldv1.VIPStatusName(netip.MustParseAddr(ip))},
		Status:     heraldv1.VIPStatusStatus{IP: ip, Reason: reason},
	}
	if reason == heraldv1.VIPReasonIPConflict {
		v.Status.Message = ip + " is claimed by 02:00:00:00:00:01 on eth0, a device that is not a herald speaker"
	}
	if err := h.c.Create(h.ctx, v); err != nil {
		h.t.Fatalf("creating VIPStatus %s/%s: %v", namespace, v.Name, err)
	}
	return v
}

// setConflict turns the VIPStatus's reason to IPConflict, or back to an owner.
func (h *harness) setConflict(v *heraldv1.VIPStatus, conflict bool) {
	h.t.Helper()
	h.update(v, func() {
		v.Status.Node, v.Status.Reason, v.Status.Message = "w1", "", ""
		if conflict {
			v.Status.Node, v.Status.Reason, v.Status.Message = "", heraldv1.VIPReasonIPConflict, "claimed by a printer"
		}
	})
}

// waitPoolCounts waits until the pool's status shows these IPv4 counts.
func (h *harness) waitPoolCounts(pool string, inUse, available, conflict int64) {
	h.t.Helper()
	testkit.Eventually(h.t, waitFor, poll, fmt.Sprintf("pool %s in use %d, available %d, conflict %d", pool, inUse, available, conflict), func() error {
		st := h.getPool(pool).Status
		if st.InUse == inUse && st.Available == available && st.Conflict == conflict &&
			st.AvailableIPv4 == available && st.ConflictIPv4 == conflict && st.ConflictIPv6 == 0 {
			return nil
		}
		return fmt.Errorf("status %+v", st)
	})
}

// stayIPs checks for a while that the Service keeps exactly want.
func (h *harness) stayIPs(name string, d time.Duration, want ...string) {
	h.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(poll) {
		if got := ips(h.getService(name)); fmt.Sprint(got) != fmt.Sprint(want) {
			h.t.Fatalf("service %s has %v, want %v", name, got, want)
		}
	}
}

// Addresses that the speakers found claimed by a device on the network (VIPStatus
// reason IPConflict, in the namespace of the Services holding the IP) go to no new
// Service: a request to share one fails; the Service holding one keeps it; once the
// conflict clears, or its holders give it up, the address is given out again. A claim
// from a namespace that does not hold the IP counts for nothing.
func TestConflictingAddresses(t *testing.T) {
	h := newHarness(t)
	h.pool("lan", nil, "10.0.9.0-10.0.9.2")
	shared := annotate(heraldv1.AnnotationAllowSharedIP, "k")
	// Known before the controller starts: a Service holds 10.0.9.0, which a device
	// claims.
	holder := h.service("holder", shared)
	holder.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.9.0"}}
	if err := h.c.Status().Update(h.ctx, holder); err != nil {
		t.Fatal(err)
	}
	printer := h.vipStatus("default", "10.0.9.0", heraldv1.VIPReasonIPConflict)
	// A tenant's own claims on addresses it does not hold: one free, one held by
	// another namespace's Service.
	h.vipStatus("team-a", "10.0.9.2", heraldv1.VIPReasonIPConflict)
	h.vipStatus("team-a", "10.0.9.0", heraldv1.VIPReasonIPConflict)
	h.startController(defaultOptions())
	h.waitIPs("holder", "10.0.9.0")
	h.waitPoolCounts("lan", 1, 2, 0) // held and claimed: counted in use

	// A Service that would share the address is refused while the conflict lasts.
	h.service("sharer", func(s *corev1.Service) {
		shared(s)
		s.Spec.LoadBalancerIP = "10.0.9.0"
		s.Spec.Ports[0].Port = 81
	})
	h.waitEvent("default", "sharer", "AllocationFailed", "requested IP 10.0.9.0 is in conflict with a device on the network")
	h.stayNoIP("sharer", time.Second)

	// The device is gone: the waiting Service shares the address.
	h.setConflict(printer, false)
	h.waitIPs("sharer", "10.0.9.0")

	// The device is back: the Services holding the address keep it.
	h.setConflict(printer, true)
	h.stayIPs("holder", time.Second, "10.0.9.0")
	h.stayIPs("sharer", time.Second, "10.0.9.0")
	for state, want := range map[string]float64{"in_use": 1, "available": 2, "conflict": 0} {
		if got := gauge(t, "herald_pool_addresses", map[string]string{"pool": "lan", "family": "IPv4", "state": state}); got != want {
			t.Errorf("herald_pool_addresses{state=%q} = %v, want %v", state, got, want)
		}
	}

	// team-a's claim on 10.0.9.2, which it does not hold, withholds nothing.
	h.service("a", nil)
	h.service("b", nil)
	h.waitIPs("a", "10.0.9.1")
	h.waitIPs("b", "10.0.9.2")
	h.waitPoolCounts("lan", 3, 0, 0)

	// The holders give the address up: default's claim no longer counts (only team-a's
	// is left), and the next Service gets the address.
	h.delete(h.getService("sharer"))
	h.delete(h.getService("holder"))
	h.waitPoolCounts("lan", 2, 1, 0)
	h.service("c", nil)
	h.waitIPs("c", "10.0.9.0")
}
