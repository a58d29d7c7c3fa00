package controllers

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
	"herald.dev/herald/internal/scheme"
)

// writeCounts counts the patches a ServiceReconciler sends, of the object and of its
// status.
type writeCounts struct{ patches, statusPatches int }

// fakeServiceClient holds svc. Its status writes keep metadata changes too, as the API
// server's do for Services.
func fakeServiceClient(t *testing.T, svc *corev1.Service, counts *writeCounts) client.Client {
	t.Helper()
	return fake.NewClientBuilder().
		WithScheme(scheme.New()).
		WithObjects(svc).
		WithStatusSubresource(&corev1.Service{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				counts.patches++
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				counts.statusPatches++
				data, err := patch.Data(obj) // now: the write changes obj
				if err != nil {
					return err
				}
				raw := client.RawPatch(patch.Type(), data)
				// The fake client's status writes keep only the status.
				if err := c.SubResource(sub).Patch(ctx, obj, raw, opts...); err != nil {
					return err
				}
				// The API server's Service status strategy keeps metadata changes too.
				return c.Patch(ctx, obj, raw)
			},
		}).
		Build()
}

func TestWriteAllocationIsOneStatusPatch(t *testing.T) {
	for _, c := range []struct {
		name                           string
		wantPatches, wantStatusPatches int
	}{
		// The only write: the controller may not patch a Service itself.
		{name: "status writes keep metadata", wantStatusPatches: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
			var counts writeCounts
			cl := fakeServiceClient(t, svc, &counts)
			r := &ServiceReconciler{Client: cl, Recorder: events.NewFakeRecorder(10)}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
				t.Fatal(err)
			}
			res := ipam.Result{IPs: []netip.Addr{netip.MustParseAddr("10.0.0.7")}, Pool: "default"}
			if err := r.writeAllocation(ctx, svc, res); err != nil {
				t.Fatal(err)
			}
			var got corev1.Service
			if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), &got); err != nil {
				t.Fatal(err)
			}
			if ips := ingressIPs(&got); len(ips) != 1 || ips[0] != res.IPs[0] {
				t.Errorf("status IPs %v, want %v", ips, res.IPs)
			}
			if p := got.Annotations[heraldv1.AnnotationAllocatedFromPool]; p != "default" {
				t.Errorf("%s=%q, want default", heraldv1.AnnotationAllocatedFromPool, p)
			}
			if counts.patches != c.wantPatches || counts.statusPatches != c.wantStatusPatches {
				t.Errorf("%d patches and %d status patches, want %d and %d", counts.patches, counts.statusPatches, c.wantPatches, c.wantStatusPatches)
			}

			// The same again is no write at all.
			counts = writeCounts{}
			if err := r.writeAllocation(ctx, &got, res); err != nil {
				t.Fatal(err)
			}
			if counts != (writeCounts{}) {
				t.Errorf("writing what the Service shows sent %+v, want nothing", counts)
			}

			// Releasing takes the IPs and the annotation away in as many writes.
			if err := r.clearStatus(ctx, &got, res.IPs); err != nil {
				t.Fatal(err)
			}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), &got); err != nil {
				t.Fatal(err)
			}
			if ips := ingressIPs(&got); len(ips) != 0 {
				t.Errorf("status IPs %v after release, want none", ips)
			}
			if p, ok := got.Annotations[heraldv1.AnnotationAllocatedFromPool]; ok {
				t.Errorf("%s=%q after release, want none", heraldv1.AnnotationAllocatedFromPool, p)
			}
			if counts.patches != c.wantPatches || counts.statusPatches != c.wantStatusPatches {
				t.Errorf("release: %d patches and %d status patches, want %d and %d", counts.patches, counts.statusPatches, c.wantPatches, c.wantStatusPatches)
			}
		})
	}
}
