package v1beta1

// ServesClass says whether herald is responsible for a Service whose
// spec.loadBalancerClass is class: an unset class, or ours (when herald runs with
// one). Services of any other class belong to another load balancer and are ignored
// entirely, by the controller and the speakers alike.
func ServesClass(class *string, ours string) bool {
	return class == nil || (ours != "" && *class == ours)
}
