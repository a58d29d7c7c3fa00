package observability

import (
	"slices"
	"testing"
)

func TestWithVIP(t *testing.T) {
	got, err := WithVIP(`max by (ip) (herald_l2_owner{ip=~"$vip"}[$__rate_interval])`, "172.18.255.242")
	if want := `max by (ip) (herald_l2_owner{ip=~"172\\.18\\.255\\.242"}[1m])`; err != nil || got != want {
		t.Errorf("WithVIP = %q, %v; want %q", got, err, want)
	}
	if _, err := ForPrometheus(`rate(x[$__unknown])`); err == nil {
		t.Errorf("ForPrometheus accepted an unknown variable")
	}
}

func TestMetricNames(t *testing.T) {
	got := MetricNames(`histogram_quantile(0.5, sum by (le) (rate(herald_l2_failover_seconds_bucket[1h]))) / herald_l2_owner + herald_l2_owner`)
	if want := []string{"herald_l2_failover_seconds_bucket", "herald_l2_owner"}; !slices.Equal(got, want) {
		t.Errorf("MetricNames = %v, want %v", got, want)
	}
}
