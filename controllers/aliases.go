package controllers

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// requestAnnotations are the annotations a Service asks with. The pool annotation
// herald writes is left out: after herald moved a Service to another pool, MetalLB's
// leftover record of the old one is expected and says nothing wrong.
var requestAnnotations = []string{
	heraldv1.AnnotationLoadBalancerIPs,
	heraldv1.AnnotationAddressPool,
	heraldv1.AnnotationAllowSharedIP,
}

// annotationConflicts describes every request annotation svc sets under several names
// with different values, and which value wins; "" when there are none.
func annotationConflicts(svc *corev1.Service) string {
	var notes []string
	for _, name := range requestAnnotations {
		if c := heraldv1.LookupAnnotation(svc.Annotations, name).Conflict(); c != "" {
			notes = append(notes, c)
		}
	}
	return strings.Join(notes, "; ")
}

// warnAnnotationConflicts sends a Warning Event when svc's annotations conflict, once
// for each new description: not again on every reconcile while they stay as they are,
// but again after they change (or after a controller restart).
func (r *ServiceReconciler) warnAnnotationConflicts(svc *corev1.Service) {
	note := annotationConflicts(svc)
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	s := r.State
	s.mu.Lock()
	prev := s.annotationConflicts[key]
	if note == "" {
		delete(s.annotationConflicts, key)
	} else {
		s.annotationConflicts[key] = note
	}
	s.mu.Unlock()
	if note == "" || note == prev {
		return
	}
	r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, heraldv1.ReasonAnnotationConflict, "Allocate", note)
}
