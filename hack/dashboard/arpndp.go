package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// arpNDPRow: the speakers' traffic on the wire, per node.
func arpNDPRow() row {
	return row{"ARP and NDP", []cog.Builder[dashboard.Panel]{
		arpTraffic(),
		ndpTraffic(),
	}}
}

func arpTraffic() cog.Builder[dashboard.Panel] {
	return timeSeries("ARP traffic per node",
		"ARP requests for this node, replies for the VIPs it owns, and gratuitous frames sent on takeover.").
		Span(12).Height(8).
		Unit("pps").
		WithTarget(query("A", `sum by (instance) (rate(herald_l2_arp_requests_total[$__rate_interval]))`, "{{instance}} requests")).
		WithTarget(query("B", `sum by (instance) (rate(herald_l2_arp_replies_total[$__rate_interval]))`, "{{instance}} replies")).
		WithTarget(query("C", `sum by (instance) (rate(herald_l2_gratuitous_sent_total[$__rate_interval]))`, "{{instance}} gratuitous"))
}

func ndpTraffic() cog.Builder[dashboard.Panel] {
	return timeSeries("NDP traffic and dropped frames per node",
		"IPv6 neighbour solicitations and advertisements, and frames dropped as malformed or unexpected, by reason.").
		Span(12).Height(8).
		Unit("pps").
		WithTarget(query("A", `sum by (instance) (rate(herald_l2_ndp_solicitations_total[$__rate_interval]))`, "{{instance}} solicitations")).
		WithTarget(query("B", `sum by (instance) (rate(herald_l2_ndp_advertisements_total[$__rate_interval]))`, "{{instance}} advertisements")).
		WithTarget(query("C", `sum by (instance, reason) (rate(herald_l2_dropped_frames_total[$__rate_interval]))`, "{{instance}} dropped ({{reason}})"))
}
