//go:build linux

package compare

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"herald.dev/herald/proxy/model"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestOracleLargeCluster crosses kube-proxy's large-cluster threshold (more than 1000
// endpoints: endpoint rules lose their comments) in both directions, with partial syncs.
//
// kube-proxy deletes stale chains in that mode at most once per --iptables-sync-period
// (a wall-clock decision); the oracle runs with a 1ns period so that it deletes them on
// every sync, as herald does. When the mode flips, kube-proxy's partial sync rewrites
// only the changed Services (so unchanged ones keep rules of the old form until they
// change), while herald's runner makes that sync full: the payloads are compared for
// kube-proxy's changed set, the end states only where both sides agree again.
func TestOracleLargeCluster(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	e := env{nodeIPs: []netip.Addr{nodeIPv4}, clusterCIDRs: []string{"10.0.0.0/8"}, masqueradeBit: 14,
		localhostNodePorts: true, randomFully: true, nfacct: true}
	opts := e.oracleOptions(model.IPv4)
	opts.SyncPeriod = time.Nanosecond
	s := newSideWith(t, e, opts)
	node := e.heraldNode()

	w := &world{services: map[string]*v1.Service{}, slices: map[string]*discoveryv1.EndpointSlice{}, alloc: newAllocator(r)}
	big := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "large", Name: "big"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer, ClusterIP: "172.30.200.1", ClusterIPs: []string{"172.30.200.1"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, IPFamilyPolicy: ptr.To(v1.IPFamilyPolicySingleStack),
			Ports:                 []v1.ServicePort{{Name: "p80", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 31000}},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 32000,
			SessionAffinity:          v1.ServiceAffinityClientIP,
			SessionAffinityConfig:    &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}},
			LoadBalancerSourceRanges: []string{"192.168.0.0/16", "203.0.113.0/24"},
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "5.6.200.1"}}}},
	}
	small := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "large", Name: "small"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "172.30.200.2", ClusterIPs: []string{"172.30.200.2"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, IPFamilyPolicy: ptr.To(v1.IPFamilyPolicySingleStack),
			Ports:           []v1.ServicePort{{Protocol: v1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)}},
			SessionAffinity: v1.ServiceAffinityNone,
		},
	}
	w.services["large/big"], w.services["large/small"] = big, small
	// 997 + 3 endpoints: exactly the threshold, not above it.
	addEndpoints := func(svc *v1.Service, n int) {
		for i := 0; i < n; i += 100 {
			es := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%d", svc.Name, w.alloc.next()), Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(svc.Spec.Ports[0].Name), Port: ptr.To(svc.Spec.Ports[0].TargetPort.IntVal), Protocol: ptr.To(svc.Spec.Ports[0].Protocol)}},
			}
			for j := i; j < min(n, i+100); j++ {
				es.Endpoints = append(es.Endpoints, largeEndpoint(w, j))
			}
			w.slices[key(es.Namespace, es.Name)] = es
		}
	}
	addEndpoints(big, 997)
	addEndpoints(small, 3)
	s.feed(diff(&world{}, w))

	steps := []struct {
		what     string
		change   func(w *world)
		full     bool
		endState bool
		large    bool // kube-proxy's payload has endpoint rules without comments
	}{
		{"1000 endpoints: not large", nil, true, true, false},
		{"1001 endpoints: large, partial sync of the changed Service", func(w *world) {
			es := w.slices[w.slicesOf("large", "big")[0]]
			es.Endpoints = append(es.Endpoints, largeEndpoint(w, 5000))
		}, false, false, true},
		{"still large: other Service changes, its old endpoint chain goes stale", func(w *world) {
			es := w.slices[w.slicesOf("large", "small")[0]]
			es.Endpoints[0] = largeEndpoint(w, 6000)
		}, false, true, true},
		{"999 endpoints: not large again, both Services changed", func(w *world) {
			for _, name := range []string{"big", "small"} {
				es := w.slices[w.slicesOf("large", name)[0]]
				es.Endpoints = es.Endpoints[1:]
			}
		}, false, true, false},
		{"forced full sync", func(w *world) {}, true, true, false},
	}
	var log []string
	for i, step := range steps {
		var events []event
		if step.change != nil {
			next := w.clone()
			step.change(next)
			events = diff(w, next)
			w = next
			s.feed(events)
			if step.full {
				s.oracle.ForceFullSync()
			}
		}
		log = append(log, fmt.Sprintf("step %d: %s", i, step.what))
		services, problems := heraldServices(w)
		if len(problems) > 0 {
			t.Fatalf("converter problems: %v", problems)
		}
		c := &stepCheck{t: t, s: s, step: i, full: step.full, node: node, w: w, services: services,
			shuffled: shuffled(r, services), events: events, rerun: "TestOracleLargeCluster\nenv: " + e.String(), log: log, endState: step.endState}
		if !c.run() {
			return
		}
		if large := bareSEP.MatchString(c.res.NAT); large != step.large {
			t.Fatalf("step %d (%s): kube-proxy wrote endpoint rules without comments: %v, want %v", i, step.what, large, step.large)
		}
	}
}

// bareSEP matches an endpoint rule without a comment (large-cluster mode).
var bareSEP = regexp.MustCompile(`(?m)^-A KUBE-SEP-\S+ -s `)

// largeEndpoint is endpoint i of the large-cluster test: a unique IP, every third one on
// this node, some serving-terminating.
func largeEndpoint(w *world, i int) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{
		Addresses:  []string{fmt.Sprintf("10.200.%d.%d", i/250, i%250+1)},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		NodeName:   ptr.To(remoteNodes[0]),
	}
	if i%3 == 0 {
		ep.NodeName = ptr.To(localNode)
	}
	if i%17 == 0 {
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	}
	return ep
}
