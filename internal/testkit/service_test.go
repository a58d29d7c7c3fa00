package testkit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestLBServiceDefaults(t *testing.T) {
	s := LBService("ns", "web")
	if s.Namespace != "ns" || s.Name != "web" || s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("got %s/%s of type %s", s.Namespace, s.Name, s.Spec.Type)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "http" || s.Spec.Ports[0].Port != 80 ||
		s.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want http 80/TCP", s.Spec.Ports)
	}
}

func TestLBServiceOptions(t *testing.T) {
	s := LBService("ns", "web", ClusterIP("10.96.0.1"), Ingress("192.0.2.1", "2001:db8::1"), NodePort(30080),
		TargetPort(8080), Selecting("app", "web"), Annotated("k", "v"), WithoutNodePorts(),
		func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	p := s.Spec.Ports[0]
	switch {
	case s.Spec.ClusterIP != "10.96.0.1" || len(s.Spec.ClusterIPs) != 1:
		t.Errorf("cluster IPs %q %v", s.Spec.ClusterIP, s.Spec.ClusterIPs)
	case len(s.Status.LoadBalancer.Ingress) != 2 || s.Status.LoadBalancer.Ingress[1].IP != "2001:db8::1":
		t.Errorf("ingress %+v", s.Status.LoadBalancer.Ingress)
	case p.NodePort != 30080 || p.TargetPort.IntVal != 8080:
		t.Errorf("port %+v", p)
	case s.Spec.Selector["app"] != "web" || s.Annotations["k"] != "v":
		t.Errorf("selector %v, annotations %v", s.Spec.Selector, s.Annotations)
	case s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts:
		t.Errorf("node ports allocated: %v", s.Spec.AllocateLoadBalancerNodePorts)
	case s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal:
		t.Errorf("a test's own edit was not applied")
	}
}
