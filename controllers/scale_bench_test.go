package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/controllers"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
)

// The scale benchmarks run the controller against a real kube-apiserver and etcd.
// $HERALD_SCALE_SERVICES sets how many Services they create; 5,000 by default, which
// `make bench` runs in a few minutes on 2 cores. 50,000 takes tens of minutes: give
// go test -timeout 0. Run them once each: -benchtime 1x. docs/scale.md has figures.
const defaultScaleServices = 5000

// The pool: a /16 holds 65,536 addresses, enough for 50,000 Services.
const scalePool = "10.128.0.0/16"

func scaleServices(b *testing.B) int {
	s := os.Getenv("HERALD_SCALE_SERVICES")
	if s == "" {
		return defaultScaleServices
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 60000 {
		b.Fatalf("HERALD_SCALE_SERVICES=%q: want a count of Services from 1 to 60000 (the pool is a /16)", s)
	}
	return n
}

// BenchmarkCreateServices creates the Services while the controller runs, as a burst
// of deployments would. The creators and the controller share the 2 cores and the API
// server, so this is the figure a user sees, not the controller's own speed: see
// BenchmarkStartWithPending for that. Reported: the creation rate alone, the seconds
// from the first create until every Service has an IP, and how far the last IP lags
// behind the last create.
func BenchmarkCreateServices(b *testing.B) {
	n := scaleServices(b)
	h := newHarness(b)
	h.pool("big", nil, scalePool)
	api := newAPICounter()
	h.startControllerOn(api.wrap(h.env.Config), defaultOptions())
	for i := 0; i < b.N; i++ {
		namespace := fmt.Sprintf("scale-%d", i)
		api.reset()
		start := time.Now()
		created := h.createServices(namespace, n, 16)
		allocated := h.waitAllocated(api, n)
		h.checkAllHaveIP(namespace, n)
		b.ReportMetric(created.Sub(start).Seconds(), "s-to-create")
		b.ReportMetric(float64(n)/created.Sub(start).Seconds(), "created/s")
		b.ReportMetric(allocated.Sub(start).Seconds(), "s-until-all-have-IP")
		b.ReportMetric(allocated.Sub(created).Seconds(), "s-last-IP-after-last-create")
		api.settle()
		api.report(b, n)
	}
}

// BenchmarkStartWithPending measures the controller alone: the Services wait for it,
// then it starts and the clock runs from its start until every Service has an IP. It
// then reports what the controller holds in memory, and restarts it with all of them
// holding IPs: how long the state rebuild takes, and how soon a Service created as it
// starts gets an IP.
func BenchmarkStartWithPending(b *testing.B) {
	n := scaleServices(b)
	h := newHarness(b)
	h.pool("big", nil, scalePool)
	api := newAPICounter()
	cfg := api.wrap(h.env.Config)
	for i := 0; i < b.N; i++ {
		namespace := fmt.Sprintf("pending-%d", i)
		createStart := time.Now()
		// Before the controller starts, creating is only the setup: as many creators as
		// keep the API server busy (each create waits on its ClusterIP allocation).
		created := h.createServices(namespace, n, 64)
		b.ReportMetric(float64(n)/created.Sub(createStart).Seconds(), "created/s")

		baseHeap := testkit.HeapInUse()
		api.reset()
		apiserverBefore := h.apiserverWrites()
		start := time.Now()
		c := h.startControllerOn(cfg, defaultOptions())
		allocated := h.waitAllocated(api, n)
		took := allocated.Sub(start)
		b.ReportMetric(took.Seconds(), "s-until-all-have-IP")
		b.ReportMetric(float64(n)/took.Seconds(), "allocated/s")
		b.ReportMetric(controllers.LastLoadTook().Seconds(), "s-rebuild-at-start")
		h.checkAllHaveIP(namespace, n)
		api.settle()
		api.report(b, n)
		b.ReportMetric(float64(h.apiserverWrites()-apiserverBefore)/float64(n), "apiserver-writes/alloc")
		// The event recorder keeps each Event for 6 minutes (client-go's series
		// window), so this is the heap right after a burst.
		b.ReportMetric(testkit.MiB(testkit.HeapInUse()-baseHeap), "MiB-heap-after-allocating")
		c.stop()

		// Restart: every Service holds an IP; one more is created as the controller
		// starts, and must wait for no more than the rebuild.
		baseHeap = testkit.HeapInUse()
		api.reset()
		start = time.Now()
		c = h.startControllerOn(cfg, defaultOptions())
		h.service(namespace+"/late", func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) })
		served := h.waitAllocated(api, 1)
		b.ReportMetric(served.Sub(start).Seconds(), "s-restart-to-new-IP")
		b.ReportMetric(controllers.LastLoadTook().Seconds(), "s-rebuild-at-restart")
		// The controller goes on confirming the n Services it restored; none of that
		// may write to them: the count is the new Service's own writes.
		api.settle()
		b.ReportMetric(float64(api.count("PATCH services")), "service-writes-at-restart")
		b.ReportMetric(testkit.MiB(testkit.HeapInUse()-baseHeap), "MiB-heap-after-restart")
		c.stop()

		// The informers' share: a cache of Services and Namespaces alone.
		baseHeap = testkit.HeapInUse()
		stopCache := h.startServiceCache()
		b.ReportMetric(testkit.MiB(testkit.HeapInUse()-baseHeap), "MiB-heap-service-informer")
		stopCache()
	}
}

