package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
)

// The lab's Prometheus: the Debian package's binary, run in the client namespace,
// scraping the controller and every speaker over the bridge as a cluster's Prometheus
// scrapes their pods. Scrapes and rule evaluations are every second so that tests see
// a failover within seconds.
const (
	prometheusPort     = 9090
	prometheusInterval = "1s"
	prometheusName     = "prometheus"
)

// PrometheusBin is the Prometheus the lab runs (the Debian package installs it here).
var PrometheusBin = "/usr/bin/prometheus"

// Prometheus is a running lab Prometheus and a client for its HTTP API.
type Prometheus struct {
	URL  string // http://<client address>:9090
	Proc netlab.Proc
	hc   *http.Client
}

// StartPrometheus starts Prometheus in the client namespace with rules (a rule file,
// may be nil) and waits until it is ready. Its targets are labelled job=herald-controller
// or job=herald-speaker, and instance=<host name> as the cluster's PodMonitors relabel
// them (instance = node name).
func (s *State) StartPrometheus(ctx context.Context, rules []byte) (*Prometheus, error) {
	if _, err := os.Stat(PrometheusBin); err != nil {
		return nil, fmt.Errorf("lab: %s is missing: install the Debian package prometheus (.ci/run does): %w", PrometheusBin, err)
	}
	client, err := s.Host(ClientHost)
	if err != nil {
		return nil, err
	}
	if p, err := s.proc(ClientHost, prometheusName); err == nil && p.Alive() {
		return nil, fmt.Errorf("lab: Prometheus runs already (pid %d)", p.Pid)
	}
	dir := filepath.Join(s.RunDir, prometheusName)
	if err := os.RemoveAll(dir); err != nil { // a fresh TSDB: no series of an earlier run
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg, err := s.prometheusConfig(rules != nil)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644); err != nil {
		return nil, err
	}
	if rules != nil {
		if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
			return nil, err
		}
	}
	addr := net.JoinHostPort(client.Addr.String(), strconv.Itoa(prometheusPort))
	cmd := []string{PrometheusBin,
		"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}
	np, err := netlab.Spawn(s.RunDir, client.Namespace, client.Name, prometheusName, nil, cmd)
	if err != nil {
		return nil, err
	}
	p := np.Proc
	s.Procs[p.Key()] = p
	if err := s.Save(); err != nil {
		return nil, err
	}
	prom := &Prometheus{URL: "http://" + addr, Proc: p,
		hc: &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(client.Namespace)}, Timeout: 10 * time.Second}}
	if err := WaitHTTP(ctx, client.Namespace, prom.URL+"/-/ready", p, readyTimeout); err != nil {
		return nil, err
	}
	return prom, nil
}

// prometheusConfig scrapes the controller and every worker's speaker.
func (s *State) prometheusConfig(withRules bool) ([]byte, error) {
	type target struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	type job struct {
		JobName       string   `json:"job_name"`
		StaticConfigs []target `json:"static_configs"`
	}
	cp, err := s.Host(CPHost)
	if err != nil {
		return nil, err
	}
	controller := job{JobName: "herald-controller", StaticConfigs: []target{{
		Targets: []string{net.JoinHostPort(cp.Addr.String(), metricsPort(CPHost))},
		Labels:  map[string]string{"instance": cp.Name},
	}}}
	speakers := job{JobName: "herald-speaker"}
	for _, w := range s.Workers() {
		speakers.StaticConfigs = append(speakers.StaticConfigs, target{
			Targets: []string{net.JoinHostPort(w.Addr.String(), metricsPort(w.Name))},
			Labels:  map[string]string{"instance": w.Name},
		})
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     prometheusInterval,
			"scrape_timeout":      prometheusInterval,
			"evaluation_interval": prometheusInterval,
		},
		"scrape_configs": []job{controller, speakers},
	}
	if withRules {
		cfg["rule_files"] = []string{"rules.yaml"}
	}
	return yaml.Marshal(cfg)
}

// metricsPort is the port of the metrics endpoint of a lab host's herald component:
// the controller's on CPHost, a speaker's on a worker.
func metricsPort(host string) string {
	addr := speakerMetrics
	if host == CPHost {
		addr = controllerMetrics
	}
	_, port, _ := strings.Cut(addr, ":")
	return port
}

// Stop stops Prometheus.
func (p *Prometheus) Stop() error { return p.Proc.Stop(stopTimeout) }

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query evaluates expr now and returns the instant vector (a scalar comes back as one
// sample without labels). A parse or evaluation error is an error naming expr.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/api/v1/query",
		strings.NewReader(url.Values{"query": {expr}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus query %q: %w", expr, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("prometheus query %q: HTTP %s: %w", expr, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus query %q: %s: %s", expr, body.ErrorType, body.Error)
	}
	switch body.Data.ResultType {
	case "vector":
		var raw []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(body.Data.Result, &raw); err != nil {
			return nil, fmt.Errorf("prometheus query %q: %w", expr, err)
		}
		out := make([]Sample, 0, len(raw))
		for _, r := range raw {
			v, err := sampleValue(r.Value)
			if err != nil {
				return nil, fmt.Errorf("prometheus query %q: %w", expr, err)
			}
			out = append(out, Sample{Labels: r.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var raw [2]any
		if err := json.Unmarshal(body.Data.Result, &raw); err != nil {
			return nil, fmt.Errorf("prometheus query %q: %w", expr, err)
		}
		v, err := sampleValue(raw)
		return []Sample{{Value: v}}, err
	default:
		return nil, fmt.Errorf("prometheus query %q: result type %q, want vector or scalar", expr, body.Data.ResultType)
	}
}

func sampleValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	return strconv.ParseFloat(s, 64)
}

// Scrape returns the exposition text of a herald component's metrics endpoint, as
// Prometheus would read it: the controller (CPHost) or a worker's speaker.
func (s *State) Scrape(ctx context.Context, host string) (string, error) {
	h, err := s.Host(host)
	if err != nil {
		return "", err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(h.Namespace)}, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort("127.0.0.1", metricsPort(host))+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("lab: metrics of %s: %w", host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("lab: metrics of %s: HTTP %s", host, resp.Status)
	}
	return string(body), nil
}
