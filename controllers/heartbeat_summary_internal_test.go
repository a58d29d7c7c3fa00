package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/beatsummary"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
)

// laggingCache is a real cache whose List can be frozen: a watch that stopped
// delivering, as a cache lags behind the API server.
type laggingCache struct {
	cache.Cache
	mu     sync.Mutex
	frozen *coordinationv1.LeaseList
}

func (c *laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.mu.Lock()
	frozen := c.frozen
	c.mu.Unlock()
	if l, ok := list.(*coordinationv1.LeaseList); ok && frozen != nil {
		frozen.DeepCopyInto(l)
		return nil
	}
	return c.Cache.List(ctx, list, opts...)
}

func (c *laggingCache) freeze(ctx context.Context) error {
	var l coordinationv1.LeaseList
	if err := c.Cache.List(ctx, &l); err != nil {
		return err
	}
	c.mu.Lock()
	c.frozen = &l
	c.mu.Unlock()
	return nil
}

// Against a real API server: a heartbeat that the controller's cache shows stale, but
// that was renewed meanwhile, is read straight from the API server before the summary
// calls it stale, so a lagging watch cannot make a live speaker stale.
func TestHeartbeatSummaryConfirmsStale(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	hb := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: beatsummary.HeartbeatName("a"), Labels: map[string]string{beatsummary.HeartbeatLabel: "true"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To(int32(2)),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if err := env.Client.Create(ctx, hb); err != nil {
		t.Fatal(err)
	}
	cc, err := cache.New(env.Config, cache.Options{Scheme: scheme.New(), ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: HeartbeatLeases(ns)}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cc.Start(ctx) }()
	lagging := &laggingCache{Cache: cc}
	s := &HeartbeatSummarizer{Cache: lagging, API: env.Client, Client: env.Client, Namespace: ns, Log: logr.Discard()}
	go func() { _ = s.Start(ctx) }()

	summary := func() beatsummary.Summary {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: beatsummary.Name}, &l); err != nil {
			return beatsummary.Summary{}
		}
		sum, _ := beatsummary.FromLease(&l)
		return sum
	}
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "a fresh in the summary", func() error {
		if sum := summary(); !slices.Equal(sum.Fresh, []string{"a"}) {
			return fmt.Errorf("summary %+v", sum)
		}
		return nil
	})
	if err := lagging.freeze(ctx); err != nil {
		t.Fatal(err)
	}
	// a renews every 500 ms; the frozen cache sees none of it, and its copy of a's
	// heartbeat turns stale 2 s after the last renewal it saw.
	renewUntil := time.Now().Add(5 * time.Second)
	for time.Now().Before(renewUntil) {
		time.Sleep(500 * time.Millisecond)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hb), hb); err != nil {
			t.Fatal(err)
		}
		hb.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		if err := env.Client.Update(ctx, hb); err != nil {
			t.Fatal(err)
		}
		if sum := summary(); !slices.Equal(sum.Fresh, []string{"a"}) {
			t.Fatalf("a, renewed all along, written stale from a lagging cache: summary %+v", sum)
		}
	}
	// a stops renewing: stale once its last renewal is 2 s old, whatever the cache.
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "a stale once it stopped renewing", func() error {
		if sum := summary(); len(sum.Fresh) != 0 || sum.Stale["a"].IsZero() {
			return fmt.Errorf("summary %+v", sum)
		}
		return nil
	})
}