// startServiceCache runs a controller-runtime cache of Services and Namespaces, the
// objects the controller caches by the thousand, and returns how to stop it.
func (h *harness) startServiceCache() func() {
	h.t.Helper()
	c, err := cache.New(h.env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.Namespace{}} {
		if _, err := c.GetInformer(h.ctx, obj); err != nil {
			h.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		h.t.Fatal("the Service cache did not sync")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Error(err)
		}
	}
}

// createServices creates n LoadBalancer Services in a new namespace with that many
// concurrent creators, each with its own client (and rate limiter), and returns when
// the last create returned.
func (h *harness) createServices(namespace string, n, creators int) time.Time {
	h.t.Helper()
	if err := h.c.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		h.t.Fatal(err)
	}
	err := testenv.Parallel(h.env.Config, creators, n, func(c client.Client, j int) error {
		return c.Create(h.ctx, testkit.LBService(namespace, fmt.Sprintf("s%d", j), testkit.WithoutNodePorts()))
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return time.Now()
}

// waitAllocated waits until the controller's status writes to n distinct Services
// since the last reset have succeeded, and returns when the last of them returned:
// the moment the API server held every IP. Watching the controller's own transport
// costs nothing; listing tens of thousands of Services over and over would load the
// API server more than the controller being measured.
func (h *harness) waitAllocated(api *apiCounter, n int) time.Time {
	h.t.Helper()
	limit := max(10*time.Minute, time.Duration(n)*100*time.Millisecond)
	deadline := time.Now().Add(limit)
	for {
		got, last := api.statusWritten()
		if got >= n {
			return last
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("only %d of %d Services were given an IP in %s", got, n, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkAllHaveIP lists the namespace's Services, a page at a time, and fails unless all
// n have one IP.
func (h *harness) checkAllHaveIP(namespace string, n int) {
	h.t.Helper()
	done, total := 0, 0
	opts := []client.ListOption{client.InNamespace(namespace), client.Limit(2000)}
	for cont := ""; ; {
		var list corev1.ServiceList
		if err := h.c.List(h.ctx, &list, append(opts, client.Continue(cont))...); err != nil {
			h.t.Fatal(err)
		}
		for _, s := range list.Items {
			total++
			if len(s.Status.LoadBalancer.Ingress) == 1 {
				done++
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	if done != n || total != n {
		h.t.Fatalf("%d of %d Services have an IP (want all %d)", done, total, n)
	}
}

// apiCounter counts the requests the controller sends, by verb and resource, at its
// HTTP transport: the manager's client and its event recorder both go through it.
type apiCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// statusOf are the Services whose status the controller wrote, and lastStatus when
	// the newest of them was first written.
	statusOf   map[string]bool
	lastStatus time.Time
}

func newAPICounter() *apiCounter {
	return &apiCounter{counts: map[string]int{}, statusOf: map[string]bool{}}
}

// statusWritten tells how many distinct Services' status the controller wrote since
// reset, and when it first wrote the newest of them.
func (a *apiCounter) statusWritten() (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.statusOf), a.lastStatus
}

func (a *apiCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, counter: a} })
	return cfg
}

type countingTransport struct {
	next    http.RoundTripper
	counter *apiCounter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	resource := resourceOf(req.URL.Path)
	key := req.Method + " " + resource
	ok := err == nil && resp.StatusCode < 300
	if !ok {
		key += " (failed)"
	}
	a := t.counter
	a.mu.Lock()
	a.counts[key]++
	if ok && req.Method != http.MethodGet && resource == "services/status" && !a.statusOf[req.URL.Path] {
		a.statusOf[req.URL.Path] = true
		a.lastStatus = time.Now()
	}
	a.mu.Unlock()
	return resp, err
}

// resourceOf turns /api/v1/namespaces/x/services/y/status into services/status and
// /apis/events.k8s.io/v1/namespaces/x/events into events.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return path
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// count sums the requests whose key starts with prefix (e.g. "PATCH services").
func (a *apiCounter) count(prefix string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for k, v := range a.counts {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}

func (a *apiCounter) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.counts)
	clear(a.statusOf)
}

func isWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	return verb != http.MethodGet
}

// writes counts the write requests since reset, failed ones too.
func (a *apiCounter) writes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for k, v := range a.counts {
		if isWrite(k) {
			total += v
		}
	}
	return total
}

