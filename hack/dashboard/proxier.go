package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// proxierRow: the embedded proxier's syncs, rules, errors and withheld endpoints.
func proxierRow() row {
	return row{"Proxier", []cog.Builder[dashboard.Panel]{
		syncTime(),
		rules(),
		syncErrorsAndState(),
		endpointsWithheld(),
	}}
}

func syncTime() cog.Builder[dashboard.Panel] {
	return timeSeries("iptables sync time",
		"Time of one iptables-restore sync on each node, full and partial (herald_proxy_sync_seconds).").
		Span(8).Height(8).
		Unit("s").
		WithTarget(query("A",
			`histogram_quantile(0.5, sum by (le, instance, mode) (rate(herald_proxy_sync_seconds_bucket[$__rate_interval])))`,
			"{{instance}} {{mode}} p50")).
		WithTarget(query("B",
			`histogram_quantile(0.99, sum by (le, instance, mode) (rate(herald_proxy_sync_seconds_bucket[$__rate_interval])))`,
			"{{instance}} {{mode}} p99"))
}

func rules() cog.Builder[dashboard.Panel] {
	return timeSeries("iptables rules",
		"Rules the proxier programs per node, by family and table (herald_proxy_rules).").
		Span(8).Height(8).
		Unit("short").
		WithTarget(query("A", `sum by (instance, family, table) (herald_proxy_rules)`, "{{instance}} {{family}} {{table}}"))
}

func syncErrorsAndState() cog.Builder[dashboard.Panel] {
	return timeSeries("Sync errors and proxier state",
		"Failed syncs per node; the proxier turns itself off when kube-proxy runs on the node (herald_proxy_disabled).").
		Span(8).Height(8).
		Unit("short").
		WithTarget(query("A", `sum by (instance) (increase(herald_proxy_sync_errors_total[$__rate_interval]))`, "{{instance}} errors")).
		WithTarget(query("B", `max by (instance, reason) (herald_proxy_disabled)`, "{{instance}} disabled ({{reason}})"))
}

func endpointsWithheld() cog.Builder[dashboard.Panel] {
	return timeSeries("Endpoints withheld from dead nodes",
		"Endpoints of a node the speakers know dead (its speaker vanished without a goodbye and its host answers nothing) "+
			"that the API server still lists as able to serve; each proxier sends them nothing, long before the node "+
			"lifecycle controller marks them not ready (50 s). Falls to 0 once the API server agrees; the series goes "+
			"when the node is back.").
		Span(12).Height(8).
		Unit("short").
		WithTarget(query("A", `max by (node) (herald_proxy_endpoints_withheld)`, "{{node}}"))
}
