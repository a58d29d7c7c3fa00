package vipstatus

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/election"
)

// The publisher against a real kube-apiserver: the owner creates the object with an
// owner reference the API server accepts, a new owner counts a leader change, the
// reporter writes why nobody announces the IP, and deletes the object once no
// LoadBalancer Service holds the IP.
func TestPublisherWritesVIPStatus(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()

	svc := &corev1.Service{
		// The annotation is the Service owner's to edit: the published pool is not read
		// from it.
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "svc1",
			Annotations: map[string]string{heraldv1.AnnotationAllocatedFromPool: "other"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: vip1.String()}}
	if err := env.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}

	// Each speaker has its own informers, as in a cluster.
	speaker := func(name string) *Publisher {
		c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		p := NewPublisher(name, c, env.Client, testr.New(t).WithName(name))
		p.grace = time.Second
		if err := p.Watch(ctx, c); err != nil {
			t.Fatal(err)
		}
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			t.Fatal("cache not synced")
		}
		go p.Run(ctx, 1)
		return p
	}
	w1, w2 := speaker("w1"), speaker("w2")

	key := client.ObjectKey{Namespace: "default", Name: "ip-172-18-255-200"}
	expect := func(what string, ok func(*heraldv1.VIPStatus) error) *heraldv1.VIPStatus {
		t.Helper()
		var obj heraldv1.VIPStatus
		testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, what, func() error {
			if err := env.Client.Get(ctx, key, &obj); err != nil {
				return err
			}
			return ok(&obj)
		})
		return &obj
	}
	owns := func(p *Publisher, at time.Time, mac string) {
		p.Elected(ctx, Election{Decisions: []election.Decision{dec(vip1.String(), p.self, "default/svc1")},
			Services: []*corev1.Service{svc}, PoolOf: func(netip.Addr) string { return "default" }, Taken: []netip.Addr{vip1}, Now: at})
		p.Announced(announcement1(mac, at))
	}

	owns(w1, t0, "02:42:ac:12:00:03")
	obj := expect("w1 publishes itself", func(v *heraldv1.VIPStatus) error {
		if s := v.Status; s.Node != "w1" || s.MAC != "02:42:ac:12:00:03" || s.LeaderChanges != 1 || s.Pool != "default" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if refs := obj.OwnerReferences; len(refs) != 1 || refs[0].UID != svc.UID {
		t.Errorf("owner references %+v, want Service svc1 (UID %s)", refs, svc.UID)
	}
	if !obj.Status.Since.Time.Equal(t0) {
		t.Errorf("since %v, want %v", obj.Status.Since, t0)
	}

	w1.Elected(ctx, Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc1")}, Services: []*corev1.Service{svc}})
	owns(w2, t0.Add(time.Minute), "02:42:ac:12:00:04")
	expect("w2 takes over", func(v *heraldv1.VIPStatus) error {
		if s := v.Status; s.Node != "w2" || s.MAC != "02:42:ac:12:00:04" || s.LeaderChanges != 2 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	// Nobody may announce it; w1 is the reporter.
	noEndpoints := unowned(vip1.String(), election.ReasonNoEndpoints, "default/svc1")
	w2.Elected(ctx, Election{Decisions: []election.Decision{noEndpoints}, Services: []*corev1.Service{svc}})
	w1.Elected(ctx, Election{Decisions: []election.Decision{noEndpoints}, Services: []*corev1.Service{svc}, Reporter: true, Now: time.Now()})
	expect("w1 reports no owner", func(v *heraldv1.VIPStatus) error {
		if s := v.Status; s.Node != "" || s.Reason != "NoEndpoints" || s.LeaderChanges != 2 || s.MAC != "" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	// The Service becomes a ClusterIP Service: the reporter deletes the leftover.
	clusterIP := svc.DeepCopy()
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	w1.Elected(ctx, Election{Services: []*corev1.Service{clusterIP}, Reporter: true, Now: time.Now()})
	testkit.Eventually(t, 30*time.Second, 50*time.Millisecond, "the leftover deleted", func() error {
		if err := env.Client.Get(ctx, key, &heraldv1.VIPStatus{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}
