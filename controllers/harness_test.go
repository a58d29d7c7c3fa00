package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers"
	"herald.dev/herald/internal/metricsserve"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
)

const (
	ns      = "herald-system"
	waitFor = 30 * time.Second
	poll    = 50 * time.Millisecond
)

func init() {
	log.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
}

// harness is a real kube-apiserver and etcd plus helpers to drive herald's controller.
type harness struct {
	t   testing.TB
	env *testenv.Env
	c   client.Client
	ctx context.Context
}

func newHarness(t testing.TB) *harness {
	env := testenv.Start(t)
	h := &harness{t: t, env: env, c: env.Client, ctx: context.Background()}
	for _, n := range []string{ns, "team-a", "team-b"} {
		if err := h.c.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"team": n}}}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func defaultOptions() controllers.ManagerOptions {
	return controllers.ManagerOptions{
		Options:          controllers.Options{Namespace: ns, LBClass: "herald.dev/lb", ServiceWorkers: 4},
		Metrics:          metricsserve.Config{BindAddress: "0"},
		SeveralInProcess: true,
		LeaseDuration:    2 * time.Second,
		RenewDeadline:    1500 * time.Millisecond,
		RetryPeriod:      200 * time.Millisecond,
	}
}

// controller is one running controller process (a manager).
type controller struct {
	stop    func()
	done    chan error
	elected <-chan struct{}
}

// startController runs a controller until stop is called or the test ends.
func (h *harness) startController(o controllers.ManagerOptions) *controller {
	h.t.Helper()
	return h.startControllerOn(h.env.Config, o)
}

// startControllerOn runs a controller that reaches the API server with cfg (e.g. one
// that counts its requests).
func (h *harness) startControllerOn(cfg *rest.Config, o controllers.ManagerOptions) *controller {
	h.t.Helper()
	mgr, err := controllers.NewManager(cfg, o)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	c := &controller{done: make(chan error, 1), elected: mgr.Elected()}
	go func() { c.done <- mgr.Start(ctx) }()
	stopped := false
	c.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-c.done; err != nil {
			h.t.Errorf("controller: %v", err)
		}
	}
	h.t.Cleanup(c.stop)
	return c
}

func (h *harness) pool(name string, mutate func(*heraldv1.IPAddressPool), addrs ...string) *heraldv1.IPAddressPool {
	h.t.Helper()
	p := &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for _, a := range addrs {
		p.Spec.Addresses = append(p.Spec.Addresses, heraldv1.AddressRange(a))
	}
	if mutate != nil {
		mutate(p)
	}
	if err := h.c.Create(h.ctx, p); err != nil {
		h.t.Fatalf("creating pool %s: %v", name, err)
	}
	return p
}

// service creates a LoadBalancer Service in namespace "default" (unless mutate moves it).
func (h *harness) service(name string, mutate func(*corev1.Service)) *corev1.Service {
	h.t.Helper()
	k := key(name)
	s := testkit.LBService(k.Namespace, k.Name, testkit.Selecting("app", k.Name), testkit.TargetPort(8080))
	if mutate != nil {
		mutate(s)
	}
	if err := h.c.Create(h.ctx, s); err != nil {
		h.t.Fatalf("creating service %s: %v", name, err)
	}
	return s
}

func key(name string) types.NamespacedName {
	if ns, n, ok := strings.Cut(name, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: n}
	}
	return types.NamespacedName{Namespace: "default", Name: name}
}

func (h *harness) getService(name string) *corev1.Service {
	h.t.Helper()
	var s corev1.Service
	if err := h.c.Get(h.ctx, key(name), &s); err != nil {
		h.t.Fatalf("get service %s: %v", name, err)
	}
	return &s
}

func ips(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// waitIPs waits until the Service has exactly want as external IPs.
func (h *harness) waitIPs(name string, want ...string) {
	h.t.Helper()
	testkit.Eventually(h.t, waitFor, poll, "service "+name+" IPs", func() error {
		got := ips(h.getService(name))
		if slices.Equal(got, want) {
			return nil
		}
		return fmt.Errorf("has %v, want %v", got, want)
	})
}

// waitAnyIP waits until the Service has n external IPs and returns them.
func (h *harness) waitAnyIP(name string, n int) []string {
	h.t.Helper()
	var got []string
	testkit.Eventually(h.t, waitFor, poll, "service "+name+" gets an IP", func() error {
		got = ips(h.getService(name))
		if len(got) == n {
			return nil
		}
		return fmt.Errorf("has %v", got)
	})
	return got
}

// waitEvent waits for an Event about the object with the reason and a note containing text.
func (h *harness) waitEvent(namespace, name, reason, text string) {
	h.t.Helper()
	testkit.Eventually(h.t, waitFor, poll, fmt.Sprintf("event %s on %s/%s containing %q", reason, namespace, name, text), func() error {
		notes := h.events(namespace, name, reason)
		for _, n := range notes {
			if strings.Contains(n, text) {
				return nil
			}
		}
		return fmt.Errorf("events with that reason: %q", notes)
	})
}

func (h *harness) events(namespace, name, reason string) []string {
	var list eventsv1.EventList
	if err := h.c.List(h.ctx, &list, client.InNamespace(namespace)); err != nil {
		h.t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// stayNoIP checks for a while that the Service gets no IP.
func (h *harness) stayNoIP(name string, d time.Duration) {
	h.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(poll) {
		if got := ips(h.getService(name)); len(got) > 0 {
			h.t.Fatalf("service %s got %v, want no IP", name, got)
		}
	}
}

func (h *harness) getPool(name string) *heraldv1.IPAddressPool {
	h.t.Helper()
	var p heraldv1.IPAddressPool
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
		h.t.Fatalf("get pool %s: %v", name, err)
	}
	return &p
}

func (h *harness) delete(obj client.Object) {
	h.t.Helper()
	if err := h.c.Delete(h.ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatalf("delete %s: %v", obj.GetName(), err)
	}
}

func (h *harness) update(obj client.Object, mutate func()) {
	h.t.Helper()
	for range 10 {
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			h.t.Fatal(err)
		}
		mutate()
		err := h.c.Update(h.ctx, obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			h.t.Fatalf("update %s: %v", obj.GetName(), err)
		}
	}
	h.t.Fatalf("update %s: conflicts", obj.GetName())
}
