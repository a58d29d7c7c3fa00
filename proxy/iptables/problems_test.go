package iptables

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"herald.dev/herald/proxy/model"
)

// TestProblems feeds input iptables-restore could not take (or kube-proxy would turn
// into nonsense) and checks that exactly that input is skipped and reported, and that the
// rest comes out as if the bad parts had never been there.
func TestProblems(t *testing.T) {
	valid := service("ns1", "good", "172.30.0.1", loadBalancer(30001, "1.2.3.4"), func(s *model.Service) {
		s.ExternalIPs = addrs("192.168.99.1")
		s.LoadBalancerSourceRanges = prefixes("203.0.113.0/25")
		s.Ports = append(s.Ports, model.ServicePort{Name: "dns", Protocol: model.UDP, Port: 53})
	}, endpoints(ready("10.0.0.1", testNodeName)), endpointsOn("dns", model.UDP, 5353, ready("10.0.0.1", testNodeName)))

	// The same service, with bad parts added.
	bad := valid
	bad.ExternalIPs = append(addrs("192.168.99.1"), netip.Addr{})
	bad.LoadBalancerIPs = append(addrs("1.2.3.4"), addr("fe80::1%eth0"))
	bad.LoadBalancerSourceRanges = append(prefixes("203.0.113.0/25"), netip.Prefix{})
	bad.Ports = append(append([]model.ServicePort{}, valid.Ports...),
		model.ServicePort{Name: "icmp", Protocol: "ICMP", Port: 1},
		model.ServicePort{Name: "zero", Protocol: model.TCP, Port: 0},
		model.ServicePort{Name: "big", Protocol: model.TCP, Port: 70000},
		model.ServicePort{Name: "bignode", Protocol: model.TCP, Port: 81, NodePort: 70000},
		model.ServicePort{Name: "Upper", Protocol: model.TCP, Port: 82},
		model.ServicePort{Name: strings.Repeat("x", 64), Protocol: model.TCP, Port: 83},
		model.ServicePort{Name: "p80", Protocol: model.TCP, Port: 84},
	)
	bad.EndpointSlices = append(append([]model.EndpointSlice{}, valid.EndpointSlices...),
		model.EndpointSlice{Ports: []model.EndpointPort{{Name: "p80", Protocol: model.TCP, Port: 80}}, Endpoints: []model.Endpoint{{Ready: true}}},
		model.EndpointSlice{Ports: []model.EndpointPort{{Name: "p80", Protocol: model.TCP, Port: 0}}, Endpoints: []model.Endpoint{ready("10.0.0.9", "")}},
	)

	skipped := []model.Service{
		service("NS1", "upper", "172.30.0.2"),
		service("ns1", "bad type", "172.30.0.3"),
		service("ns1", "type", "172.30.0.4", func(s *model.Service) { s.Type = "Ingress" }),
		service("ns1", "cluster-ip", "172.30.0.5", func(s *model.Service) { s.ClusterIPs = append(s.ClusterIPs, netip.Addr{}) }),
		service("ns1", "timeout", "172.30.0.6", func(s *model.Service) { s.SessionAffinityClientIP, s.AffinityTimeoutSeconds = true, -1 }),
		service("ns1", "hcnp", "172.30.0.7", func(s *model.Service) { s.HealthCheckNodePort = 65536 }),
		service("ns1", "good", "172.30.0.8"), // duplicate name: the second is skipped
	}

	got := mustGenerate(t, snapshot(model.IPv4, testNode(), append([]model.Service{bad}, skipped...)...), Options{})
	want := mustGenerate(t, snapshot(model.IPv4, testNode(), valid), Options{})
	checkStructure(t, got, nil)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("bad input leaked into the output; %s", diffLines(string(want.Bytes()), string(got.Bytes())))
	}

	wantProblems := []struct {
		service string
		subject string
		err     error
	}{
		{"ns1/good", "external IP", model.ErrInvalidAddress},
		{"ns1/good", "load balancer IP", model.ErrInvalidAddress},
		{"ns1/good", "source range", model.ErrInvalidPrefix},
		{"ns1/good", `port "icmp"`, model.ErrInvalidProtocol},
		{"ns1/good", `port "zero"`, model.ErrInvalidPort},
		{"ns1/good", `port "big"`, model.ErrInvalidPort},
		{"ns1/good", `port "bignode"`, model.ErrInvalidPort},
		{"ns1/good", `port "Upper"`, model.ErrInvalidName},
		{"ns1/good", `port "` + strings.Repeat("x", 64) + `"`, model.ErrInvalidName},
		{"ns1/good", `port "p80"`, model.ErrDuplicate},
		{"ns1/good", "endpoint", model.ErrInvalidAddress},
		{"ns1/good", `endpoint port "p80"`, model.ErrInvalidPort},
		{"NS1/upper", "", model.ErrInvalidName},
		{"ns1/bad type", "", model.ErrInvalidName},
		{"ns1/type", "", model.ErrInvalidType},
		{"ns1/cluster-ip", "", model.ErrInvalidAddress},
		{"ns1/timeout", "", model.ErrInvalidTimeout},
		{"ns1/hcnp", "", model.ErrInvalidPort},
		{"ns1/good", "", model.ErrDuplicate},
	}
	if len(got.Problems) != len(wantProblems) {
		t.Errorf("got %d problems, want %d:", len(got.Problems), len(wantProblems))
		for _, p := range got.Problems {
			t.Log(p)
		}
	}
	for _, w := range wantProblems {
		found := false
		for _, p := range got.Problems {
			if p.Service.String() == w.service && errors.Is(p, w.err) &&
				strings.HasPrefix(p.Subject, w.subject) && (w.subject != "" || p.Subject == "") {
				found = true
			}
		}
		if !found {
			t.Errorf("missing problem %s %q: %v", w.service, w.subject, w.err)
		}
	}
	if msg := got.Problems[0].Error(); !strings.Contains(msg, "ns1/good") || !strings.Contains(msg, "skipped") {
		t.Errorf("problem message lacks context: %q", msg)
	}
}

