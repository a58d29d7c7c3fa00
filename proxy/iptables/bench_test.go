package iptables

import (
	"fmt"
	"net/netip"
	"testing"

	"herald.dev/herald/proxy/model"
)

// benchSnapshot builds n LoadBalancer Services (ClusterIP, NodePort, one LB IP) with two
// endpoints each, one of them on this node. 2n endpoints put kube-proxy in large cluster
// mode, as in a real cluster of that size.
func benchSnapshot(n int) *Snapshot {
	svcs := make([]model.Service, n)
	for i := range svcs {
		hi, lo := byte(i>>8), byte(i)
		svcs[i] = model.Service{
			Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("svc%d", i), Type: model.LoadBalancer,
			ClusterIPs:      []netip.Addr{netip.AddrFrom4([4]byte{172, 30, hi, lo})},
			LoadBalancerIPs: []netip.Addr{netip.AddrFrom4([4]byte{198, 18, hi, lo})},
			Ports:           []model.ServicePort{{Name: "http", Protocol: model.TCP, Port: 80, NodePort: 30000 + i%2768}},
			EndpointSlices: []model.EndpointSlice{{
				Ports: []model.EndpointPort{{Name: "http", Protocol: model.TCP, Port: 8080}},
				Endpoints: []model.Endpoint{
					{IP: netip.AddrFrom4([4]byte{10, 1, hi, lo}), NodeName: testNodeName, Ready: true, Serving: true},
					{IP: netip.AddrFrom4([4]byte{10, 2, hi, lo}), NodeName: "other", Ready: true, Serving: true},
				},
			}},
		}
	}
	return snapshot(model.IPv4, testNode(), svcs...)
}

func BenchmarkGenerateFull10kServices(b *testing.B) {
	snap := benchSnapshot(10000)
	b.ReportAllocs()
	var p *Payload
	for b.Loop() {
		p = mustGenerate(b, snap, Options{})
	}
	b.ReportMetric(float64(len(p.Bytes())), "bytes/payload")
	b.ReportMetric(float64(p.NAT.Rules+p.Filter.Rules), "rules/payload")
}

// A partial sync after one endpoint of one service changed: only that service's chains
// are written, the shared chains in full, as kube-proxy does.
func BenchmarkGeneratePartialOneEndpointChanged(b *testing.B) {
	prev := benchSnapshot(10000)
	next := benchSnapshot(10000)
	next.Services[4242].EndpointSlices[0].Endpoints[1].IP = netip.MustParseAddr("10.3.0.1")
	changed := ChangedServices(prev, next)
	if len(changed) != 1 {
		b.Fatalf("changed = %v", changed)
	}
	b.ReportAllocs()
	var p *Payload
	for b.Loop() {
		p = mustGenerate(b, next, Options{Changed: changed})
	}
	b.ReportMetric(float64(len(p.Bytes())), "bytes/payload")
	b.ReportMetric(float64(p.NAT.Rules+p.Filter.Rules), "rules/payload")
}

func BenchmarkChangedServices10k(b *testing.B) {
	prev, next := benchSnapshot(10000), benchSnapshot(10000)
	next.Services[4242].EndpointSlices[0].Endpoints[1].Ready = false
	b.ReportAllocs()
	for b.Loop() {
		ChangedServices(prev, next)
	}
}
