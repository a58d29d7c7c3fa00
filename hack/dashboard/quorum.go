package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// quorumAndAPILoadRow: the speakers' quorum modes, and the load their records (Leases)
// and the controller's aggregates put on the API server.
func quorumAndAPILoadRow() row {
	return row{"Speakers: quorum and API load", []cog.Builder[dashboard.Panel]{
		speakersByQuorumMode(),
		speakersNotInQuorum(),
		recordWrites(),
		recordWatchEvents(),
		recordWatchesOpen(),
		controllerAggregates(),
	}}
}

func speakersByQuorumMode() cog.Builder[dashboard.Panel] {
	return timeSeries("Speakers by quorum mode",
		"How many speakers are in each mode. Quorum: it hears a majority of the speakers (normal). "+
			"Hold: it lost the majority less than --quorum-grace ago and keeps its IPs meanwhile. "+
			"Arbitrated: no side hears a majority; owners are elected among the speakers alive in the API server. "+
			"Minority, Isolated, Rejoining and Restarting announce nothing: a majority goes on without it, it can reach neither "+
			"a majority nor the API server, or it is back (Restarting: started with its node's claims) and waits for its peers to hear it.").
		Span(8).Height(8).
		Unit("short").
		Stacking(stacked()).FillOpacity(30).
		Tooltip(allSeriesTooltip()).
		WithTarget(query("A", `sum by (mode) (herald_speaker_quorum_mode)`, "{{mode}}"))
}

func speakersNotInQuorum() cog.Builder[dashboard.Panel] {
	return table.NewPanelBuilder().
		Title("Speakers not in Quorum").
		Description("Each speaker whose mode is not Quorum now, and the mode (see \"Speakers by quorum mode\"). " +
			"Empty is normal. HeraldSpeakerSilent fires for one that announces nothing for 2 minutes.").
		Datasource(prometheusSource).
		Span(8).Height(8).
		ShowHeader(true).
		WithTarget(tableQuery("A",
			`max by (instance, mode) (herald_speaker_quorum_mode{mode!="Quorum"}) == 1`).
			LegendFormat("{{instance}}")).
		WithTransformation(tableColumns(map[string]string{"instance": "speaker", "mode": "mode"}))
}

func recordWrites() cog.Builder[dashboard.Panel] {
	return timeSeries("Speaker record writes by reason",
		"Writes of the speakers' records (Leases) to the API server, by reason: start, mode (a quorum mode changed), "+
			"view (the members a speaker hears changed), macs, answer (a peer asked whether it is alive). "+
			"None in steady state: a record changes only when something does. "+
			"The heartbeats (one per speaker per 10 s) are not counted here.").
		Span(8).Height(8).
		Unit("wps").
		Stacking(stacked()).FillOpacity(30).
		Tooltip(allSeriesTooltip()).
		WithTarget(query("A", `sum by (reason) (rate(herald_speaker_record_writes_total[$__rate_interval]))`, "{{reason}}"))
}

func recordWatchEvents() cog.Builder[dashboard.Panel] {
	return timeSeries("Record watch events received by the speakers",
		"Events of the speakers' record watches, by watch: every (a speaker out of Quorum in a small cluster, "+
			"or with no records digest), digest (the controller's records digest, one object), leaving-out and "+
			"trouble (in Quorum: the records that leave the speaker out, those of speakers in trouble), by-name "+
			"(in Quorum: the peers it does not hear). None in steady state; a burst at a membership change, "+
			"a partition or a start.").
		Span(8).Height(8).
		Unit("ops").
		Stacking(stacked()).FillOpacity(30).
		Tooltip(allSeriesTooltip()).
		WithTarget(query("A", `sum by (watch) (rate(herald_speaker_record_events_total[$__rate_interval]))`, "{{watch}}"))
}

func recordWatchesOpen() cog.Builder[dashboard.Panel] {
	return timeSeries("Record watches open, by scope",
		"The speakers' open watches of the records, by scope (see \"Record watch events received by the speakers\"). "+
			"In steady state, two per speaker (leaving-out and trouble), or one of every record for 30 s after "+
			"a speaker enters Quorum.").
		Span(8).Height(8).
		Unit("short").
		Tooltip(allSeriesTooltip()).
		WithTarget(query("A", `sum by (scope) (herald_speaker_record_watches)`, "{{scope}}"))
}

func controllerAggregates() cog.Builder[dashboard.Panel] {
	return timeSeries("Controller aggregates: records digest and heartbeat summary",
		"The controller's leader writes two aggregates that spare the API server N² events in a large cluster: "+
			"the records digest (one ConfigMap listing every speaker record, renewed every 10 s and rewritten "+
			"within 200 ms of a change) and the heartbeat summary (which heartbeats are fresh). Speakers reading "+
			"them, the records the digest lists, the digest's size (right axis) and the summary's heartbeats by "+
			"state. Speakers fall back to watching every record, or every heartbeat, when they are missing or stale.").
		Span(8).Height(8).
		Unit("short").
		Tooltip(allSeriesTooltip()).
		WithTarget(query("A", `sum(herald_speaker_record_watches{scope="digest"})`, "speakers reading the digest")).
		WithTarget(query("B", `sum(herald_speaker_heartbeat_summary_used)`, "speakers reading the heartbeat summary")).
		WithTarget(query("C", `max(herald_records_digest_records)`, "records in the digest")).
		WithTarget(query("D", `sum by (state) (herald_heartbeat_summary_speakers)`, "heartbeats {{state}}")).
		WithTarget(query("E", `max(herald_records_digest_bytes)`, "digest size")).
		OverrideByQuery("E", []dashboard.DynamicConfigValue{
			{Id: "unit", Value: "bytes"},
			{Id: "custom.axisPlacement", Value: common.AxisPlacementRight},
		})
}
