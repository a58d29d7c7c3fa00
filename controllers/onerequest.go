package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Some reconcilers read the whole of what they watch on every pass
// (ReservedReconciler, ConflictReconciler): every event maps to one request of their
// own, so that a burst of events costs one pass.

// toOneRequest maps every event to the one request named name.
func toOneRequest(name string) handler.MapFunc {
	return func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
}

// synced is what a one-request reconciler's pass gave the allocator.
type synced struct {
	// changed: the allocator's view changed, so the pools' counts did.
	changed bool
	// retry: Services waiting for an address may get one now.
	retry bool
	// what says what changed, with keysAndValues, in the log.
	what          string
	keysAndValues []any
}

// syncOne runs a one-request reconciler's pass: with mu held it loads the state and
// runs sync, which must be called with mu held. When the pass changed the allocator's
// view, the Services waiting for an address retry if they may get one now, and the
// pools' status is written again.
func (a *Allocations) syncOne(ctx context.Context, c client.Reader, served servedFunc, sync func() (synced, error)) error {
	a.mu.Lock()
	err := a.ensureLoaded(ctx, c, served)
	var s synced
	if err == nil {
		s, err = sync()
	}
	a.mu.Unlock()
	if err != nil || !s.changed {
		return err
	}
	log.FromContext(ctx).V(1).Info(s.what, s.keysAndValues...)
	if s.retry {
		a.retryPending()
	}
	a.refreshAllPools()
	return nil
}
