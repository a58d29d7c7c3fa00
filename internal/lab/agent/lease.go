package agent

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The node Lease as a kubelet keeps it (its defaults, nodeLeaseDurationSeconds 40 and a
// renewal every quarter of that): the Lease is the node's heartbeat, which
// kube-controller-manager's node lifecycle controller reads. A node whose Lease goes
// unrenewed for node-monitor-grace-period (50 s) goes Ready=Unknown and its pods not
// ready, so the agent must renew from the node's own network namespace: a pulled cable
// or a killed agent stops the renewals, as a dead node's kubelet stops them.
const (
	LeaseDuration      = 40 * time.Second
	leaseRenewInterval = LeaseDuration / 4
)

// renewLeases renews the node's Lease every leaseRenewInterval until ctx ends. A failed
// renewal (the API server out of reach while the cable is out) is retried sooner, one
// second doubling up to the interval, as the kubelet's lease controller backs off, so a
// node whose cable comes back renews within seconds.
func (a *Agent) renewLeases(ctx context.Context) {
	var lease *coordinationv1.Lease // the last one written, updated without a read
	failing := false
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		rctx, cancel := context.WithTimeout(ctx, leaseRenewInterval)
		next, err := a.renewLease(rctx, lease)
		cancel()
		switch {
		case err == nil:
			if failing {
				a.log.Printf("node lease renewed again")
			}
			lease, failing, wait = next, false, leaseRenewInterval
		case ctx.Err() != nil:
			return
		default:
			if !failing {
				a.log.Printf("node lease: %v (retrying until it succeeds)", err)
				wait = time.Second / 2
			}
			lease, failing, wait = nil, true, min(2*wait, leaseRenewInterval)
		}
	}
}

// renewLease writes a fresh renewTime into last, or into the node's Lease read or
// created afresh when there is no last one, and returns what the API server stored.
func (a *Agent) renewLease(ctx context.Context, last *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := a.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	if last == nil {
		cur, err := leases.Get(ctx, a.cfg.Node, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l, err := a.newLease(ctx)
			if err != nil {
				return nil, err
			}
			created, err := leases.Create(ctx, l, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("creating lease %s/%s: %w", corev1.NamespaceNodeLease, a.cfg.Node, err)
			}
			return created, nil
		case err != nil:
			return nil, fmt.Errorf("lease %s/%s: %w", corev1.NamespaceNodeLease, a.cfg.Node, err)
		}
		last = cur
	}
	l := last.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(a.cfg.Node)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(LeaseDuration / time.Second))
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if len(l.OwnerReferences) == 0 {
		// A Lease made before its Node (or by someone else) gets the owner the kubelet
		// gives it, so that deleting the Node deletes it.
		owner, err := a.nodeOwner(ctx)
		if err != nil {
			return nil, err
		}
		l.OwnerReferences = owner
	}
	updated, err := a.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		// A conflict or a deleted Lease: the next try reads it afresh.
		return nil, fmt.Errorf("renewing lease %s/%s: %w", corev1.NamespaceNodeLease, a.cfg.Node, err)
	}
	return updated, nil
}

// newLease is the node's Lease as a kubelet creates it: named and held by the node,
// owned by its Node.
func (a *Agent) newLease(ctx context.Context) (*coordinationv1.Lease, error) {
	owner, err := a.nodeOwner(ctx)
	if err != nil {
		return nil, err
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Node, Namespace: corev1.NamespaceNodeLease, OwnerReferences: owner},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(a.cfg.Node),
			LeaseDurationSeconds: ptr.To(int32(LeaseDuration / time.Second)),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}, nil
}

// nodeOwner is the owner reference to the node's Node the kubelet puts on its Lease.
func (a *Agent) nodeOwner(ctx context.Context) ([]metav1.OwnerReference, error) {
	n, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s, owner of its lease: %w", a.cfg.Node, err)
	}
	return []metav1.OwnerReference{{
		APIVersion: corev1.SchemeGroupVersion.Version,
		Kind:       "Node",
		Name:       n.Name,
		UID:        n.UID,
	}}, nil
}
