package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// Options configure the controller's reconcilers.
type Options struct {
	// Namespace holds herald's IPAddressPools; pools elsewhere are ignored.
	Namespace string
	// LBClass is served besides Services with no loadBalancerClass.
	LBClass string
	// ServiceWorkers is the number of Services reconciled at once.
	ServiceWorkers int
	// MemberlistSecret is the speakers' memberlist Secret in Namespace, created with a
	// random key when missing; "" leaves Secrets alone.
	MemberlistSecret string
	// ClusterRanges are reserved beside the nodes' addresses and pod CIDRs and the
	// ServiceCIDR objects.
	ClusterRanges ClusterRanges
}

// Setup registers the Service, pool and conflict reconcilers with mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	serviceCIDRAPI := servesServiceCIDRs(mgr.GetRESTMapper())
	state := NewAllocations(opts.Namespace, opts.ClusterRanges, serviceCIDRAPI)
	serviceIPs.state.Store(state)
	svcs := &ServiceReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("herald-controller"),
		State:    state,
		LBClass:  opts.LBClass,
	}
	pools := &PoolReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("herald-controller"),
		State:    state,
		Served:   svcs.servesLoadBalancer,
	}
	if opts.MemberlistSecret != "" {
		if err := mgr.Add(memberlistSecretRunnable(mgr, opts.Namespace, opts.MemberlistSecret)); err != nil {
			return err
		}
	}
	err := mgr.Add(&HeartbeatSummarizer{Cache: mgr.GetCache(), API: mgr.GetAPIReader(), Client: mgr.GetClient(),
		Namespace: opts.Namespace, Log: mgr.GetLogger().WithName("heartbeat-summary")})
	if err != nil {
		return err
	}
	records, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return fmt.Errorf("records digest client: %w", err)
	}
	err = mgr.Add(&RecordDigester{Watch: records, API: mgr.GetAPIReader(), Client: mgr.GetClient(),
		Namespace: opts.Namespace, Log: mgr.GetLogger().WithName("records-digest")})
	if err != nil {
		return err
	}
	workers := max(opts.ServiceWorkers, 1)
	err = ctrl.NewControllerManagedBy(mgr).
		Named("service").
		For(&corev1.Service{}).
		WatchesRawSource(source.Channel(state.retryServices, &handler.EnqueueRequestForObject{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(state.pendingIn)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(svcs)
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("ipaddresspool").
		For(&heraldv1.IPAddressPool{}).
		WatchesRawSource(source.Channel(state.refreshPools, &handler.EnqueueRequestForObject{})).
		Complete(pools)
	if err != nil {
		return err
	}
	reserved := ctrl.NewControllerManagedBy(mgr).
		Named("reserved").
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(toReservedRequest), builder.WithPredicates(nodeRangesChanged))
	if serviceCIDRAPI {
		reserved = reserved.Watches(&networkingv1.ServiceCIDR{}, handler.EnqueueRequestsFromMapFunc(toReservedRequest))
	}
	if err := reserved.Complete(&ReservedReconciler{Client: mgr.GetClient(), State: state, Served: svcs.servesLoadBalancer}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("vipconflicts").
		Watches(&heraldv1.VIPStatus{}, handler.EnqueueRequestsFromMapFunc(toConflictsRequest), builder.WithPredicates(conflictChanged)).
		WatchesRawSource(source.Channel(state.conflictsChanged, handler.EnqueueRequestsFromMapFunc(toConflictsRequest))).
		Complete(&ConflictReconciler{Client: mgr.GetClient(), State: state, Served: svcs.servesLoadBalancer})
}

// pendingIn maps a Namespace change (its labels may now match a pool's
// namespaceSelectors) to the Services in it that wait for an address.
func (a *Allocations) pendingIn(_ context.Context, ns client.Object) []reconcile.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	var reqs []reconcile.Request
	for k := range a.pending {
		if k.Namespace == ns.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName(k)})
		}
	}
	return reqs
}
