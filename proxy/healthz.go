package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"herald.dev/herald/proxy/runner"
)

// healthzServer is the proxier's own health server, kube-proxy's --healthz-bind-address:
// /healthz and /livez (proxyhealth.go says what they answer). It runs only while the
// proxier is on: where kube-proxy runs the port is kube-proxy's. A port that cannot be
// opened (kube-proxy holds it, say) is logged and tried again every healthzRetry, as
// kube-proxy retries its own.
type healthzServer struct {
	addr    string
	do      runner.Do
	log     logr.Logger
	handler http.Handler

	stop, done chan struct{}
	stopOnce   sync.Once
	mu         sync.Mutex
	srv        *http.Server // the one serving, if any
	started    bool
}

const healthzRetry = 5 * time.Second

func newHealthzServer(addr string, do runner.Do, log logr.Logger, handler http.Handler) *healthzServer {
	if do == nil {
		do = func(fn func() error) error { return fn() }
	}
	return &healthzServer{addr: addr, do: do, log: log, handler: handler,
		stop: make(chan struct{}), done: make(chan struct{})}
}

// run serves until close; call it once, in a goroutine of its own.
func (s *healthzServer) run() {
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	defer close(s.done)
	for {
		err := s.serveOnce()
		if err == nil {
			return
		}
		s.log.Error(err, "proxier health server down; trying again", "address", s.addr, "in", healthzRetry.String())
		select {
		case <-s.stop:
			return
		case <-time.After(healthzRetry):
		}
	}
}

// serveOnce listens and serves until close (nil) or a failure.
func (s *healthzServer) serveOnce() error {
	var l net.Listener
	err := s.do(func() error {
		var err error
		l, err = net.Listen("tcp", s.addr)
		return err
	})
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	select {
	case <-s.stop:
		s.mu.Unlock()
		_ = l.Close()
		return nil
	default:
	}
	s.srv = srv
	s.mu.Unlock()
	s.log.V(1).Info("proxier health server listening", "address", s.addr)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving on %s: %w", s.addr, err)
	}
	return nil
}

// close stops the server and, if it ran, waits until its port is free. Safe to call
// more than once, and before run.
func (s *healthzServer) close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.mu.Lock()
	if s.srv != nil {
		_ = s.srv.Close()
	}
	started := s.started
	s.mu.Unlock()
	if started {
		<-s.done
	}
}

// healthzMux answers /healthz (health and node eligibility) and /livez (health only)
// exactly as kube-proxy v1.36 does: JSON without indentation, 200 or 503, and
// lastUpdated set to the current time when healthy.
func (p *Proxier) healthzMux() http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, h proxyHealth, healthy bool, counter func(code string)) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		code := http.StatusServiceUnavailable
		if healthy {
			code = http.StatusOK
			h.LastUpdated = h.CurrentTime
		}
		counter(strconv.Itoa(code))
		body, _ := json.Marshal(h) // plain data: cannot fail
		w.WriteHeader(code)
		_, _ = w.Write(body)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		h := p.proxyHealth()
		eligible := true
		if p.cfg.Node != nil {
			eligible = nodeEligible(p.cfg.Node(r.Context()))
		}
		h.NodeEligible = &eligible
		answer(w, h, h.Healthy && eligible, func(code string) { p.metrics.healthz.WithLabelValues(code).Inc() })
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		h := p.proxyHealth()
		answer(w, h, h.Healthy, func(code string) { p.metrics.livez.WithLabelValues(code).Inc() })
	})
	return mux
}