// A Service port name is a DNS label of up to 63 characters (the 15-character limit is
// the container ports'): one of 63 is programmed, not skipped.
func TestLongPortName(t *testing.T) {
	name := "port-" + strings.Repeat("n", 58)
	svc := service("ns1", "long", "172.30.0.1", func(s *model.Service) {
		s.Ports = []model.ServicePort{{Name: name, Protocol: model.TCP, Port: 80}}
	}, endpointsOn(name, model.TCP, 8080, ready("10.0.0.1", testNodeName)))
	got := mustGenerate(t, snapshot(model.IPv4, testNode(), svc), Options{})
	if len(got.Problems) > 0 {
		t.Fatalf("a port name of %d characters was refused: %v", len(name), got.Problems)
	}
	if !strings.Contains(string(got.Bytes()), "ns1/long:"+name) {
		t.Errorf("no rule for port %q:\n%s", name, got.Bytes())
	}
}

// Other-family addresses are not problems: a dual-stack shell passes everything.
func TestOtherFamilyIsNotAProblem(t *testing.T) {
	svc := service("ns1", "dual", "172.30.0.1", func(s *model.Service) {
		s.ClusterIPs = addrs("172.30.0.1", "fd00:30::1")
		s.ExternalIPs = addrs("2001:db8::1")
	}, endpoints(ready("fd00:10::1", ""), ready("10.0.0.1", "")))
	for _, family := range []model.Family{model.IPv4, model.IPv6} {
		if p := mustGenerate(t, snapshot(family, testNode(), svc), Options{}); len(p.Problems) != 0 {
			t.Errorf("%v: %v", family, p.Problems)
		}
	}
	// IPv4-mapped IPv6 addresses count as IPv4, as net.IP.To4 makes them.
	mapped := service("ns1", "mapped", "172.30.0.2", func(s *model.Service) { s.ClusterIPs = addrs("::ffff:172.30.0.2") },
		endpoints(model.Endpoint{IP: addr("::ffff:10.0.0.2"), Ready: true, Serving: true}))
	p := mustGenerate(t, snapshot(model.IPv4, testNode(), mapped), Options{})
	if !bytes.Contains(p.Bytes(), []byte("-d 172.30.0.2 --dport 80")) || !bytes.Contains(p.Bytes(), []byte("--to-destination 10.0.0.2:80")) {
		t.Errorf("mapped addresses not treated as IPv4:\n%s", p.Bytes())
	}
}