// settle waits until the controller has written nothing for 2 seconds (Events are
// sent in the background, pool status trails the allocations), at most a minute.
func (a *apiCounter) settle() {
	last, quiet := a.writes(), time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if w := a.writes(); w != last {
			last, quiet = w, time.Now()
		} else if time.Since(quiet) > 2*time.Second {
			return
		}
	}
}

// report gives the writes per allocation, in all and by verb and resource, and logs
// every count (reads too).
func (a *apiCounter) report(b *testing.B, allocations int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.counts))
	total := 0
	for k, v := range a.counts {
		keys = append(keys, k)
		if isWrite(k) {
			total += v
		}
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%s: %d", k, a.counts[k]))
		if isWrite(k) {
			b.ReportMetric(float64(a.counts[k])/float64(allocations), strings.ReplaceAll(strings.ReplaceAll(k, " ", "-"), "/", "-")+"/alloc")
		}
	}
	b.ReportMetric(float64(total)/float64(allocations), "writes/alloc")
	b.Logf("controller requests for %d allocations:\n%s", allocations, strings.Join(lines, "\n"))
}

// apiserverWrites sums the API server's own count (apiserver_request_total) of PATCH,
// PUT and DELETE requests on Services and IPAddressPools, and of every write of Events:
// a check on the controller-side count that needs no trust in it. The benchmarks' own
// writes are POSTs of Services, which it leaves out.
func (h *harness) apiserverWrites() int {
	h.t.Helper()
	m, err := testenv.APIServerMetrics(h.env.Config)
	if err != nil {
		h.t.Fatal(err)
	}
	return int(m.Sum("apiserver_request_total", func(l map[string]string) bool {
		modifies := l["verb"] == "PATCH" || l["verb"] == "PUT" || l["verb"] == "DELETE"
		switch l["resource"] {
		case "events":
			return modifies || l["verb"] == "POST"
		case "services", "ipaddresspools":
			return modifies
		}
		return false
	}))
}
