package speaker

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	ctx, cancel := context.WithCancel(ctx)
	opts := func(raw metav1.ListOptions) *client.ListOptions {
		o := &client.ListOptions{Namespace: namespace, Raw: &raw}
		sel(o)
		return o
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
			var l coordinationv1.LeaseList
			if err := c.List(ctx, &l, opts(raw)); err != nil {
				return nil, fmt.Errorf("listing %s: %w", what, err)
			}
			return &l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
			w, err := c.Watch(ctx, &coordinationv1.LeaseList{}, opts(raw))
			if err != nil {
				return nil, fmt.Errorf("watching %s: %w", what, err)
			}
			return w, nil
		},
	}
	store, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &coordinationv1.Lease{},
		Handler:       h,
	})
	go ctrl.RunWithContext(ctx)
	return &leaseWatch{stop: cancel, done: ctx.Done(), store: store, synced: ctrl.HasSynced}
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
