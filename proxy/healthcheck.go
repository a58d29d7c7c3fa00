package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"

	"github.com/go-logr/logr"

	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/runner"
)

// healthServers are kube-proxy's service health check servers
// (pkg/proxy/healthcheck/service_health.go): one HTTP server on spec.healthCheckNodePort
// of each LoadBalancer Service with externalTrafficPolicy Local, answering 200 while
// this node has ready endpoints of the Service and 503 otherwise, so that an external
// load balancer sends traffic only to nodes that can serve it locally.
type healthServers struct {
	do      runner.Do
	log     logr.Logger
	healthy func() bool

	mu       sync.Mutex
	services map[model.ServiceName]*healthServer
}

type healthServer struct {
	port      int
	servers   []*http.Server
	endpoints int // local ready endpoints; guarded by healthServers.mu
}

// healthCheck is what one Service needs: its port and its local ready endpoints.
type healthCheck struct {
	port      int
	endpoints int
}

func newHealthServers(do runner.Do, log logr.Logger, healthy func() bool) *healthServers {
	if do == nil {
		do = func(fn func() error) error { return fn() }
	}
	return &healthServers{do: do, log: log, healthy: healthy, services: map[model.ServiceName]*healthServer{}}
}

// healthChecks lists the Services that need a health check server, as kube-proxy's
// HealthCheckNodePorts and LocalReadyEndpoints: LoadBalancer, externalTrafficPolicy
// Local, a health check node port; endpoints are the distinct IPs of ready endpoints on
// this node (of any port, either family).
func healthChecks(svcs []model.Service, node string) map[model.ServiceName]healthCheck {
	out := map[model.ServiceName]healthCheck{}
	for i := range svcs {
		svc := &svcs[i]
		if svc.Type != model.LoadBalancer || svc.ExternalTrafficPolicy != model.PolicyLocal ||
			svc.HealthCheckNodePort <= 0 || svc.HealthCheckNodePort > 65535 {
			continue
		}
		local := map[netip.Addr]bool{}
		for _, slice := range svc.EndpointSlices {
			if len(slice.Ports) == 0 {
				continue // kube-proxy keeps endpoints per port: a slice without ports has none
			}
			for _, e := range slice.Endpoints {
				if e.Ready && node != "" && e.NodeName == node {
					local[e.IP.Unmap()] = true
				}
			}
		}
		out[svc.ServiceName()] = healthCheck{port: svc.HealthCheckNodePort, endpoints: len(local)}
	}
	return out
}

// sync opens the servers of new Services, closes those of Services gone (or moved to
// another port) and updates the endpoint counts. A port that cannot be opened is logged
// and tried again on the next sync, as kube-proxy does. addrs restricts the listening
// addresses (--nodeport-addresses); nil listens on all.
func (h *healthServers) sync(want map[model.ServiceName]healthCheck, addrs []netip.Addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, s := range h.services {
		if w, ok := want[name]; !ok || w.port != s.port {
			h.log.V(1).Info("closing health check server", "service", name.String(), "port", s.port)
			s.close()
			delete(h.services, name)
		}
	}
	for name, w := range want {
		s := h.services[name]
		if s == nil {
			var err error
			if s, err = h.open(name, w.port, addrs); err != nil {
				h.log.Error(err, "cannot open health check node port; retrying on the next sync", "service", name.String(), "port", w.port)
				continue
			}
			h.log.V(1).Info("opened health check server", "service", name.String(), "port", w.port)
			h.services[name] = s
		}
		s.endpoints = w.endpoints
	}
}

func (h *healthServers) open(name model.ServiceName, port int, addrs []netip.Addr) (*healthServer, error) {
	s := &healthServer{port: port}
	listen := []string{":" + strconv.Itoa(port)}
	if addrs != nil {
		listen = listen[:0]
		for _, a := range addrs {
			listen = append(listen, netip.AddrPortFrom(a, uint16(port)).String())
		}
	}
	for _, addr := range listen {
		var l net.Listener
		err := h.do(func() error {
			var err error
			l, err = net.Listen("tcp", addr)
			return err
		})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("listening on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: h.handler(name), ErrorLog: nil}
		s.servers = append(s.servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				h.log.Error(err, "health check server stopped", "service", name.String(), "address", addr)
			}
		}()
	}
	return s, nil
}

func (s *healthServer) close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
}

// closeAll closes every server (proxier stopping or turned off).
func (h *healthServers) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, s := range h.services {
		s.close()
		delete(h.services, name)
	}
}

// handler answers exactly as kube-proxy v1.36 does: headers, status and the indented
// JSON body, so load balancers configured for kube-proxy see no difference.
func (h *healthServers) handler(name model.ServiceName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.mu.Lock()
		s, ok := h.services[name]
		count := 0
		if ok {
			count = s.endpoints
		}
		h.mu.Unlock()
		if !ok {
			return // closed while this request was in flight; kube-proxy answers empty too
		}
		healthy := h.healthy()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count != 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, healthBody(name, count, healthy))
	})
}

// healthBody is kube-proxy's response body: its dedented template, tab-indented, no
// trailing newline.
func healthBody(name model.ServiceName, endpoints int, healthy bool) string {
	return fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		name.Namespace, name.Name, endpoints, healthy)
}
