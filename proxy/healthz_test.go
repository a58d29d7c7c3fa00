package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
)

// TestHealthzServer asks the real server on loopback what load balancers and probes
// would ask: healthy, a change overdue, a Node the autoscaler is about to delete.
func TestHealthzServer(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64 // seconds after start
	var node atomic.Pointer[corev1.Node]
	node.Store(&corev1.Node{})
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxier{
		cfg:     Config{HealthTimeout: time.Minute, Node: func(context.Context) *corev1.Node { return node.Load() }},
		metrics: m, now: func() time.Time { return start.Add(time.Duration(clock.Load()) * time.Second) },
		pending:     map[model.Family]time.Time{},
		lastUpdated: map[model.Family]time.Time{model.IPv4: start},
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	s := newHealthzServer(addr, nil, logr.Discard(), p.healthzMux())
	go s.run()
	defer s.close()

	type answer struct {
		code int
		body map[string]any
	}
	ask := func(path string) answer {
		t.Helper()
		var a answer
		eventuallyOK := time.Now().Add(5 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + path)
			if err == nil {
				defer resp.Body.Close()
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s Content-Type %q", path, ct)
				}
				a.code = resp.StatusCode
				if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				return a
			}
			if time.Now().After(eventuallyOK) {
				t.Fatalf("GET %s: %v", path, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stamp := func(s int64) string { return start.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano) }

	// Synced an hour ago, nothing queued: healthy, and lastUpdated reads "now".
	clock.Store(3600)
	hz, lz := ask("/healthz"), ask("/livez")
	if hz.code != 200 || hz.body["healthy"] != true || hz.body["nodeEligible"] != true ||
		hz.body["lastUpdated"] != stamp(3600) || hz.body["currentTime"] != stamp(3600) {
		t.Errorf("healthy /healthz: %+v", hz)
	}
	if _, ok := lz.body["nodeEligible"]; lz.code != 200 || ok {
		t.Errorf("healthy /livez: %+v", lz)
	}
	if st, _ := hz.body["status"].(map[string]any)["IPv4"].(map[string]any); st["healthy"] != true || st["lastUpdated"] != stamp(0) {
		t.Errorf("status: %+v", hz.body["status"])
	}

	// A change waiting 60 s: both 503, lastUpdated the real last sync.
	p.mu.Lock()
	p.pending[model.IPv4] = start.Add(3540 * time.Second)
	p.mu.Unlock()
	hz, lz = ask("/healthz"), ask("/livez")
	if hz.code != 503 || hz.body["healthy"] != false || hz.body["lastUpdated"] != stamp(0) || lz.code != 503 {
		t.Errorf("overdue: /healthz %+v /livez %+v", hz, lz)
	}

	// Synced again, but the autoscaler is deleting the node: /healthz says so, /livez
	// does not care.
	p.mu.Lock()
	delete(p.pending, model.IPv4)
	p.mu.Unlock()
	node.Store(&corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}}})
	hz, lz = ask("/healthz"), ask("/livez")
	if hz.code != 503 || hz.body["healthy"] != true || hz.body["nodeEligible"] != false || lz.code != 200 {
		t.Errorf("node leaving: /healthz %+v /livez %+v", hz, lz)
	}

	for _, c := range []struct {
		vec  *prometheus.CounterVec
		code string
		want float64
	}{{m.healthz, "200", 1}, {m.healthz, "503", 2}, {m.livez, "200", 2}, {m.livez, "503", 1}} {
		var got dto.Metric
		if err := c.vec.WithLabelValues(c.code).Write(&got); err != nil || got.GetCounter().GetValue() != c.want {
			t.Errorf("counter code %s = %v %v, want %v", c.code, got.GetCounter().GetValue(), err, c.want)
		}
	}

	s.close()
	if resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + "/livez"); err == nil {
		resp.Body.Close()
		t.Error("still answering after close")
	}
}

func TestHealthzAddr(t *testing.T) {
	for flag, want := range map[string]string{
		"": "", "0": "", "0.0.0.0:10256": "0.0.0.0:10256", ":10256": ":10256", "127.0.0.1": "127.0.0.1:10256",
		"[::1]:9000": "[::1]:9000", "::": "[::]:10256",
	} {
		if got, err := healthzAddr(flag); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", flag, got, err, want)
		}
	}
	for _, flag := range []string{"localhost:10256", "0.0.0.0:0", "0.0.0.0:99999", "1.2.3.4:x", "1.2.3.4:"} {
		if got, err := healthzAddr(flag); err == nil {
			t.Errorf("%q accepted as %q", flag, got)
		}
	}
}
