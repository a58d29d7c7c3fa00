package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
	"herald.dev/herald/internal/scheme"
)

// A stream of allocations writes a pool's counts once per poolStatusInterval; a change
// of its Ready condition is written at once.
func TestPoolStatusCountsAreSpaced(t *testing.T) {
	ctx := context.Background()
	pool := &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: "default"}}
	writes := 0
	cl := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool).
		WithStatusSubresource(&heraldv1.IPAddressPool{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				writes++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	now := time.Now()
	r := &PoolReconciler{Client: cl, Recorder: events.NewFakeRecorder(10), now: func() time.Time { return now }}
	write := func(inUse int64, problem string) time.Duration {
		t.Helper()
		var p heraldv1.IPAddressPool
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pool), &p); err != nil {
			t.Fatal(err)
		}
		wait, err := r.writeStatus(ctx, &p, ipam.PoolStats{AssignedIPv4: inUse, AvailableIPv4: 100 - inUse}, 1, problem, nil)
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}
	write(1, "")
	if writes != 1 {
		t.Fatalf("%d writes of the first status, want 1", writes)
	}
	for i := int64(2); i < 50; i++ {
		now = now.Add(10 * time.Millisecond)
		if wait := write(i, ""); wait <= 0 || wait > poolStatusInterval {
			t.Fatalf("in use %d: asked to wait %s, want up to %s", i, wait, poolStatusInterval)
		}
	}
	if writes != 1 {
		t.Errorf("%d writes for 49 counts within %s, want 1", writes, poolStatusInterval)
	}
	now = now.Add(poolStatusInterval)
	if wait := write(49, ""); wait != 0 || writes != 2 {
		t.Errorf("after %s: %d writes and a wait of %s, want 2 writes and none", poolStatusInterval, writes, wait)
	}
	write(50, "Overlap: overlaps pool older")
	if writes != 3 {
		t.Errorf("%d writes after the Ready condition changed at once, want 3", writes)
	}
	var p heraldv1.IPAddressPool
	if err := cl.Get(ctx, client.ObjectKeyFromObject(pool), &p); err != nil {
		t.Fatal(err)
	}
	if p.Status.InUse != 50 {
		t.Errorf("status in use %d, want 50 (written with the condition)", p.Status.InUse)
	}
}
