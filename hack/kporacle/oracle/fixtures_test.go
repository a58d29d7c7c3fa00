//go:build linux

package oracle

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The address plan of kube-proxy's proxier_test.go, which the worked example
// (cmd/kporacle/testdata/worked-example.yaml) also uses: pods 10.0.0.0/8, ClusterIPs 172.30.0.0/16, this node
// test-node at 192.168.0.2, LB IPs 1.2.3.4 and 5.6.7.8.
const (
	testNodeName  = "test-node"
	otherNodeName = "host2"
	podCIDR       = "10.0.0.0/8"
)

var testNodeIP = netip.MustParseAddr("192.168.0.2")

// workedExampleOptions are the settings of the §1.2 run: pod-CIDR detector,
// localhost NodePorts off, an iptables without --random-fully.
func workedExampleOptions() Options {
	return Options{
		NodeName:                  testNodeName,
		NodeIPs:                   []netip.Addr{testNodeIP},
		ClusterCIDRs:              []string{podCIDR},
		DisableLocalhostNodePorts: true,
		NoRandomFully:             true,
	}
}

// lbService is a TCP LoadBalancer Service with one port named p80.
func lbService(ns, name, clusterIP, lbIP string, nodePort int32, etp v1.ServiceExternalTrafficPolicy) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeLoadBalancer,
			ClusterIP:             clusterIP,
			ClusterIPs:            []string{clusterIP},
			ExternalTrafficPolicy: etp,
			Ports: []v1.ServicePort{{
				Name: "p80", Protocol: v1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(80), NodePort: nodePort,
			}},
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{
			Ingress: []v1.LoadBalancerIngress{{IP: lbIP}},
		}},
	}
	return svc
}

// endpoint is one ready endpoint of a slice; node "" leaves nodeName unset.
type endpoint struct {
	ip, node string
}

// slice is the EndpointSlice <name>-1 of Service ns/name with port p80 80/TCP.
func slice(ns, name string, family discoveryv1.AddressType, endpoints ...endpoint) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name},
		},
		AddressType: family,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("p80"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP),
		}},
	}
	for _, ep := range endpoints {
		e := discoveryv1.Endpoint{
			Addresses:  []string{ep.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}
		if ep.node != "" {
			e.NodeName = ptr.To(ep.node)
		}
		es.Endpoints = append(es.Endpoints, e)
	}
	return es
}

// newOracle builds an Oracle or fails the test.
func newOracle(t *testing.T, opts Options) *Oracle {
	t.Helper()
	o, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return o
}

// mustSync runs a sync and fails the test on error or on the wrong kind.
func mustSync(t *testing.T, o *Oracle, wantFull bool) Result {
	t.Helper()
	result, err := o.Sync()
	if err != nil {
		t.Fatalf("Sync: %v\npayload:\n%s", err, result.Payload)
	}
	if result.Full != wantFull {
		t.Fatalf("Sync: Full = %v, want %v", result.Full, wantFull)
	}
	return result
}

// lines joins lines with a trailing newline, as iptables-restore text.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

// assertText fails with both texts when got != want.
func assertText(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s differs from kube-proxy's expected text\n--- got:\n%s--- want:\n%s", what, got, want)
	}
}
