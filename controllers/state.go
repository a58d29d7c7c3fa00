package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
	"herald.dev/herald/internal/poolapi"
)

// Allocations is the controller's one allocation state, shared by the Service and pool
// reconcilers. The allocator is not safe for concurrent use, so every call goes through
// the mutex. Nothing is served before load has rebuilt the state from the Services'
// status, so a pending Service can never take an address another Service holds.
type Allocations struct {
	mu     sync.Mutex
	alloc  *ipam.Allocator
	loaded bool
	// loadTook is how long the rebuild from the Services' status took: nothing is
	// served before it ends, so on a large cluster it is part of every restart.
	loadTook  time.Duration
	poolsSeen string // fingerprint of the pool specs last given to SetPools
	poolNames []string
	problems  map[string]string // pool → why it gives no addresses (reason: message)
	// pending Services could not get an address; they are retried whenever an address
	// may have become free (release, pool change, a conflict cleared).
	pending map[types.NamespacedName]bool
	// duplicates are Services whose status IP another, older Service holds (found at
	// load), with the reason shown to them in Events.
	duplicates map[types.NamespacedName]string
	// annotationConflicts is the last Warning about conflicting annotation names given
	// to each Service, so that it is given once (see warnAnnotationConflicts).
	annotationConflicts map[types.NamespacedName]string

	// retryServices, refreshPools and conflictsChanged feed the reconcilers through
	// source.Channel.
	retryServices    chan event.GenericEvent
	refreshPools     chan event.GenericEvent
	conflictsChanged chan event.GenericEvent
	namespace        string
	// ranges are the cluster's ranges no Service gets an address from (syncReserved).
	ranges reservedRanges
}

// NewAllocations returns an empty state for pools in namespace, reserving ranges and
// the ServiceCIDR objects when serviceCIDRAPI.
func NewAllocations(namespace string, ranges ClusterRanges, serviceCIDRAPI bool) *Allocations {
	return &Allocations{
		alloc:               ipam.New(),
		problems:            map[string]string{},
		pending:             map[types.NamespacedName]bool{},
		duplicates:          map[types.NamespacedName]string{},
		annotationConflicts: map[types.NamespacedName]string{},
		retryServices:       make(chan event.GenericEvent, 4096),
		refreshPools:        make(chan event.GenericEvent, 1024),
		conflictsChanged:    make(chan event.GenericEvent, 1),
		namespace:           namespace,
		ranges:              reservedRanges{ClusterRanges: ranges, serviceCIDRAPI: serviceCIDRAPI},
	}
}

// servedFunc says whether herald serves a Service (its type and class).
type servedFunc func(*corev1.Service) bool

// ensureLoaded rebuilds the allocations from every served Service's status, oldest
// Service first, so that of two Services showing the same IP the older keeps it, and
// learns the addresses the cluster uses and the IPs in conflict, all before any Service
// is given one. Must be called with mu
// held.
func (a *Allocations) ensureLoaded(ctx context.Context, c client.Reader, served servedFunc) error {
	if a.loaded {
		return nil
	}
	start := time.Now()
	if _, err := a.syncPools(ctx, c); err != nil {
		return err
	}
	if _, err := a.syncReserved(ctx, c); err != nil {
		return err
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return fmt.Errorf("listing Services to rebuild allocations: %w", err)
	}
	holding := make([]*corev1.Service, 0, len(svcs.Items))
	for i := range svcs.Items {
		s := &svcs.Items[i]
		if served(s) && len(ingressIPs(s)) > 0 {
			holding = append(holding, s)
		}
	}
	sort.Slice(holding, func(i, j int) bool { return olderThan(holding[i], holding[j]) })
	nsLabels := namespaceLabelsFunc(ctx, c)
	for _, s := range holding {
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		view, err := serviceFromAPI(s, nsLabels(s.Namespace))
		if err != nil {
			// A bad annotation does not void the IP the Service already holds.
			view.RequestedIPs = nil
		}
		// The pool the Service asks for stands for its IPs' pool when it contains them
		// (between overlapping pools); otherwise the IPs alone decide. The
		// ip-allocated-from-pool annotation is not read: the Service's owner may edit it.
		if err := a.alloc.Restore(view, ingressIPs(s), view.Pool); err != nil {
			// Restore's refusal: it names the holder only when it is of the
			// Service's own namespace.
			a.duplicates[key] = err.Error()
		}
	}
	// After the holders are known: a claim of conflict counts only from a namespace
	// holding the IP.
	if _, _, err := a.syncConflicts(ctx, c); err != nil {
		return err
	}
	a.loaded = true
	a.loadTook = time.Since(start)
	log.FromContext(ctx).Info("rebuilt allocations from the Services' status",
		"services", len(svcs.Items), "holding", len(holding), "duplicates", len(a.duplicates), "took", a.loadTook)
	return nil
}

