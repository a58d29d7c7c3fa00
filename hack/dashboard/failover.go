package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// failoverRow: how long takeovers after an owner's loss took, and how many there were.
func failoverRow() row {
	return row{"Failover", []cog.Builder[dashboard.Panel]{
		failoverDuration(),
		failovers(),
	}}
}

func failoverDuration() cog.Builder[dashboard.Panel] {
	return timeSeries("Failover duration",
		"From the previous owner leaving or being declared dead to the new owner's first gratuitous ARP/NA (herald_l2_failover_seconds), quantiles over the last hour.").
		Span(16).Height(8).
		Unit("s").
		WithTarget(query("A", `histogram_quantile(0.5, sum by (le) (increase(herald_l2_failover_seconds_bucket[1h])))`, "p50")).
		WithTarget(query("B", `histogram_quantile(0.9, sum by (le) (increase(herald_l2_failover_seconds_bucket[1h])))`, "p90")).
		WithTarget(query("C", `histogram_quantile(0.99, sum by (le) (increase(herald_l2_failover_seconds_bucket[1h])))`, "p99"))
}

func failovers() cog.Builder[dashboard.Panel] {
	return statPanel("Failovers",
		"Takeovers that followed the loss of the previous owner, in the selected time range.").
		Span(8).Height(8).
		Unit("short").
		WithTarget(instantQuery("A", `sum(increase(herald_l2_failover_seconds_count[$__range]))`))
}
