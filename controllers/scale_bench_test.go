package controllers_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const scaleServices = 5000

// BenchmarkCreate5000Services creates 5,000 LoadBalancer Services against a real
// kube-apiserver with the controller running and reports the seconds until every one
// has an external IP. Run it once: go test -run '^$' -bench 5000 -benchtime 1x.
func BenchmarkCreate5000Services(b *testing.B) {
	h := newHarness(b)
	h.pool("big", nil, "10.128.0.0/16")
	h.startController(defaultOptions())
	for i := 0; i < b.N; i++ {
		namespace := fmt.Sprintf("scale-%d", i)
		start := time.Now()
		h.createServices(namespace, scaleServices)
		createdIn := time.Since(start)
		h.waitAllAllocated(namespace, scaleServices)
		b.ReportMetric(time.Since(start).Seconds(), "s-until-all-have-IP")
		b.ReportMetric(createdIn.Seconds(), "s-to-create")
	}
}

// BenchmarkStartWith5000Pending measures the controller alone: 5,000 Services wait
// for it, then it starts; reported are the seconds from its start until all have an IP.
func BenchmarkStartWith5000Pending(b *testing.B) {
	h := newHarness(b)
	h.pool("big", nil, "10.128.0.0/16")
	for i := 0; i < b.N; i++ {
		namespace := fmt.Sprintf("pending-%d", i)
		h.createServices(namespace, scaleServices)
		start := time.Now()
		c := h.startController(defaultOptions())
		h.waitAllAllocated(namespace, scaleServices)
		b.ReportMetric(time.Since(start).Seconds(), "s-until-all-have-IP")
		c.stop()
	}
}

// createServices creates n LoadBalancer Services in a new namespace, 8 at a time.
func (h *harness) createServices(namespace string, n int) {
	h.t.Helper()
	if err := h.c.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		h.t.Fatal(err)
	}
	const creators = 8
	var wg sync.WaitGroup
	for w := range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < n; j += creators {
				s := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", j), Namespace: namespace},
					Spec: corev1.ServiceSpec{
						Type: corev1.ServiceTypeLoadBalancer,
						// Thousands of Services would exhaust the node port range.
						AllocateLoadBalancerNodePorts: ptr.To(false),
						Ports:                         []corev1.ServicePort{{Port: 80}},
					},
				}
				if err := h.c.Create(h.ctx, s); err != nil {
					h.t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// waitAllAllocated polls until all n Services of the namespace have one IP.
func (h *harness) waitAllAllocated(namespace string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var list corev1.ServiceList
		if err := h.c.List(h.ctx, &list, client.InNamespace(namespace)); err != nil {
			h.t.Fatal(err)
		}
		done := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) == 1 {
				done++
			}
		}
		if done == n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("only %d of %d Services have an IP after 10 minutes", done, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
