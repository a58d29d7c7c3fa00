package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"go4.org/netipx"

	"herald.dev/herald/controllers/ipam"
)

// A LoadBalancer IP that is also a node's address, or lies in the pod or Service CIDR,
// would be DNATed by every node's proxier for every pod and node: the controller reads
// those ranges from the cluster and reserves them (ipam.SetReserved), beside the
// special-purpose addresses the allocator always reserves.

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get;list;watch

// ClusterRanges are the cluster's ranges that its API may not list: the pod CIDR when
// the network plugin does not set Node.spec.podCIDRs, and the Service CIDR on
// Kubernetes without the ServiceCIDR API.
type ClusterRanges struct {
	PodCIDRs     []netip.Prefix
	ServiceCIDRs []netip.Prefix
}

// clusterReserved lists the addresses the cluster uses: every node's InternalIP and
// ExternalIP, every node's pod CIDRs, the Service CIDRs, and the ranges given by flag.
// Unparsable values are skipped (the API server validates them).
func clusterReserved(nodes []corev1.Node, serviceCIDRs []networkingv1.ServiceCIDR, flags ClusterRanges) []ipam.Reserved {
	var out []ipam.Reserved
	prefix := func(p netip.Prefix, why string) {
		if p.IsValid() {
			out = append(out, ipam.Reserved{Range: netipx.RangeOfPrefix(p.Masked()), Why: why})
		}
	}
	for _, p := range flags.PodCIDRs {
		prefix(p, "pod CIDR (--cluster-cidr)")
	}
	for _, p := range flags.ServiceCIDRs {
		prefix(p, "Service CIDR (--service-cidr)")
	}
	for _, sc := range serviceCIDRs {
		for _, c := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				prefix(p, "Service CIDR "+c)
			}
		}
	}
	for _, n := range nodes {
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				prefix(p, "pod CIDR of node "+n.Name)
			}
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				ip = ip.Unmap().WithZone("")
				out = append(out, ipam.Reserved{Range: netipx.IPRangeFrom(ip, ip), Why: fmt.Sprintf("%s of node %s", a.Type, n.Name)})
			}
		}
	}
	return out
}

// nodeRanges keeps of a Node what clusterReserved reads, so that the cache of every
// node costs little: a Node's status carries its images and conditions.
func nodeRanges(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Spec:       corev1.NodeSpec{PodCIDRs: n.Spec.PodCIDRs},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

// syncReserved gives the allocator the addresses the cluster uses now and reports
// whether they changed. Must be called with mu held.
func (a *Allocations) syncReserved(ctx context.Context, c client.Reader) (bool, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return false, fmt.Errorf("listing Nodes to reserve their addresses: %w", err)
	}
	var cidrs networkingv1.ServiceCIDRList
	if a.ranges.serviceCIDRAPI {
		if err := c.List(ctx, &cidrs); err != nil {
			return false, fmt.Errorf("listing ServiceCIDRs to reserve them: %w", err)
		}
	}
	return a.alloc.SetReserved(clusterReserved(nodes.Items, cidrs.Items, a.ranges.ClusterRanges)), nil
}

// reservedRanges is what the controller knows of the cluster's ranges.
type reservedRanges struct {
	ClusterRanges
	// serviceCIDRAPI: the API server serves networking.k8s.io/v1 ServiceCIDR (1.33+).
	serviceCIDRAPI bool
}

// servesServiceCIDRs asks the API server whether it serves the ServiceCIDR API.
func servesServiceCIDRs(m meta.RESTMapper) bool {
	_, err := m.RESTMapping(schema.GroupKind{Group: networkingv1.GroupName, Kind: "ServiceCIDR"}, "v1")
	return err == nil
}

// ReservedReconciler gives the allocator the addresses the cluster uses whenever a
// node's addresses or pod CIDRs, or a ServiceCIDR, change. Every event is the same
// request.
type ReservedReconciler struct {
	client.Client
	State  *Allocations
	Served servedFunc
}

// toReservedRequest maps every event to the ReservedReconciler's one request.
var toReservedRequest = toOneRequest("reserved-addresses")

// nodeRangesChanged passes Node events that change the addresses or pod CIDRs: a
// node's status is written often (conditions, images) and those change nothing here.
var nodeRangesChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !slices.Equal(o.Status.Addresses, n.Status.Addresses)
	},
}

// Reconcile gives the allocator the current reserved addresses; when they changed,
// the pools' status is written again and the Services waiting for an address retry.
func (r *ReservedReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	s := r.State
	return ctrl.Result{}, s.syncOne(ctx, r.Client, r.Served, func() (synced, error) {
		changed, err := s.syncReserved(ctx, r.Client)
		return synced{changed: changed, retry: true, what: "addresses the cluster uses changed"}, err
	})
}
