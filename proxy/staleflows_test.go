package proxy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"herald.dev/herald/proxy/model"
)

// udpService is a dual-stack LoadBalancer with one UDP port (NodePort 30053) and one
// TCP port, and the given endpoints behind both.
func udpService(name string, eps ...model.Endpoint) model.Service {
	return model.Service{
		Namespace: "ns", Name: name, Type: model.LoadBalancer,
		ClusterIPs:      addrs("172.30.0.1", "fd00:30::1"),
		ExternalIPs:     addrs("192.168.99.1"),
		LoadBalancerIPs: addrs("1.2.3.4"),
		Ports: []model.ServicePort{
			{Name: "dns", Protocol: model.UDP, Port: 53, NodePort: 30053},
			{Name: "web", Protocol: model.TCP, Port: 80},
		},
		EndpointSlices: []model.EndpointSlice{{
			Ports: []model.EndpointPort{
				{Name: "dns", Protocol: model.UDP, Port: 5353},
				{Name: "web", Protocol: model.TCP, Port: 8080},
			},
			Endpoints: eps,
		}},
	}
}

func ep(ip string, serving bool) model.Endpoint {
	return model.Endpoint{IP: netip.MustParseAddr(ip), Ready: serving, Serving: serving}
}

func TestStaleFlows(t *testing.T) {
	name := model.ServiceName{Namespace: "ns", Name: "a"}
	all := model.NewServiceSet(name)
	tests := []struct {
		name       string
		family     model.Family
		prev, next []model.Service
		want       []string // filters, space-joined
	}{
		{
			name: "endpoint removed: flows DNATed to it, on every VIP and the NodePort",
			prev: []model.Service{udpService("a", ep("10.0.0.1", true), ep("10.0.0.2", true))},
			next: []model.Service{udpService("a", ep("10.0.0.2", true))},
			want: []string{
				"-p udp --dport 30053 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 1.2.3.4 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 172.30.0.1 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 192.168.99.1 --dst-nat 10.0.0.1",
			},
		},
		{
			name: "endpoint stopped serving counts as removed",
			prev: []model.Service{udpService("a", ep("10.0.0.1", true), ep("10.0.0.2", true))},
			next: []model.Service{udpService("a", ep("10.0.0.1", false), ep("10.0.0.2", true))},
			want: []string{
				"-p udp --dport 30053 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 1.2.3.4 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 172.30.0.1 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 192.168.99.1 --dst-nat 10.0.0.1",
			},
		},
		{
			name: "an endpoint that was not serving had no flows",
			prev: []model.Service{udpService("a", ep("10.0.0.1", false), ep("10.0.0.2", true))},
			next: []model.Service{udpService("a", ep("10.0.0.2", true))},
		},
		{
			name: "endpoint added: nothing",
			prev: []model.Service{udpService("a", ep("10.0.0.2", true))},
			next: []model.Service{udpService("a", ep("10.0.0.1", true), ep("10.0.0.2", true))},
		},
		{
			name: "first endpoints of a UDP port: flows made while it rejected",
			prev: []model.Service{udpService("a")},
			next: []model.Service{udpService("a", ep("10.0.0.1", true))},
			want: []string{
				"-p udp --dport 30053",
				"-p udp --orig-dst 1.2.3.4",
				"-p udp --orig-dst 172.30.0.1",
				"-p udp --orig-dst 192.168.99.1",
			},
		},
		{
			name: "new Service with endpoints is newly active too",
			next: []model.Service{udpService("a", ep("10.0.0.1", true))},
			want: []string{
				"-p udp --dport 30053",
				"-p udp --orig-dst 1.2.3.4",
				"-p udp --orig-dst 172.30.0.1",
				"-p udp --orig-dst 192.168.99.1",
			},
		},
		{
			name: "Service deleted: all its UDP flows",
			prev: []model.Service{udpService("a", ep("10.0.0.1", true))},
			want: []string{
				"-p udp --dport 30053",
				"-p udp --orig-dst 1.2.3.4",
				"-p udp --orig-dst 172.30.0.1",
				"-p udp --orig-dst 192.168.99.1",
			},
		},
		{
			name:   "IPv6: the family's VIPs and endpoints only",
			family: model.IPv6,
			prev:   []model.Service{udpService("a", ep("fd00::1", true), ep("10.0.0.1", true))},
			next:   []model.Service{udpService("a")},
			want: []string{
				"-f ipv6 -p udp --dport 30053 --dst-nat fd00::1",
				"-f ipv6 -p udp --orig-dst fd00:30::1 --dst-nat fd00::1",
			},
		},
		{
			name: "unchanged: nothing",
			prev: []model.Service{udpService("a", ep("10.0.0.1", true))},
			next: []model.Service{udpService("a", ep("10.0.0.1", true))},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fam := tc.family
			if fam == 0 {
				fam = model.IPv4
			}
			var got []string
			for _, f := range staleFlows(fam, tc.prev, tc.next, all) {
				got = append(got, strings.Join(f, " "))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestStaleFlowsOnlyForChangedServices(t *testing.T) {
	prev := []model.Service{udpService("a", ep("10.0.0.1", true))}
	if got := staleFlows(model.IPv4, prev, nil, model.NewServiceSet()); len(got) != 0 {
		t.Errorf("got %v for an empty change set", got)
	}
}
