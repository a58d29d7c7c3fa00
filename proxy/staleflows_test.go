package proxy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"herald.dev/herald/proxy/iptables"
)

// udpService is a dual-stack LoadBalancer with one UDP port (NodePort 30053) and one
// TCP port, and the given endpoints behind both.
func udpService(name string, eps ...iptables.Endpoint) iptables.Service {
	return iptables.Service{
		Namespace: "ns", Name: name, Type: iptables.LoadBalancer,
		ClusterIPs:      addrs("172.30.0.1", "fd00:30::1"),
		ExternalIPs:     addrs("192.168.99.1"),
		LoadBalancerIPs: addrs("1.2.3.4"),
		Ports: []iptables.ServicePort{
			{Name: "dns", Protocol: iptables.UDP, Port: 53, NodePort: 30053},
			{Name: "web", Protocol: iptables.TCP, Port: 80},
		},
		EndpointSlices: []iptables.EndpointSlice{{
			Ports: []iptables.EndpointPort{
				{Name: "dns", Protocol: iptables.UDP, Port: 5353},
				{Name: "web", Protocol: iptables.TCP, Port: 8080},
			},
			Endpoints: eps,
		}},
	}
}

func ep(ip string, serving bool) iptables.Endpoint {
	return iptables.Endpoint{IP: netip.MustParseAddr(ip), Ready: serving, Serving: serving}
}

func TestStaleFlows(t *testing.T) {
	name := iptables.ServiceName{Namespace: "ns", Name: "a"}
	all := iptables.NewServiceSet(name)
	tests := []struct {
		name       string
		family     iptables.Family
		prev, next []iptables.Service
		want       []string // filters, space-joined
	}{
		{
			name: "endpoint removed: flows DNATed to it, on every VIP and the NodePort",
			prev: []iptables.Service{udpService("a", ep("10.0.0.1", true), ep("10.0.0.2", true))},
			next: []iptables.Service{udpService("a", ep("10.0.0.2", true))},
			want: []string{
				"-p udp --dport 30053 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 1.2.3.4 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 172.30.0.1 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 192.168.99.1 --dst-nat 10.0.0.1",
			},
		},
		{
			name: "endpoint stopped serving counts as removed",
			prev: []iptables.Service{udpService("a", ep("10.0.0.1", true), ep("10.0.0.2", true))},
			next: []iptables.Service{udpService("a", ep("10.0.0.1", false), ep("10.0.0.2", true))},
			want: []string{
				"-p udp --dport 30053 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 1.2.3.4 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 172.30.0.1 --dst-nat 10.0.0.1",
				"-p udp --orig-dst 192.168.99.1 --dst-nat 10.0.0.1",
			},
		},
		{
			name: "an endpoint that was not serving had no flows",
			prev: []iptables.Service{udpService("a", ep("10.0.0.1", false), ep("10.0.0.2", true))},
			next: []iptables.Service{udpService("a", ep("10.0.0.2", true))},
		},
		{
			name: "endpoint added: nothing",
			prev: []iptables.Service{udpService("a", ep("10.0.0.2", true))},
			next: []iptables.Service{udpService("a", ep("10.0.0.1", true), ep("10.0.0.2", true))},
		},
		{
			name: "first endpoints of a UDP port: flows made while it rejected",
			prev: []iptables.Service{udpService("a")},
			next: []iptables.Service{udpService("a", ep("10.0.0.1", true))},
			want: []string{
				"-p udp --dport 30053",
				"-p udp --orig-dst 1.2.3.4",
				"-p udp --orig-dst 172.30.0.1",
				"-p udp --orig-dst 192.168.99.1",
			},
		},
		{
			name: "new Service with endpoints is newly active too",
			next: []iptables.Service{udpService("a", ep("10.0.0.1", true))},
			want: []string{
				"-p udp --dport 30053",
				"-p udp --orig-dst 1.2.3.4",
				"-p udp --orig-dst 172.30.0.1",
				"-p udp --orig-dst 192.168.99.1",
			},
		},
		{
			name: "Service deleted: all its UDP flows",
			prev: []iptables.Service{udpService("a", ep("10.0.0.1", true))},
			want: []string{
				"-p udp --dport 30053",
				"-p udp --orig-dst 1.2.3.4",
				"-p udp --orig-dst 172.30.0.1",
				"-p udp --orig-dst 192.168.99.1",
			},
		},
		{
			name:   "IPv6: the family's VIPs and endpoints only",
			family: iptables.IPv6,
			prev:   []iptables.Service{udpService("a", ep("fd00::1", true), ep("10.0.0.1", true))},
			next:   []iptables.Service{udpService("a")},
			want: []string{
				"-f ipv6 -p udp --dport 30053 --dst-nat fd00::1",
				"-f ipv6 -p udp --orig-dst fd00:30::1 --dst-nat fd00::1",
			},
		},
		{
			name: "unchanged: nothing",
			prev: []iptables.Service{udpService("a", ep("10.0.0.1", true))},
			next: []iptables.Service{udpService("a", ep("10.0.0.1", true))},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fam := tc.family
			if fam == 0 {
				fam = iptables.IPv4
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
	prev := []iptables.Service{udpService("a", ep("10.0.0.1", true))}
	if got := staleFlows(iptables.IPv4, prev, nil, iptables.NewServiceSet()); len(got) != 0 {
		t.Errorf("got %v for an empty change set", got)
	}
}
