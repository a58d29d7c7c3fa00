//go:build linux

package nftoracle

import (
	"net"
	"os"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) {
	// Parts of kube-proxy log through the global klog; keep test output clean.
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// The address plan of kube-proxy's nftables proxier_test.go: pods
// 10.0.0.0/8, ClusterIPs 172.30.0.0/16, this node test-node at 192.168.0.2.
const (
	testNodeName  = "test-node"
	otherNodeName = "host2"
	podCIDR       = "10.0.0.0/8"
	serviceCIDR   = "172.30.0.0/16"
)

var (
	testNodeIP   = net.ParseIP("192.168.0.2")
	testNodeIPv6 = net.ParseIP("2001:db8::1")
)

func testOptions() Options {
	return Options{
		NodeName:     testNodeName,
		NodeIP:       testNodeIP,
		ClusterCIDRs: []string{podCIDR},
		ServiceCIDRs: []string{serviceCIDR},
	}
}

// service is a TCP Service with one port named p80 (port 80, target 80).
func service(ns, name string, typ v1.ServiceType, clusterIP string, mutate ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       typ,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{
				Name: "p80", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80),
			}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

// loadBalancer makes svc a LoadBalancer with nodePort and the ingress lbIP.
func loadBalancer(nodePort int32, lbIP string) func(*v1.Service) {
	return func(svc *v1.Service) {
		svc.Spec.Ports[0].NodePort = nodePort
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbIP}}
	}
}

// endpoint is a ready endpoint address on a node.
type endpoint struct{ ip, node string }

// slice is the EndpointSlice ns/name-1 of Service ns/name, port p80 80/TCP.
func slice(ns, name string, family discoveryv1.AddressType, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name},
		},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, ep := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ep.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(ep.node),
		})
	}
	return s
}
