package proxy

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"herald.dev/herald/proxy/model"
)

func TestHealthChecks(t *testing.T) {
	lb := func(name string, edit func(*model.Service)) model.Service {
		s := model.Service{Namespace: "ns", Name: name, Type: model.LoadBalancer,
			ExternalTrafficPolicy: model.PolicyLocal, HealthCheckNodePort: 30100,
			EndpointSlices: []model.EndpointSlice{{
				Ports: []model.EndpointPort{{Name: "a", Protocol: model.TCP, Port: 80}},
				Endpoints: []model.Endpoint{
					{IP: netip.MustParseAddr("10.0.0.1"), NodeName: "me", Ready: true},
					{IP: netip.MustParseAddr("10.0.0.2"), NodeName: "me", Ready: false, Serving: true, Terminating: true},
					{IP: netip.MustParseAddr("10.0.0.3"), NodeName: "other", Ready: true},
				},
			}, {
				// The same pod in a second slice (another port) counts once.
				Ports:     []model.EndpointPort{{Name: "b", Protocol: model.TCP, Port: 81}},
				Endpoints: []model.Endpoint{{IP: netip.MustParseAddr("10.0.0.1"), NodeName: "me", Ready: true}},
			}},
		}
		if edit != nil {
			edit(&s)
		}
		return s
	}
	svcs := []model.Service{
		lb("local", nil),
		lb("cluster", func(s *model.Service) { s.ExternalTrafficPolicy = model.PolicyCluster }),
		lb("nodeport", func(s *model.Service) { s.Type = model.NodePort }),
		lb("noport", func(s *model.Service) { s.HealthCheckNodePort = 0 }),
		lb("none-here", func(s *model.Service) {
			s.EndpointSlices = s.EndpointSlices[:1]
			s.EndpointSlices[0].Endpoints = nil
		}),
	}
	got := healthChecks(svcs, "me")
	want := map[model.ServiceName]healthCheck{
		{Namespace: "ns", Name: "local"}:     {port: 30100, endpoints: 1},
		{Namespace: "ns", Name: "none-here"}: {port: 30100, endpoints: 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestHealthBodyIsKubeProxys(t *testing.T) {
	// kube-proxy's dedented template, written out.
	want := `{
	"service": {
		"namespace": "ns1",
		"name": "svc1"
	},
	"localEndpoints": 2,
	"serviceProxyHealthy": true
}`
	if got := healthBody(model.ServiceName{Namespace: "ns1", Name: "svc1"}, 2, true); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func TestHealthServersServeOpenAndClose(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	hs := newHealthServers(nil, logr.Discard(), healthy.Load)
	defer hs.closeAll()
	name := model.ServiceName{Namespace: "ns", Name: "web"}
	port := freePort(t)
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"

	hs.sync(map[model.ServiceName]healthCheck{name: {port: port, endpoints: 2}}, loopback)
	code, body, hdr := get(t, url)
	if code != http.StatusOK || body != healthBody(name, 2, true) ||
		hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Load-Balancing-Endpoint-Weight") != "2" {
		t.Errorf("with endpoints: %d %q %v", code, body, hdr)
	}

	hs.sync(map[model.ServiceName]healthCheck{name: {port: port, endpoints: 0}}, loopback)
	if code, body, _ := get(t, url); code != http.StatusServiceUnavailable || body != healthBody(name, 0, true) {
		t.Errorf("without endpoints: %d %q", code, body)
	}

	healthy.Store(false)
	hs.sync(map[model.ServiceName]healthCheck{name: {port: port, endpoints: 3}}, loopback)
	if code, body, _ := get(t, url); code != http.StatusServiceUnavailable || body != healthBody(name, 3, false) {
		t.Errorf("proxier unhealthy: %d %q", code, body)
	}

	hs.sync(nil, loopback)
	c := &http.Client{Timeout: time.Second}
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("port still open after the Service went away")
	}
}
