package controllers_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testkit"
)

// A restarted controller rebuilds its state from the Services' status before it serves
// a pending Service: every Service keeps its IP byte for byte, and a Service created
// while no controller ran gets an address nobody holds.
func TestRestartKeepsEveryIP(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "172.18.255.200-172.18.255.250")
	first := h.startController(defaultOptions())
	before := map[string][]string{}
	for i := range 12 {
		name := fmt.Sprintf("svc%d", i)
		h.service(name, nil)
		before[name] = h.waitAnyIP(name, 1)
	}
	// Free one in the middle, so a careless allocator would hand it out at once.
	h.delete(h.getService("svc3"))
	testkit.Eventually(h.t, waitFor, poll, "svc3 deleted", func() error {
		var s corev1.Service
		if err := h.c.Get(h.ctx, key("svc3"), &s); apierrors.IsNotFound(err) {
			return nil
		}
		return errors.New("still there")
	})
	delete(before, "svc3")
	time.Sleep(300 * time.Millisecond) // let the controller see the deletion
	first.stop()

	for i := range 5 {
		h.service(fmt.Sprintf("pending%d", i), nil)
	}
	h.startController(defaultOptions())
	held := map[string]string{}
	for name, want := range before {
		held[want[0]] = name
	}
	for i := range 5 {
		name := fmt.Sprintf("pending%d", i)
		got := h.waitAnyIP(name, 1)[0]
		if owner, ok := held[got]; ok {
			t.Errorf("%s got %s, which %s holds", name, got, owner)
		}
		held[got] = name
	}
	for name, want := range before {
		if got := ips(h.getService(name)); !slices.Equal(got, want) {
			t.Errorf("%s: IP changed across restart: %v -> %v", name, want, got)
		}
		if n := len(h.events("default", name, "IPAllocated")); n != 1 {
			t.Errorf("%s: %d IPAllocated events, want 1 (the restart must not reallocate)", name, n)
		}
	}
}

// Two Services showing the same IP in their status (written while no controller ran):
// the older keeps it, the younger gets another address and an Event saying why.
func TestDuplicateAtStartOldestWins(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.20.0/29")
	older := h.service("older", nil)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	younger := h.service("younger", nil)
	for _, s := range []*corev1.Service{younger, older} {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.20.3"}}
		if err := h.c.Status().Update(h.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	h.startController(defaultOptions())
	h.waitEvent("default", "younger", "IPAllocated", "older Service")
	h.waitIPs("older", "10.0.20.3")
	if got := h.waitAnyIP("younger", 1); got[0] == "10.0.20.3" {
		t.Errorf("younger kept the duplicate IP")
	}
}

// Two replicas at once: one leads, the other waits; no Service is allocated twice, and
// when the leader goes the other takes over with the same view.
func TestTwoReplicas(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "10.0.21.0/27")
	o := defaultOptions()
	o.LeaderElect = true
	a := h.startController(o)
	b := h.startController(o)
	var leader, standby *controller
	select {
	case <-a.elected:
		leader, standby = a, b
	case <-b.elected:
		leader, standby = b, a
	case <-time.After(waitFor):
		t.Fatal("no replica became leader")
	}
	select {
	case <-standby.elected:
		t.Fatal("both replicas lead")
	case <-time.After(500 * time.Millisecond):
	}
	before := map[string][]string{}
	for i := range 10 {
		name := fmt.Sprintf("svc%d", i)
		h.service(name, nil)
		before[name] = h.waitAnyIP(name, 1)
	}
	assertUnique(t, before)
	// The Event is written after the IP, by a goroutine of the leader's recorder, and a
	// stop cancels a write still in flight; wait for them all, so that the count below
	// says whether the new leader allocated again, not whether the old one was quick.
	for name := range before {
		h.waitEvent("default", name, "IPAllocated", "")
	}
	leader.stop()
	select {
	case <-standby.elected:
	case <-time.After(waitFor):
		t.Fatal("standby did not take over")
	}
	var lease coordinationv1.Lease
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: "herald-controller"}, &lease); err != nil {
		t.Fatalf("leader-election lease: %v", err)
	}
	h.service("after", nil)
	before["after"] = h.waitAnyIP("after", 1)
	assertUnique(t, before)
	for name, want := range before {
		if got := ips(h.getService(name)); !slices.Equal(got, want) {
			t.Errorf("%s changed across leader change: %v -> %v", name, want, got)
		}
		if n := len(h.events("default", name, "IPAllocated")); n != 1 {
			t.Errorf("%s: %d IPAllocated events, want 1", name, n)
		}
	}
}

