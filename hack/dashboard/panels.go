package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// prometheusSource is the $datasource variable: every panel and query reads it.
var prometheusSource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// query is a range query of a panel; legend names its series.
func query(refID, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(prometheusSource).
		RefId(refID).
		Expr(expr).
		LegendFormat(legend)
}

// instantQuery is a query evaluated once, at the end of the time range.
func instantQuery(refID, expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(prometheusSource).
		RefId(refID).
		Expr(expr).
		Instant()
}

// tableQuery is an instant query whose series become the rows of a table.
func tableQuery(refID, expr string) *prometheus.DataqueryBuilder {
	return instantQuery(refID, expr).Format(prometheus.PromQueryFormatTable)
}

// timeSeries is a time series panel with Grafana's own defaults spelled out (the SDK
// would otherwise hide the legend): a legend listed below, a tooltip of one series.
func timeSeries(title, description string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(prometheusSource).
		Legend(legendBelow()).
		Tooltip(tooltip(common.TooltipDisplayModeSingle, common.SortOrderNone))
}

// statPanel is a panel of one big value per series, laid out as Grafana would by
// default (the SDK leaves the orientation empty otherwise).
func statPanel(title, description string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(prometheusSource).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(lastValue())
}

// legendBelow is a legend listing the series under the graph.
func legendBelow() *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().
		ShowLegend(true).
		DisplayMode(common.LegendDisplayModeList).
		Placement(common.LegendPlacementBottom)
}

// allSeriesTooltip is a tooltip showing every series at the cursor.
func allSeriesTooltip() *common.VizTooltipOptionsBuilder {
	return tooltip(common.TooltipDisplayModeMulti, common.SortOrderNone)
}

func tooltip(mode common.TooltipDisplayMode, sort common.SortOrder) *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(mode).Sort(sort)
}

// stacked stacks a panel's series on each other.
func stacked() *common.StackingConfigBuilder {
	return common.NewStackingConfigBuilder().Mode(common.StackingModeNormal).Group("A")
}

// lastValue reduces a series to its last value that is not null.
func lastValue() *common.ReduceDataOptionsBuilder {
	return common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})
}

// thresholds colours values green, then each step's colour from its value on.
func thresholds(steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().
		Mode(dashboard.ThresholdsModeAbsolute).
		Steps(append([]dashboard.Threshold{{Color: "green"}}, steps...))
}

// from is a threshold step: colour from value on.
func from(value float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: &value, Color: color}
}

// tableColumns is the transformation that drops the Time and Value columns of an
// instant table query and names the label columns.
func tableColumns(names map[string]string) dashboard.DataTransformerConfig {
	return dashboard.DataTransformerConfig{
		Id: "organize",
		Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "Value": true},
			"renameByName":  names,
		},
	}
}

func ptr[T any](v T) *T { return &v }
