package observability

import (
	"encoding/json"
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

func TestQueriesOfCollapsedRows(t *testing.T) {
	var d Dashboard
	err := json.Unmarshal([]byte(`{"panels": [
		{"type": "timeseries", "title": "open", "targets": [{"refId": "A", "expr": "herald_l2_owner"}]},
		{"type": "row", "title": "closed", "collapsed": true, "panels": [
			{"type": "timeseries", "title": "inside", "targets": [{"refId": "A", "expr": "herald_pool_addresses"}]}]}]}`), &d)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range qs {
		got = append(got, q.Expr)
	}
	if want := []string{"herald_l2_owner", "herald_pool_addresses"}; !slices.Equal(got, want) {
		t.Errorf("Queries = %q, want %q (a collapsed row's panels included)", got, want)
	}
}
