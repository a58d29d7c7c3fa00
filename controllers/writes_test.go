package controllers_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// One allocation is one write to the Service, the status and the pool annotation
// together, and one Event; releasing is one write and one Event. The API server keeps
// the annotation of a Service status write (its status strategy only guards the spec):
// if a new Kubernetes stopped doing so, this test says so, and the controller falls back
// to a second write.
func TestAllocationIsOneServiceWrite(t *testing.T) {
	h := newHarness(t)
	h.pool("default", nil, "172.18.255.200-172.18.255.250")
	api := newAPICounter()
	h.startControllerOn(api.wrap(h.env.Config), defaultOptions())
	svc := h.service("web", nil)
	h.waitIPs("web", "172.18.255.200")
	h.waitEvent("default", "web", "IPAllocated", "172.18.255.200")
	if got := h.getService("web").Annotations[heraldv1.AnnotationAllocatedFromPool]; got != "default" {
		t.Errorf("%s=%q, want default", heraldv1.AnnotationAllocatedFromPool, got)
	}
	api.settle()
	want := map[string]int{"PATCH services/status": 1, "POST events": 1}
	checkServiceWrites(t, api, want)

	api.reset()
	h.update(svc, func() { svc.Spec.Type = corev1.ServiceTypeClusterIP })
	h.waitIPs("web")
	h.waitEvent("default", "web", "IPReleased", "172.18.255.200")
	if got, ok := h.getService("web").Annotations[heraldv1.AnnotationAllocatedFromPool]; ok {
		t.Errorf("%s=%q after release, want none", heraldv1.AnnotationAllocatedFromPool, got)
	}
	api.settle()
	checkServiceWrites(t, api, want)
}

// checkServiceWrites compares the writes to Services and Events with want.
func checkServiceWrites(t *testing.T, api *apiCounter, want map[string]int) {
	t.Helper()
	api.mu.Lock()
	defer api.mu.Unlock()
	got := map[string]int{}
	for k, v := range api.counts {
		if isWrite(k) && (strings.Contains(k, " services") || strings.Contains(k, " events")) {
			got[k] = v
		}
	}
	if len(got) != len(want) {
		t.Errorf("writes %v, want %v", got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("writes %v, want %v", got, want)
			return
		}
	}
}
