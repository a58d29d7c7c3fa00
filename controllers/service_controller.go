package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
)

// ServiceReconciler gives LoadBalancer Services their external IPs and takes them back
// when a Service is deleted, changes type or asks for other addresses.
type ServiceReconciler struct {
	client.Client
	Recorder events.EventRecorder
	State    *Allocations
	// LBClass is the loadBalancerClass herald serves besides Services with no class.
	LBClass string
}

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// serves says whether herald is responsible for svc: its class is unset or herald's.
// Services of other classes are ignored entirely.
func (r *ServiceReconciler) serves(svc *corev1.Service) bool {
	return heraldv1.ServesClass(svc.Spec.LoadBalancerClass, r.LBClass)
}

func (r *ServiceReconciler) servesLoadBalancer(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && r.serves(svc)
}

// Reconcile brings one Service's external IPs in line with what it asks for.
func (r *ServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var svc corev1.Service
	err := r.Get(ctx, req.NamespacedName, &svc)
	if apierrors.IsNotFound(err) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("service %s: %w", req.NamespacedName, err)
	}
	if !r.serves(&svc) {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		released := r.forget(req.NamespacedName)
		return ctrl.Result{}, r.clearStatus(ctx, &svc, released)
	}
	return ctrl.Result{}, r.allocate(ctx, &svc)
}

// forget releases whatever key held and wakes the Services waiting for an address.
func (r *ServiceReconciler) forget(key types.NamespacedName) []netip.Addr {
	s := r.State
	s.mu.Lock()
	released := s.alloc.Release(key.String())
	s.recheckConflicts(released)
	delete(s.pending, key)
	delete(s.duplicates, key)
	delete(s.annotationConflicts, key)
	s.mu.Unlock()
	if len(released) > 0 {
		allocationsTotal.WithLabelValues("released").Add(float64(len(released)))
		s.retryPending()
		s.refreshAllPools()
	}
	return released
}

func (r *ServiceReconciler) allocate(ctx context.Context, svc *corev1.Service) error {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	r.warnAnnotationConflicts(svc)
	view, parseErr := serviceFromAPI(svc, namespaceLabelsFunc(ctx, r.Client)(svc.Namespace))

	s := r.State
	s.mu.Lock()
	if err := s.ensureLoaded(ctx, r.Client, r.servesLoadBalancer); err != nil {
		s.mu.Unlock()
		return err
	}
	if parseErr != nil {
		// A malformed request is not a request: keep what the Service holds.
		s.pending[key] = true
		s.mu.Unlock()
		r.warn(svc, parseErr)
		return nil
	}
	duplicate, wasDuplicate := s.duplicates[key]
	delete(s.duplicates, key)
	res, allocErr := s.alloc.Allocate(view)
	if res.Changed {
		s.recheckConflicts(ingressIPs(svc))
	}
	if allocErr != nil {
		s.pending[key] = true
	} else {
		delete(s.pending, key)
	}
	s.mu.Unlock()

	if allocErr != nil {
		allocationsTotal.WithLabelValues("failed").Inc()
		if wasDuplicate {
			allocErr = fmt.Errorf("its IP is held by an older Service (%s), and %w", duplicate, allocErr)
		}
		r.warn(svc, allocErr)
		if len(res.IPs) == 0 {
			// It asked for something we cannot give and gave up what it held, or its
			// status showed an IP an older Service holds.
			if len(ingressIPs(svc)) > 0 {
				s.refreshAllPools()
			}
			return r.clearStatus(ctx, svc, ingressIPs(svc))
		}
	}
	if res.Changed || wasDuplicate {
		s.refreshAllPools()
		if res.Changed && len(ingressIPs(svc)) > 0 {
			s.retryPending() // moving to other addresses freed the old ones
		}
	}
	if slices.Equal(ingressIPs(svc), res.IPs) && svc.Annotations[heraldv1.AnnotationAllocatedFromPool] == res.Pool {
		return nil
	}
	if err := r.writeAllocation(ctx, svc, res); err != nil {
		return err
	}
	if allocErr != nil {
		return nil // the warning is out; what it holds is written
	}
	allocationsTotal.WithLabelValues("allocated").Inc()
	note := fmt.Sprintf("Assigned IP %s from pool %q", ipam.JoinIPs(res.IPs), res.Pool)
	if wasDuplicate {
		note += fmt.Sprintf(" (its previous IP was also held by an older Service: %s)", duplicate)
	}
	r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, heraldv1.ReasonIPAllocated, "Allocate", note)
	log.FromContext(ctx).V(1).Info("allocated", "ips", res.IPs, "pool", res.Pool)
	return nil
}

