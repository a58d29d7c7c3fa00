package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// The speakers publish, in the VIPStatus of an IP, that they yielded it to a device on
// the network that is no herald speaker (reason IPConflict). The controller learns the
// IPs in conflict from there and keeps new Services away from them (ipam.SetConflicts).
// A VIPStatus lives in the namespace of the Services holding its IP, and whoever may
// write VIPStatus objects in a namespace could write one for any IP: it counts only while
// a Service of its namespace holds the IP, so that no tenant can keep an address it
// does not hold from everyone else.

// conflictingIPs is the set of IPs in conflict: those of the VIPStatus objects with
// reason IPConflict whose namespace holds the IP (heldIn), sorted, each once (an IP has
// one object per namespace of its Services; any of them saying IPConflict is enough).
// Unparsable IPs are skipped.
func conflictingIPs(vips []heraldv1.VIPStatus, heldIn func(ip netip.Addr, namespace string) bool) []netip.Addr {
	var out []netip.Addr
	for i := range vips {
		if !inConflict(&vips[i]) {
			continue
		}
		ip, err := netip.ParseAddr(vips[i].Status.IP)
		if err != nil {
			continue
		}
		if ip = ip.Unmap().WithZone(""); heldIn(ip, vips[i].Namespace) {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func inConflict(v *heraldv1.VIPStatus) bool {
	return v.Status.Reason == heraldv1.VIPReasonIPConflict
}

// syncConflicts gives the allocator the IPs in conflict and returns those newly in
// conflict and those no longer. Must be called with mu held.
func (a *Allocations) syncConflicts(ctx context.Context, c client.Reader) (added, cleared []netip.Addr, err error) {
	var list heraldv1.VIPStatusList
	// Read only: the objects are not kept or changed, so the cache's copies will do.
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing VIPStatuses to find IPs in conflict: %w", err)
	}
	added, cleared = a.alloc.SetConflicts(conflictingIPs(list.Items, a.alloc.HeldIn))
	return added, cleared, nil
}

// recheckConflicts asks the ConflictReconciler to look again when some of the IPs a
// Service just gave up were in conflict: the claims of its namespace no longer count.
// Must be called with mu held; it never blocks (one request pending is enough).
func (a *Allocations) recheckConflicts(released []netip.Addr) {
	if !slices.ContainsFunc(released, a.alloc.InConflict) {
		return
	}
	select {
	case a.conflictsChanged <- event.GenericEvent{Object: &heraldv1.VIPStatus{}}:
	default:
	}
}

// ConflictReconciler feeds the allocator the IPs in conflict whenever a VIPStatus
// enters or leaves reason IPConflict. Every event is the same request: a burst of them
// costs one list.
type ConflictReconciler struct {
	client.Client
	State *Allocations
	// Served decides which Services count when the state is first loaded.
	Served servedFunc
}

// VIPStatuses live in the namespaces of their Services, so they are read cluster-wide.
// +kubebuilder:rbac:groups=herald.dev,resources=vipstatuses,verbs=get;list;watch

// toConflictsRequest maps every event to the ConflictReconciler's one request.
var toConflictsRequest = toOneRequest("vip-conflicts")

// conflictChanged passes the events that may change the set of IPs in conflict.
var conflictChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return isConflictObject(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return isConflictObject(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := isConflictObject(e.ObjectOld), isConflictObject(e.ObjectNew)
		return o != n || n && e.ObjectOld.(*heraldv1.VIPStatus).Status.IP != e.ObjectNew.(*heraldv1.VIPStatus).Status.IP
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func isConflictObject(o client.Object) bool {
	v, ok := o.(*heraldv1.VIPStatus)
	return ok && inConflict(v)
}

// Reconcile gives the allocator the current IPs in conflict. When one clears, the
// Services waiting for an address try again; either way the pools' counts change.
func (r *ConflictReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	s := r.State
	return ctrl.Result{}, s.syncOne(ctx, r.Client, r.Served, func() (synced, error) {
		added, cleared, err := s.syncConflicts(ctx, r.Client)
		return synced{changed: len(added) > 0 || len(cleared) > 0, retry: len(cleared) > 0,
			what: "IPs in conflict with devices on the network changed", keysAndValues: []any{"added", added, "cleared", cleared}}, err
	})
}
