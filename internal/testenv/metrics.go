package testenv

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// Metrics are the metric families an API server serves on /metrics, by name.
type Metrics map[string]*dto.MetricFamily

// APIServerMetrics reads the metrics of the API server cfg points at: what it counts
// of the requests it served and the watch events it sent, as it sees them.
func APIServerMetrics(cfg *rest.Config) (Metrics, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server client: %w", err)
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s/metrics: %s: %s", cfg.Host, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	return families, nil
}

// Sum adds up the samples of the family name whose labels match (nil: every sample):
// a counter's or a gauge's value, a histogram's or a summary's sum.
func (m Metrics) Sum(name string, match func(labels map[string]string) bool) float64 {
	f := m[name]
	if f == nil {
		return 0
	}
	var total float64
	for _, s := range f.GetMetric() {
		if match != nil {
			labels := make(map[string]string, len(s.GetLabel()))
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if !match(labels) {
				continue
			}
		}
		switch {
		case s.Counter != nil:
			total += s.GetCounter().GetValue()
		case s.Gauge != nil:
			total += s.GetGauge().GetValue()
		case s.Histogram != nil:
			total += s.GetHistogram().GetSampleSum()
		case s.Summary != nil:
			total += s.GetSummary().GetSampleSum()
		case s.Untyped != nil:
			total += s.GetUntyped().GetValue()
		}
	}
	return total
}
