package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// row is one row of the dashboard: its title and its panels, laid out left to right and
// wrapped at Grafana's 24 columns by the SDK.
type row struct {
	title  string
	panels []cog.Builder[dashboard.Panel]
}

// heraldDashboard is the whole dashboard: settings, variables, then the rows in order.
func heraldDashboard() *dashboard.DashboardBuilder {
	b := dashboard.NewDashboardBuilder("herald: LoadBalancer IPs").
		Uid("herald-l2").
		Description("Owners, leader changes and failovers of herald's VIPs, ARP/NDP traffic, pools and the proxier.").
		Tags([]string{"herald", "loadbalancer"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Version(1).
		Refresh("10s").
		Time("now-1h", "now").
		Timezone("browser").
		WithVariable(datasourceVariable()).
		WithVariable(vipVariable())
	for _, r := range []row{
		ownershipRow(),
		failoverRow(),
		arpNDPRow(),
		speakersAndPoolsRow(),
		proxierRow(),
		quorumAndAPILoadRow(),
	} {
		b.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			b.WithPanel(p)
		}
	}
	return b
}

// datasourceVariable is $datasource, the Prometheus every query goes to.
func datasourceVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Type("prometheus")
}

// vipVariable is $vip, the VIPs the ownership panels show: a regular expression, every
// allocated IP by default.
func vipVariable() *dashboard.QueryVariableBuilder {
	const values = "label_values(herald_service_ip_info, ip)"
	return dashboard.NewQueryVariableBuilder("vip").
		Label("VIP").
		Datasource(prometheusSource).
		Query(dashboard.StringOrMap{Map: map[string]any{"query": values, "refId": "vip"}}).
		Definition(values).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{
			Text:  dashboard.StringOrArrayOfString{String: ptr("All")},
			Value: dashboard.StringOrArrayOfString{String: ptr("$__all")},
		}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}
