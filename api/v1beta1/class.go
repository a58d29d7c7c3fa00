package v1beta1

import corev1 "k8s.io/api/core/v1"

// ServesClass says whether herald is responsible for a Service whose
// spec.loadBalancerClass is class: an unset class, or ours (when herald runs with
// one). Services of any other class belong to another load balancer and are ignored
// entirely, by the controller and the speakers alike.
func ServesClass(class *string, ours string) bool {
	return class == nil || (ours != "" && *class == ours)
}

// Announceable says whether svc is a LoadBalancer Service of ours (lbClass as in
// ServesClass) holding IPs: one whose IPs the speakers announce and report on.
func Announceable(svc *corev1.Service, lbClass string) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		ServesClass(svc.Spec.LoadBalancerClass, lbClass) &&
		len(svc.Status.LoadBalancer.Ingress) > 0
}
