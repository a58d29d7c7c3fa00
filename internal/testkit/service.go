package testkit

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// LBService is a LoadBalancer Service namespace/name with one port, http 80/TCP, and
// then as each option in turn makes it. Options are plain functions so a test can pass
// its own edits beside the ones here.
func LBService(namespace, name string, options ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	for _, o := range options {
		o(svc)
	}
	return svc
}

// Ingress sets the addresses the Service's status gives it.
func Ingress(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

// ClusterIP sets the Service's single cluster IP.
func ClusterIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.ClusterIP = ip
		s.Spec.ClusterIPs = []string{ip}
	}
}

// NodePort sets the node port of the first port.
func NodePort(port int32) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports[0].NodePort = port }
}

// TargetPort sets the port the first port sends to on the endpoints.
func TargetPort(port int32) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(port) }
}

// Selecting adds key=value to the Service's pod selector.
func Selecting(key, value string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Spec.Selector == nil {
			s.Spec.Selector = map[string]string{}
		}
		s.Spec.Selector[key] = value
	}
}

// Annotated adds the annotation key=value.
func Annotated(key, value string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[key] = value
	}
}

// WithoutNodePorts asks for no node ports: thousands of Services would exhaust the node
// port range.
func WithoutNodePorts() func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }
}
