// Package selectwatch runs an informer of the objects of one kind that a selection
// picks at the API server, through a controller-runtime client: the watches herald
// starts and stops as it needs them (a peer's heartbeat, the records of speakers in
// trouble, the records digest), and the controller's own watch of the records, which
// the manager's cache, holding another selection of Leases, cannot serve.
package selectwatch

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watch is a running informer.
type Watch struct {
	// Stop ends it; Done is closed once it has ended (Stop, or its context).
	Stop context.CancelFunc
	Done <-chan struct{}
	// Store holds the objects picked; Synced says whether the first list is in.
	Store  toolscache.Store
	Synced func() bool
}

// Start starts a Watch of the objects in namespace that sel picks, calling h on its
// events, until ctx ends or Stop is called. newList returns an empty list of the kind
// (&corev1.ConfigMapList{}), obj an empty object of it; what names it in errors.
func Start(ctx context.Context, c client.WithWatch, namespace, what string, newList func() client.ObjectList, obj runtime.Object,
	sel func(*client.ListOptions), h toolscache.ResourceEventHandler) *Watch {
	ctx, cancel := context.WithCancel(ctx)
	opts := func(raw metav1.ListOptions) *client.ListOptions {
		o := &client.ListOptions{Namespace: namespace, Raw: &raw}
		sel(o)
		return o
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, raw metav1.ListOptions) (runtime.Object, error) {
			l := newList()
			if err := c.List(ctx, l, opts(raw)); err != nil {
				return nil, fmt.Errorf("listing %s: %w", what, err)
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
			w, err := c.Watch(ctx, newList(), opts(raw))
			if err != nil {
				return nil, fmt.Errorf("watching %s: %w", what, err)
			}
			return w, nil
		},
	}
	store, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    obj,
		Handler:       h,
	})
	go ctrl.RunWithContext(ctx)
	return &Watch{Stop: cancel, Done: ctx.Done(), Store: store, Synced: ctrl.HasSynced}
}
