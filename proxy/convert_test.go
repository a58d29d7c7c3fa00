package proxy

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func apiService(edit func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "svc1"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "172.30.0.1",
			ClusterIPs: []string{"172.30.0.1"},
			Ports:      []corev1.ServicePort{{Name: "p80", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	if edit != nil {
		edit(svc)
	}
	return svc
}

func wantService(edit func(*model.Service)) model.Service {
	s := model.Service{
		Namespace: "ns1", Name: "svc1", Type: model.ClusterIP,
		ClusterIPs: addrs("172.30.0.1"),
		Ports:      []model.ServicePort{{Name: "p80", Protocol: model.TCP, Port: 80}},
	}
	if edit != nil {
		edit(&s)
	}
	return s
}

func TestConvertService(t *testing.T) {
	vip, proxyMode := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	local := corev1.ServiceInternalTrafficPolicyLocal
	tests := []struct {
		name     string
		edit     func(*corev1.Service)
		want     model.Service
		ok       bool
		problems []error
	}{
		{name: "plain ClusterIP", want: wantService(nil), ok: true},
		{
			name: "LoadBalancer with every field",
			edit: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.ClusterIPs = []string{"172.30.0.1", "fd00:30::1"}
				s.Spec.ExternalIPs = []string{"192.168.99.1", "", " "}
				s.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.0/24 ", "10.0.0.7/8", "::ffff:1.2.3.0/120"}
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.InternalTrafficPolicy = &local
				s.Spec.HealthCheckNodePort = 30100
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
				s.Spec.Ports = []corev1.ServicePort{
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
					{Name: "web", Port: 80, NodePort: 30080}, // protocol unset: TCP
				}
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
					{IP: "1.2.3.4"},
					{IP: "5.6.7.8", IPMode: &vip},
					{IP: "9.9.9.9", IPMode: &proxyMode},    // ignored: the LB proxies
					{Hostname: "lb.example.com"},           // ignored: no IP
					{IP: "fd00:99::1", Hostname: "lb6.ex"}, // both: the IP counts
				}
			},
			want: wantService(func(s *model.Service) {
				s.Type = model.LoadBalancer
				s.ClusterIPs = addrs("172.30.0.1", "fd00:30::1")
				s.ExternalIPs = addrs("192.168.99.1")
				s.LoadBalancerIPs = addrs("1.2.3.4", "5.6.7.8", "fd00:99::1")
				s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"),
					netip.MustParsePrefix("10.0.0.7/8"), netip.MustParsePrefix("1.2.3.0/24")}
				s.ExternalTrafficPolicy = model.PolicyLocal
				s.InternalTrafficPolicy = model.PolicyLocal
				s.HealthCheckNodePort = 30100
				s.SessionAffinityClientIP = true
				s.AffinityTimeoutSeconds = 300
				s.Ports = []model.ServicePort{
					{Name: "dns", Protocol: model.UDP, Port: 53, NodePort: 30053},
					{Name: "web", Protocol: model.TCP, Port: 80, NodePort: 30080},
				}
			}),
			ok: true,
		},
		{
			name: "affinity without config takes the API default",
			edit: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP },
			want: wantService(func(s *model.Service) { s.SessionAffinityClientIP = true }),
			ok:   true,
		},
		{
			name: "old object with clusterIP only",
			edit: func(s *corev1.Service) { s.Spec.ClusterIPs = nil },
			want: wantService(nil), ok: true,
		},
		{
			name: "leading zeros are read as kube-proxy reads them",
			edit: func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = "172.030.000.001", []string{"172.030.000.001"}
			},
			want: wantService(nil), ok: true,
		},
		{
			name: "headless",
			edit: func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			},
			want: wantService(func(s *model.Service) { s.ClusterIPs = nil }), ok: true,
		},
		{
			name: "ExternalName passes through (the generator skips it)",
			edit: func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports = corev1.ServiceTypeExternalName, "", nil, nil
			},
			want: wantService(func(s *model.Service) {
				s.Type, s.ClusterIPs, s.Ports = model.ExternalName, nil, []model.ServicePort{}
			}),
			ok: true,
		},
		{
			name: "bad external and ingress IPs are dropped and reported",
			edit: func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"nonsense", "192.168.99.2"}
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3"}, {IP: "1.2.3.5"}}
			},
			want: wantService(func(s *model.Service) {
				s.ExternalIPs = addrs("192.168.99.2")
				s.LoadBalancerIPs = addrs("1.2.3.5")
			}),
			ok:       true,
			problems: []error{model.ErrInvalidAddress, model.ErrInvalidAddress},
		},
		{
			name:     "bad cluster IP skips the Service",
			edit:     func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"172.30.0.1", "fd00::zz"} },
			problems: []error{model.ErrInvalidAddress},
		},
		{
			name:     "bad source range skips the Service rather than open it",
			edit:     func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "10.0.0.0/33"} },
			problems: []error{model.ErrInvalidPrefix},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems, ok := ConvertService(apiService(tc.edit))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (problems %v)", ok, tc.ok, problems)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems = %v, want %d", problems, len(tc.problems))
			}
			for i, p := range problems {
				if !errors.Is(p, tc.problems[i]) || p.Service != (model.ServiceName{Namespace: "ns1", Name: "svc1"}) {
					t.Errorf("problem %d = %v, want %v of ns1/svc1", i, p, tc.problems[i])
				}
			}
			if ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func apiSlice(edit func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "svc1-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "svc1"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("p80"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("node1")}},
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func TestConvertEndpointSlice(t *testing.T) {
	svc1 := model.ServiceName{Namespace: "ns1", Name: "svc1"}
	plainPort := []model.EndpointPort{{Name: "p80", Protocol: model.TCP, Port: 8080}}
	tests := []struct {
		name     string
		edit     func(*discoveryv1.EndpointSlice)
		want     model.EndpointSlice
		ok       bool
		problems int
	}{
		{
			name: "nil conditions are ready, serving, not terminating",
			want: model.EndpointSlice{Ports: plainPort, Endpoints: []model.Endpoint{
				{IP: netip.MustParseAddr("10.0.0.1"), NodeName: "node1", Ready: true, Serving: true}}},
			ok: true,
		},
		{
			name: "conditions, hints, first address only, no node",
			edit: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints = []discoveryv1.Endpoint{{
					Addresses:  []string{"10.0.0.2", "10.0.0.3"},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)},
					Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}, {Name: "b"}},
						ForNodes: []discoveryv1.ForNode{{Name: "node1"}}},
				}}
			},
			want: model.EndpointSlice{Ports: plainPort, Endpoints: []model.Endpoint{{
				IP: netip.MustParseAddr("10.0.0.2"), Serving: true, Terminating: true,
				ZoneHints: []string{"a", "b"}, NodeHints: []string{"node1"}}}},
			ok: true,
		},
		{
			name: "ports with nil name or nil/zero port are left out; nil protocol is TCP",
			edit: func(s *discoveryv1.EndpointSlice) {
				s.Ports = []discoveryv1.EndpointPort{
					{Port: ptr.To[int32](1)},
					{Name: ptr.To("a")},
					{Name: ptr.To("b"), Port: ptr.To[int32](0)},
					{Name: ptr.To(""), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
					{Name: ptr.To("c"), Port: ptr.To[int32](81)},
				}
				s.Endpoints = nil
			},
			want: model.EndpointSlice{Ports: []model.EndpointPort{
				{Name: "", Protocol: model.UDP, Port: 53}, {Name: "c", Protocol: model.TCP, Port: 81}}},
			ok: true,
		},
		{
			name: "endpoints without addresses are left out, bad ones reported",
			edit: func(s *discoveryv1.EndpointSlice) {
				s.Endpoints = []discoveryv1.Endpoint{{}, {Addresses: []string{"10.0.0.256"}}, {Addresses: []string{"10.0.0.4"}}}
			},
			want: model.EndpointSlice{Ports: plainPort, Endpoints: []model.Endpoint{
				{IP: netip.MustParseAddr("10.0.0.4"), Ready: true, Serving: true}}},
			ok: true, problems: 1,
		},
		{
			name: "FQDN slices are left out",
			edit: func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeFQDN },
		},
		{
			name: "slices without the service-name label are left out",
			edit: func(s *discoveryv1.EndpointSlice) { s.Labels = nil },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, got, problems, ok := ConvertEndpointSlice(apiSlice(tc.edit))
			if ok != tc.ok || len(problems) != tc.problems {
				t.Fatalf("ok = %v, problems = %v; want %v, %d", ok, problems, tc.ok, tc.problems)
			}
			if !ok {
				return
			}
			if name != svc1 {
				t.Errorf("service = %v", name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
