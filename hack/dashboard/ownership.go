package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// ownershipRow: which node announces each VIP, and the VIPs with no or several owners.
func ownershipRow() row {
	return row{"Ownership", []cog.Builder[dashboard.Panel]{
		leaderChanges(),
		ownerTimeline(),
		currentOwners(),
		vipsWithoutOwner(),
		vipsWithSeveralOwners(),
	}}
}

func leaderChanges() cog.Builder[dashboard.Panel] {
	return timeSeries("Leader changes per VIP",
		"Takeovers of each VIP, counted by the node that took it over (herald_l2_leader_changes_total).").
		Span(12).Height(8).
		Unit("short").
		DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).LineWidth(1).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementRight).
			Calcs([]string{"sum"})).
		Tooltip(tooltip(common.TooltipDisplayModeMulti, common.SortOrderDescending)).
		WithTarget(query("A",
			`sum by (ip) (increase(herald_l2_leader_changes_total{ip=~"$vip"}[$__rate_interval]))`,
			"{{ip}}"))
}

func ownerTimeline() cog.Builder[dashboard.Panel] {
	owner := dashboard.ValueMapping{ValueMap: &dashboard.ValueMap{
		Type:    dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{"1": {Text: ptr("owner"), Index: ptr[int32](0)}},
	}}
	return statetimeline.NewPanelBuilder().
		Title("Owner timeline").
		Description("Which node announced each VIP when: one lane per VIP and node (herald_l2_owner is 1 on the owner only).").
		Datasource(prometheusSource).
		Span(12).Height(8).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdPaletteClassic)).
		Mappings([]dashboard.ValueMapping{owner}).
		FillOpacity(80).LineWidth(0).
		MergeValues(true).ShowValue(common.VisibilityModeNever).RowHeight(0.8).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(false)).
		Tooltip(tooltip(common.TooltipDisplayModeSingle, common.SortOrderNone)).
		WithTarget(query("A",
			`max by (ip, node) (herald_l2_owner{ip=~"$vip"})`,
			"{{ip}} on {{node}}"))
}

func currentOwners() cog.Builder[dashboard.Panel] {
	return table.NewPanelBuilder().
		Title("Current owners").
		Description("The node announcing each VIP now, and the Service it belongs to.").
		Datasource(prometheusSource).
		Span(12).Height(7).
		WithTarget(tableQuery("A",
			`max by (ip, service, node) (herald_l2_owner{ip=~"$vip"})`)).
		WithTransformation(tableColumns(map[string]string{"ip": "VIP", "service": "Service", "node": "Owner node"}))
}

func vipsWithoutOwner() cog.Builder[dashboard.Panel] {
	return alarmStat("VIPs without an owner",
		"Allocated IPs (herald_service_ip_info) that no speaker announces. `herald status` and the Service's Events say why.",
		`count(max by (ip) (herald_service_ip_info{ip=~"$vip"}) unless on (ip) max by (ip) (herald_l2_owner)) or vector(0)`)
}

func vipsWithSeveralOwners() cog.Builder[dashboard.Panel] {
	return alarmStat("VIPs with more than one owner",
		"VIPs that two or more nodes announce at once (split brain). Short overlaps during a handover are normal.",
		`count(sum by (ip) (herald_l2_owner{ip=~"$vip"}) > 1) or vector(0)`)
}

// alarmStat is a count that should be 0: green at 0, red from 1.
func alarmStat(title, description, expr string) *stat.PanelBuilder {
	return statPanel(title, description).
		Span(6).Height(7).
		Thresholds(thresholds(from(1, "red"))).
		ColorMode(common.BigValueColorModeBackground).
		WithTarget(instantQuery("A", expr))
}
