package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

	mu sync.Mutex
	// statusWritten is when each pool's status was last written (poolStatusInterval).
	statusWritten map[string]time.Time
	now           func() time.Time // time.Now unless a test sets it
}

func (r *PoolReconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// poolStatusInterval spaces the writes of a pool's status that change only its counts.
// Every allocation and release asks for one: while Services come by the thousand (a
// controller start, a burst of deployments) the counts are written once a second, not
// once per Service. A change of the Ready condition is written at once.
const poolStatusInterval = time.Second

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
	var mustMove []types.NamespacedName
	if err == nil {
		changed, err = s.syncPools(ctx, r.Client)
	}
	if changed {
		mustMove = s.notAllowedToShare()
	}
	stats := s.alloc.Stats(req.Name)
	users := s.alloc.Users(req.Name)
	problem := s.problems[req.Name]
	if problem == "" && s.alloc.AllReserved(req.Name) {
		problem = reasonAllReserved + ": every address of the pool is reserved; see its ReservedAddresses condition"
	}
	reserved := s.alloc.ReservedIn(req.Name)
	s.mu.Unlock()
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		// New or wider pools may serve Services that are waiting; a pool that stopped
		// letting namespaces share moves all but the first holder's namespace.
		s.retryPending()
		s.retry(mustMove)
	}

	var pool heraldv1.IPAddressPool
	if err := r.Get(ctx, req.NamespacedName, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			forgetPoolMetrics(req.Name)
			r.mu.Lock()
			delete(r.statusWritten, req.Name)
			r.mu.Unlock()
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("pool %s: %w", req.Name, err)
	}
	setPoolMetrics(req.Name, stats)
	if err := r.syncFinalizer(ctx, &pool, users); err != nil {
		return ctrl.Result{}, err
	}
	wait, err := r.writeStatus(ctx, &pool, stats, users, problem, reserved)
	return ctrl.Result{RequeueAfter: wait}, err
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

// writeStatus writes the pool's counts and its Ready and ReservedAddresses conditions.
// When only the counts changed and the last write is less than poolStatusInterval old,
// it writes nothing and returns how long to wait.
func (r *PoolReconciler) writeStatus(ctx context.Context, pool *heraldv1.IPAddressPool, st ipam.PoolStats, users int, problem string, reserved []ipam.Reserved) (time.Duration, error) {
	if !pool.DeletionTimestamp.IsZero() && users == 0 {
		return 0, nil // it is going away now
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
	countsOnly := sameCondition(prev, cond) // now: prev points into the status that SetStatusCondition changes
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	if !r.setReservedCondition(pool, reserved) {
		countsOnly = false
	}
	if equality.Semantic.DeepEqual(orig.Status, pool.Status) {
		return 0, nil
	}
	if countsOnly {
		if wait := r.untilStatusWrite(pool.Name); wait > 0 {
			return wait, nil
		}
	}
	if err := r.Status().Patch(ctx, pool, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("pool %s: writing status: %w", pool.Name, err)
	}
	r.mu.Lock()
	if r.statusWritten == nil {
		r.statusWritten = map[string]time.Time{}
	}
	r.statusWritten[pool.Name] = r.clock()
	r.mu.Unlock()
	return 0, nil
}

// reasonAllReserved is the Ready reason of a pool all of whose addresses are reserved.
const reasonAllReserved = "AllReserved"

// reservedListed bounds the ranges a ReservedAddresses message names.
const reservedListed = 8

// setReservedCondition sets the ReservedAddresses condition from the pool's reserved
// addresses (removes it when there are none), with a Warning Event when its message
// changes. It reports whether the condition was already so.
func (r *PoolReconciler) setReservedCondition(pool *heraldv1.IPAddressPool, reserved []ipam.Reserved) bool {
	prev := meta.FindStatusCondition(pool.Status.Conditions, heraldv1.ConditionReservedAddresses)
	if len(reserved) == 0 {
		return !meta.RemoveStatusCondition(&pool.Status.Conditions, heraldv1.ConditionReservedAddresses)
	}
	names := make([]string, 0, reservedListed)
	for _, rs := range reserved[:min(len(reserved), reservedListed)] {
		names = append(names, rs.String())
	}
	msg := "never gives out " + strings.Join(names, ", ")
	if n := len(reserved) - reservedListed; n > 0 {
		msg += fmt.Sprintf(" and %d more reserved ranges", n)
	}
	msg += ": the cluster or the network uses them"
	cond := metav1.Condition{Type: heraldv1.ConditionReservedAddresses, Status: metav1.ConditionTrue, Reason: "Reserved",
		Message: msg, ObservedGeneration: pool.Generation}
	same := sameCondition(prev, cond)
	if prev == nil || prev.Message != msg {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, heraldv1.ReasonAddressesReserved, "Validate", "The pool %s", msg)
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	return same
}

// untilStatusWrite is how long the pool's status must wait for its next write.
func (r *PoolReconciler) untilStatusWrite(pool string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.statusWritten[pool]
	if !ok {
		return 0
	}
	return max(0, poolStatusInterval-r.clock().Sub(last))
}

// sameCondition says whether the Ready condition would be written unchanged.
func sameCondition(prev *metav1.Condition, next metav1.Condition) bool {
	return prev != nil && prev.Status == next.Status && prev.Reason == next.Reason &&
		prev.Message == next.Message && prev.ObservedGeneration == next.ObservedGeneration
}

func saturatingAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