func assertUnique(t *testing.T, byService map[string][]string) {
	t.Helper()
	seen := map[string]string{}
	for name, ipList := range byService {
		for _, ip := range ipList {
			if other, ok := seen[ip]; ok {
				t.Errorf("%s and %s both hold %s", name, other, ip)
			}
			seen[ip] = name
		}
	}
}

// Deleting a pool in use takes no IP away: the pool waits, Terminating, gives out
// nothing new, and goes when its last Service releases its address.
func TestPoolDeletionWhileInUse(t *testing.T) {
	h := newHarness(t)
	pool := h.pool("doomed", nil, "10.0.22.0/29")
	h.startController(defaultOptions())
	h.service("holder", nil)
	h.waitIPs("holder", "10.0.22.0")
	testkit.Eventually(h.t, waitFor, poll, "finalizer on the pool in use", func() error {
		if slices.Contains(h.getPool("doomed").Finalizers, heraldv1.PoolFinalizer) {
			return nil
		}
		return errors.New("no finalizer")
	})
	h.delete(pool)
	testkit.Eventually(h.t, waitFor, poll, "Terminating condition", func() error {
		c := meta.FindStatusCondition(h.getPool("doomed").Status.Conditions, heraldv1.ConditionReady)
		if c != nil && c.Reason == "Terminating" && c.Status == metav1.ConditionFalse {
			return nil
		}
		return fmt.Errorf("condition %+v", c)
	})
	h.service("newcomer", nil)
	h.waitEvent("default", "newcomer", "AllocationFailed", "")
	h.stayNoIP("newcomer", 500*time.Millisecond)
	h.waitIPs("holder", "10.0.22.0")

	h.delete(h.getService("holder"))
	testkit.Eventually(h.t, waitFor, poll, "pool gone after its last IP is released", func() error {
		var p heraldv1.IPAddressPool
		err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: "doomed"}, &p)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (finalizers %v)", p.Finalizers)
	})
}

// An edit that drops a Service's address from the pool does not take it away; the
// status stops counting it and new Services get addresses of the new range.
func TestPoolEditKeepsIPs(t *testing.T) {
	h := newHarness(t)
	h.pool("edited", nil, "10.0.23.0/30")
	h.startController(defaultOptions())
	h.service("keeper", nil)
	h.waitIPs("keeper", "10.0.23.0")
	p := h.getPool("edited")
	h.update(p, func() { p.Spec.Addresses = []heraldv1.AddressRange{"10.0.24.0/29"} })
	// A Service created before the controller saw the edit may still get the old
	// range; wait for the pool's counts to show the new one (8 free, keeper outside).
	testkit.Eventually(h.t, waitFor, poll, "pool counts of the edited range", func() error {
		if st := h.getPool("edited").Status; st.AvailableIPv4 != 8 {
			return fmt.Errorf("availableIPv4 %d, want 8", st.AvailableIPv4)
		}
		return nil
	})
	h.service("fresh", nil)
	h.waitIPs("fresh", "10.0.24.0")
	h.waitIPs("keeper", "10.0.23.0")
}

// Overlapping pools: the younger one is refused with a condition and an Event, the
// older one keeps serving.
func TestOverlappingPools(t *testing.T) {
	h := newHarness(t)
	h.pool("first", nil, "10.0.25.0/29")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	h.pool("second", nil, "10.0.25.4-10.0.25.20")
	h.startController(defaultOptions())
	testkit.Eventually(h.t, waitFor, poll, "Overlap condition on the younger pool", func() error {
		c := meta.FindStatusCondition(h.getPool("second").Status.Conditions, heraldv1.ConditionReady)
		if c != nil && c.Reason == "Overlap" && strings.Contains(c.Message, "first") {
			return nil
		}
		return fmt.Errorf("condition %+v", c)
	})
	h.waitEvent(ns, "second", "Overlap", "first")
	// Each pool's status is its own write: the younger one's may land first.
	testkit.Eventually(h.t, waitFor, poll, "Ready condition on the older pool", func() error {
		if c := meta.FindStatusCondition(h.getPool("first").Status.Conditions, heraldv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("older pool condition %+v, want Ready", c)
		}
		return nil
	})
	h.service("x", func(s *corev1.Service) { s.Annotations = map[string]string{heraldv1.AnnotationAddressPool: "second"} })
	h.waitEvent("default", "x", "AllocationFailed", "second")
}
