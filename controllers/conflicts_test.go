package controllers_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
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
	h.eventually(fmt.Sprintf("pool %s in use %d, available %d, conflict %d", pool, inUse, available, conflict), func() string {
		st := h.getPool(pool).Status
		if st.InUse == inUse && st.Available == available && st.Conflict == conflict &&
			st.AvailableIPv4 == available && st.ConflictIPv4 == conflict && st.ConflictIPv6 == 0 {
			return ""
		}
		return fmt.Sprintf("status %+v", st)
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
// reason IPConflict) go to no new Service, automatically or on request; a Service
// holding one keeps it; once the conflict clears the address is given out again, to a
// Service that waited for it or to a new one.
func TestConflictingAddresses(t *testing.T) {
	h := newHarness(t)
	h.pool("lan", nil, "10.0.9.0-10.0.9.2")
	// Known before the controller starts: a Service was deleted while its IP was in
	// conflict, and the object outlived it.
	printer := h.vipStatus("default", "10.0.9.0", heraldv1.VIPReasonIPConflict)
	h.startController(defaultOptions())

	h.service("a", nil)
	h.waitIPs("a", "10.0.9.1")
	h.waitPoolCounts("lan", 1, 1, 1)
	for state, want := range map[string]float64{"in_use": 1, "available": 1, "conflict": 1} {
		if got := gauge(t, "herald_pool_addresses", map[string]string{"pool": "lan", "family": "IPv4", "state": state}); got != want {
			t.Errorf("herald_pool_addresses{state=%q} = %v, want %v", state, got, want)
		}
	}
	h.service("b", nil)
	h.waitIPs("b", "10.0.9.2")

	// Only the conflicting address is left: the Service waits, and the Event says why.
	h.service("c", nil)
	h.waitEvent("default", "c", "AllocationFailed", "the free address 10.0.9.0 is in conflict with a device on the network")
	h.stayNoIP("c", time.Second)

	// The device is gone: the waiting Service gets the address.
	h.setConflict(printer, false)
	h.waitIPs("c", "10.0.9.0")
	h.waitPoolCounts("lan", 3, 0, 0)

	// The device is back: the Service holding the address keeps it (the speakers no
	// longer announce it), and it counts as in use.
	h.setConflict(printer, true)
	h.stayIPs("c", time.Second, "10.0.9.0")
	h.waitPoolCounts("lan", 3, 0, 0)

	// Freed while in conflict, the address is withheld...
	h.delete(h.getService("c"))
	h.waitPoolCounts("lan", 2, 0, 1)
	// ...until the object goes (the garbage collector deletes it with its Services):
	// a Service created afterwards gets it.
	h.delete(printer)
	h.waitPoolCounts("lan", 2, 1, 0)
	h.service("d", nil)
	h.waitIPs("d", "10.0.9.0")

	// A request for an address in conflict is refused until the conflict clears. The
	// object is in another namespace: the controller reads them all.
	h.delete(h.getService("b"))
	h.waitPoolCounts("lan", 2, 1, 0)
	other := h.vipStatus("team-a", "10.0.9.2", heraldv1.VIPReasonIPConflict)
	h.waitPoolCounts("lan", 2, 0, 1)
	h.service("e", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.9.2" })
	h.waitEvent("default", "e", "AllocationFailed", "requested IP 10.0.9.2 is in conflict with a device on the network")
	h.stayNoIP("e", time.Second)
	h.setConflict(other, false)
	h.waitIPs("e", "10.0.9.2")
	h.waitPoolCounts("lan", 3, 0, 0)
}