func (r *ServiceReconciler) warn(svc *corev1.Service, err error) {
	note := err.Error()
	switch {
	case errors.Is(err, ipam.ErrNoAvailableIPs):
		note += "; the Service keeps running and gets an IP as soon as one is free"
	case errors.Is(err, ipam.ErrIPConflict):
		note += "; it is tried again when the conflict clears"
	}
	r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, heraldv1.ReasonAllocationFailed, "Allocate", note)
}

// writeAllocation records the IPs in the status and the pool in the
// ip-allocated-from-pool annotation, in one write (see writeStatusAndPool).
func (r *ServiceReconciler) writeAllocation(ctx context.Context, svc *corev1.Service, res ipam.Result) error {
	orig := svc.DeepCopy()
	setPoolAnnotation(svc, res.Pool)
	svc.Status.LoadBalancer.Ingress = make([]corev1.LoadBalancerIngress, len(res.IPs))
	for i, ip := range res.IPs {
		svc.Status.LoadBalancer.Ingress[i] = corev1.LoadBalancerIngress{IP: ip.String()}
	}
	return r.writeStatusAndPool(ctx, svc, orig, "writing status")
}

// setPoolAnnotation records pool in herald's ip-allocated-from-pool annotation; ""
// removes it.
func setPoolAnnotation(svc *corev1.Service, pool string) {
	if pool == "" {
		delete(svc.Annotations, heraldv1.AnnotationAllocatedFromPool)
		return
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[heraldv1.AnnotationAllocatedFromPool] = pool
}

// writeStatusAndPool sends svc's status and pool annotation, changed from orig, as one
// patch of the status subresource. The API server's status strategy for Services keeps
// only the spec from changing, so the annotation lands in the same write as the IPs:
// one write per allocation, and no moment when a watcher sees one without the other.
// It is the controller's only write to a Service: its role grants no patch of the
// Service itself, so it can never change a spec.
func (r *ServiceReconciler) writeStatusAndPool(ctx context.Context, svc, orig *corev1.Service, what string) error {
	// No optimistic lock: herald alone writes the ingress and the pool annotation, and a
	// reconcile working from a cache that lags our own previous write would only
	// conflict, to write the same.
	patch := client.MergeFrom(orig)
	if data, err := patch.Data(svc); err != nil {
		return fmt.Errorf("service %s/%s: %s: %w", svc.Namespace, svc.Name, what, err)
	} else if string(data) == "{}" {
		return nil // nothing to change: no write
	}
	if err := r.Status().Patch(ctx, svc, patch); err != nil {
		return fmt.Errorf("service %s/%s: %s: %w", svc.Namespace, svc.Name, what, err)
	}
	return nil
}

// clearStatus removes the external IPs and the pool annotation herald wrote.
func (r *ServiceReconciler) clearStatus(ctx context.Context, svc *corev1.Service, released []netip.Addr) error {
	_, annotated := svc.Annotations[heraldv1.AnnotationAllocatedFromPool]
	if len(released) == 0 && !annotated {
		return nil // nothing of ours to clear
	}
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = nil
	setPoolAnnotation(svc, "")
	if err := r.writeStatusAndPool(ctx, svc, orig, "clearing status"); err != nil {
		return err
	}
	if len(released) > 0 {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, heraldv1.ReasonIPReleased, "Release", "Released IP %s", ipam.JoinIPs(released))
	}
	return nil
}