// olderThan orders Services by creation, then by namespace/name, so every controller
// resolves a duplicate the same way.
func olderThan(x, y *corev1.Service) bool {
	if !x.CreationTimestamp.Equal(&y.CreationTimestamp) {
		return x.CreationTimestamp.Before(&y.CreationTimestamp)
	}
	if x.Namespace != y.Namespace {
		return x.Namespace < y.Namespace
	}
	return x.Name < y.Name
}

// syncPools gives the allocator the current pools when their specs changed, and
// reports whether they did. Must be called with mu held.
func (a *Allocations) syncPools(ctx context.Context, c client.Reader) (bool, error) {
	var list heraldv1.IPAddressPoolList
	if err := c.List(ctx, &list, client.InNamespace(a.namespace)); err != nil {
		return false, fmt.Errorf("listing IPAddressPools: %w", err)
	}
	fp := poolFingerprint(list.Items)
	if a.loaded && fp == a.poolsSeen {
		return false, nil
	}
	problems := map[string]string{}
	pools := make([]ipam.Pool, 0, len(list.Items))
	for i := range list.Items {
		p, err := poolapi.FromAPI(&list.Items[i])
		if err != nil {
			problems[list.Items[i].Name] = "InvalidAddresses: " + err.Error()
			continue
		}
		pools = append(pools, p)
	}
	for _, pr := range a.alloc.SetPools(pools) {
		problems[pr.Pool] = pr.Reason + ": " + pr.Message
	}
	a.problems = problems
	a.poolsSeen = fp
	a.poolNames = a.poolNames[:0]
	for _, p := range list.Items {
		a.poolNames = append(a.poolNames, p.Name)
	}
	return true, nil
}

func poolFingerprint(pools []heraldv1.IPAddressPool) string {
	keys := make([]string, len(pools))
	for i, p := range pools {
		keys[i] = fmt.Sprintf("%s/%s/%d/%t", p.Name, p.UID, p.Generation, p.DeletionTimestamp != nil)
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}

// namespaceLabelsFunc looks namespaces up lazily; a missing namespace has no labels.
func namespaceLabelsFunc(ctx context.Context, c client.Reader) func(string) map[string]string {
	cache := map[string]map[string]string{}
	return func(name string) map[string]string {
		if l, ok := cache[name]; ok {
			return l
		}
		var ns corev1.Namespace
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &ns); err == nil {
			cache[name] = ns.Labels
		}
		return cache[name]
	}
}

// retryPending asks the Service reconciler to look again at every Service waiting for
// an address. Must be called without mu held (the channel may block briefly).
func (a *Allocations) retryPending() {
	a.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(a.pending))
	for k := range a.pending {
		keys = append(keys, k)
	}
	a.mu.Unlock()
	a.retry(keys)
}

// retry asks the Service reconciler to look again at the Services. Must be called
// without mu held.
func (a *Allocations) retry(keys []types.NamespacedName) {
	for _, k := range keys {
		a.retryServices <- event.GenericEvent{Object: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}}
	}
}

// notAllowedToShare lists the Services sharing an IP with another namespace in a pool
// that no longer allows it. Must be called with mu held.
func (a *Allocations) notAllowedToShare() []types.NamespacedName {
	var out []types.NamespacedName
	for _, k := range a.alloc.NotAllowedToShare() {
		ns, name, _ := strings.Cut(k, "/")
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	}
	return out
}

// refreshAllPools asks the pool reconciler to rewrite every pool's status and
// finalizer; its work queue folds repeated requests into one. Must be called without mu.
func (a *Allocations) refreshAllPools() {
	a.mu.Lock()
	names := append([]string(nil), a.poolNames...)
	a.mu.Unlock()
	for _, n := range names {
		a.refreshPools <- event.GenericEvent{Object: &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: n}}}
	}
}
