package controllers_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testkit"
)

// waitCondition waits until the pool's condition of type has status and a message
// containing every one of texts.
func (h *harness) waitCondition(pool, typ string, status metav1.ConditionStatus, texts ...string) {
	h.t.Helper()
	testkit.Eventually(h.t, waitFor, poll, "pool "+pool+" condition "+typ+" "+string(status)+" naming "+strings.Join(texts, ", "), func() error {
		c := meta.FindStatusCondition(h.getPool(pool).Status.Conditions, typ)
		if c == nil {
			return errors.New("no such condition")
		}
		if c.Status != status {
			return errors.New("condition " + c.Reason + ": " + c.Message)
		}
		for _, t := range texts {
			if !strings.Contains(c.Message, t) {
				return errors.New("condition " + c.Reason + ": " + c.Message)
			}
		}
		return nil
	})
}

// A pool over a node's address, its pod CIDR or the Service CIDR gives none of those
// out, and its status says which and why; an address the cluster stops using is given
// out again.
func TestReservedClusterAddresses(t *testing.T) {
	h := newHarness(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.0.41.0/31"}}}
	if err := h.c.Create(h.ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.40.3"}, {Type: corev1.NodeHostName, Address: "w1"}}
	if err := h.c.Status().Update(h.ctx, node); err != nil {
		t.Fatal(err)
	}
	h.pool("lan", nil, "10.0.40.0/30", "10.0.41.0/30")
	// Inside the API server's Service CIDR (its ServiceCIDR object "kubernetes").
	h.pool("clusterips", nil, "10.96.0.10-10.96.0.11")
	h.startController(defaultOptions())

	for _, name := range []string{"a", "b", "c", "d", "e"} {
		h.service(name, func(s *corev1.Service) {
			s.Annotations = map[string]string{heraldv1.AnnotationAddressPool: "lan"}
		})
	}
	got := map[string]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		got[h.waitAnyIP(name, 1)[0]] = true
	}
	for _, ip := range []string{"10.0.40.0", "10.0.40.1", "10.0.40.2", "10.0.41.2", "10.0.41.3"} {
		if !got[ip] {
			t.Errorf("the five Services hold %v, not %s", got, ip)
		}
	}
	f := h.service("f", func(s *corev1.Service) {
		s.Annotations = map[string]string{heraldv1.AnnotationAddressPool: "lan"}
	})
	h.waitEvent("default", "f", "AllocationFailed", `no available IPs in pool "lan"`)
	h.stayNoIP("f", time.Second)
	// f would wait for any address of lan, and take the one freed below if its retry
	// ran before that of the Service asking for it.
	h.delete(f)
	h.service("asks", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.40.3" })
	h.waitEvent("default", "asks", "AllocationFailed", "requested IP 10.0.40.3 is reserved: InternalIP of node w1")
	h.waitCondition("lan", heraldv1.ConditionReservedAddresses, metav1.ConditionTrue,
		"10.0.40.3 (InternalIP of node w1)", "10.0.41.0/31 (pod CIDR of node w1)")
	h.waitEvent(ns, "lan", "AddressesReserved", "10.0.40.3 (InternalIP of node w1)")
	h.waitCondition("lan", heraldv1.ConditionReady, metav1.ConditionTrue)
	h.waitCondition("clusterips", heraldv1.ConditionReady, metav1.ConditionFalse, "every address of the pool is reserved")
	h.waitCondition("clusterips", heraldv1.ConditionReservedAddresses, metav1.ConditionTrue, "10.96.0.10/31 (Service CIDR 10.96.0.0/16)")

	// The node's address changes: its old one is given to the Service that asked for it.
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.50.3"}}
	if err := h.c.Status().Update(h.ctx, node); err != nil {
		t.Fatal(err)
	}
	h.waitIPs("asks", "10.0.40.3")
	testkit.Eventually(h.t, waitFor, poll, "lan no longer names the node's old address", func() error {
		if c := meta.FindStatusCondition(h.getPool("lan").Status.Conditions, heraldv1.ConditionReservedAddresses); c != nil && strings.Contains(c.Message, "10.0.40.3") {
			return errors.New(c.Message)
		}
		return nil
	})
}
