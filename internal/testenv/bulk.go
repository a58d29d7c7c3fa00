package testenv

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/scheme"
)

// Parallel runs f(c, i) for every i in [0, n) on workers goroutines, each with a client
// of its own (and so a client-side rate limiter of its own), as the benchmarks that
// create thousands of objects need. It returns the first error; a worker stops at its
// first.
func Parallel(cfg *rest.Config, workers, n int, f func(c client.Client, i int) error) error {
	clients := make([]client.Client, workers)
	for w := range clients {
		c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			return err
		}
		clients[w] = c
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := f(c, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// LoadBalancerService is a LoadBalancer Service of one TCP port, 80, without node
// ports: thousands of Services would exhaust the node port range.
func LoadBalancerService(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Ports:                         []corev1.ServicePort{{Port: 80}},
		},
	}
}
