package records

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/selectwatch"
)

// leaseWatch is one informer of the Leases a selection picks at the API server,
// started and stopped as the speaker needs it (a peer's heartbeat, the records of
// speakers in trouble, ...).
type leaseWatch struct{ *selectwatch.Watch }

// watchLeases starts a leaseWatch of the Leases in namespace that sel picks, calling
// h on its events, until ctx ends or Stop is called. what names it in errors.
func watchLeases(ctx context.Context, c client.WithWatch, namespace, what string, sel func(*client.ListOptions), h toolscache.ResourceEventHandler) *leaseWatch {
	return &leaseWatch{selectwatch.Start(ctx, c, namespace, what, func() client.ObjectList { return &coordinationv1.LeaseList{} }, &coordinationv1.Lease{}, sel, h)}
}

// held returns how many Leases the watch holds (0 for none).
func (w *leaseWatch) held() int {
	if w == nil {
		return 0
	}
	return len(w.Store.ListKeys())
}

// leases returns what the watch holds, nil until it has synced. Read only.
func (w *leaseWatch) leases() []*coordinationv1.Lease {
	if w == nil || !w.Synced() {
		return nil
	}
	objs := w.Store.List()
	out := make([]*coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			out = append(out, l)
		}
	}
	return out
}
