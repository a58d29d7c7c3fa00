package speaker

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
type leaseWatch struct {
	stop   context.CancelFunc
	done   <-chan struct{} // closed once stopped
	store  toolscache.Store
	synced func() bool
}

// watchLeases starts a leaseWatch of the Leases in namespace that sel picks, calling
// h on its events, until ctx ends or stop is called. what names it in errors.
func watchLeases(ctx context.Context, c client.WithWatch, namespace, what string, sel func(*client.ListOptions), h toolscache.ResourceEventHandler) *leaseWatch {
	w := selectwatch.Start(ctx, c, namespace, what, func() client.ObjectList { return &coordinationv1.LeaseList{} }, &coordinationv1.Lease{}, sel, h)
	return &leaseWatch{stop: w.Stop, done: w.Done, store: w.Store, synced: w.Synced}
}

// held returns how many Leases the watch holds (0 for none).
func (w *leaseWatch) held() int {
	if w == nil {
		return 0
	}
	return len(w.store.ListKeys())
}

// leases returns what the watch holds, nil until it has synced. Read only.
func (w *leaseWatch) leases() []*coordinationv1.Lease {
	if w == nil || !w.synced() {
		return nil
	}
	objs := w.store.List()
	out := make([]*coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			out = append(out, l)
		}
	}
	return out
}
