package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// speakersAndPoolsRow: the speakers' memberlist, and the controller's address pools.
func speakersAndPoolsRow() row {
	return row{"Speakers and pools", []cog.Builder[dashboard.Panel]{
		memberlistMembers(),
		poolUsage(),
		addressesAndAllocations(),
	}}
}

func memberlistMembers() cog.Builder[dashboard.Panel] {
	return timeSeries("Memberlist members seen by each speaker",
		"Every speaker should see every other one; a speaker that sees fewer is partitioned from the rest.").
		Span(8).Height(8).
		Unit("short").
		Tooltip(allSeriesTooltip()).
		WithTarget(query("A", `herald_memberlist_members`, "{{instance}}"))
}

func poolUsage() cog.Builder[dashboard.Panel] {
	return bargauge.NewPanelBuilder().
		Title("Pool usage").
		Description("Share of each IPAddressPool's addresses in use (herald_pool_addresses).").
		Datasource(prometheusSource).
		Span(8).Height(8).
		Unit("percentunit").Min(0).Max(1).
		Thresholds(thresholds(from(0.8, "orange"), from(0.9, "red"))).
		Orientation(common.VizOrientationHorizontal).
		DisplayMode(common.BarGaugeDisplayModeGradient).
		ReduceOptions(lastValue()).
		WithTarget(instantQuery("A",
			`sum by (pool) (herald_pool_addresses{state="in_use"})`+
				` / (sum by (pool) (herald_pool_addresses{state="in_use"}) + sum by (pool) (herald_pool_addresses{state="available"}))`).
			LegendFormat("{{pool}}"))
}

func addressesAndAllocations() cog.Builder[dashboard.Panel] {
	return timeSeries("Addresses in use and allocations",
		"Addresses in use per pool, and allocation outcomes per second.").
		Span(8).Height(8).
		Unit("short").
		WithTarget(query("A", `sum by (pool) (herald_pool_addresses{state="in_use"})`, "{{pool}} in use")).
		WithTarget(query("B", `sum by (result) (rate(herald_allocations_total[$__rate_interval]))`, "{{result}} /s"))
}
