package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
)

// PoolReconciler gives the allocator the current pools and keeps each pool's status,
// conditions and finalizer true to the allocations.
type PoolReconciler struct {
	client.Client
	Recorder events.EventRecorder
	State    *Allocations
	// Served decides which Services count when the state is first loaded.
	Served servedFunc
}

// Pools count only in herald-system (the manager's cache watches no other namespace).
// +kubebuilder:rbac:groups=herald.dev,resources=ipaddresspools,verbs=get;list;watch;update;patch,namespace=herald-system
// +kubebuilder:rbac:groups=herald.dev,resources=ipaddresspools/status,verbs=get;update;patch,namespace=herald-system
// +kubebuilder:rbac:groups=herald.dev,resources=ipaddresspools/finalizers,verbs=update,namespace=herald-system

// Reconcile writes one pool's status and finalizer.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := r.State
	s.mu.Lock()
	err := s.ensureLoaded(ctx, r.Client, r.Served)
	changed := false
	if err == nil {
		changed, err = s.syncPools(ctx, r.Client)
	}
	stats := s.alloc.Stats(req.Name)
	users := s.alloc.Users(req.Name)
	problem := s.problems[req.Name]
	s.mu.Unlock()
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		// New or wider pools may serve Services that are waiting.
		s.retryPending()
	}

	var pool heraldv1.IPAddressPool
	if err := r.Get(ctx, req.NamespacedName, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			forgetPoolMetrics(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("pool %s: %w", req.Name, err)
	}
	setPoolMetrics(req.Name, stats)
	if err := r.syncFinalizer(ctx, &pool, users); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.writeStatus(ctx, &pool, stats, users, problem)
}

// syncFinalizer keeps the finalizer while Services hold the pool's addresses, so that
// deleting the pool never takes an IP from a running Service.
func (r *PoolReconciler) syncFinalizer(ctx context.Context, pool *heraldv1.IPAddressPool, users int) error {
	want := users > 0
	if want == controllerutil.ContainsFinalizer(pool, heraldv1.PoolFinalizer) {
		return nil
	}
	if want && !pool.DeletionTimestamp.IsZero() {
		return nil // finalizers cannot be added to an object being deleted
	}
	orig := pool.DeepCopy()
	if want {
		controllerutil.AddFinalizer(pool, heraldv1.PoolFinalizer)
	} else {
		controllerutil.RemoveFinalizer(pool, heraldv1.PoolFinalizer)
	}
	if err := r.Patch(ctx, pool, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pool %s: updating finalizer: %w", pool.Name, err)
	}
	return nil
}

func (r *PoolReconciler) writeStatus(ctx context.Context, pool *heraldv1.IPAddressPool, st ipam.PoolStats, users int, problem string) error {
	if !pool.DeletionTimestamp.IsZero() && users == 0 {
		return nil // it is going away now
	}
	orig := pool.DeepCopy()
	pool.Status.AssignedIPv4, pool.Status.AssignedIPv6 = st.AssignedIPv4, st.AssignedIPv6
	pool.Status.AvailableIPv4, pool.Status.AvailableIPv6 = st.AvailableIPv4, st.AvailableIPv6
	pool.Status.InUse = saturatingAdd(st.AssignedIPv4, st.AssignedIPv6)
	pool.Status.Available = saturatingAdd(st.AvailableIPv4, st.AvailableIPv6)
	pool.Status.ConflictIPv4, pool.Status.ConflictIPv6 = st.ConflictIPv4, st.ConflictIPv6
	pool.Status.Conflict = saturatingAdd(st.ConflictIPv4, st.ConflictIPv6)

	cond := metav1.Condition{Type: heraldv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
		Message: "the pool gives out addresses", ObservedGeneration: pool.Generation}
	switch {
	case !pool.DeletionTimestamp.IsZero():
		cond.Status, cond.Reason = metav1.ConditionFalse, "Terminating"
		cond.Message = fmt.Sprintf("deleted; gives out no new addresses and goes away when its last %d Service(s) release theirs", users)
	case problem != "":
		reason, msg, _ := strings.Cut(problem, ": ")
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, msg
	}
	prev := meta.FindStatusCondition(pool.Status.Conditions, heraldv1.ConditionReady)
	if cond.Status == metav1.ConditionFalse && (prev == nil || prev.Reason != cond.Reason || prev.Message != cond.Message) {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, cond.Reason, "Validate", cond.Message)
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	if equality.Semantic.DeepEqual(orig.Status, pool.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, pool, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pool %s: writing status: %w", pool.Name, err)
	}
	return nil
}

func saturatingAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
