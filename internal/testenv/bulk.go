package testenv

import (
	"sync"

	"k8s.io/client-go/rest"
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
