package records

import "github.com/prometheus/client_golang/prometheus"

// gauges show which watches of the peers' records and heartbeats a speaker runs:
// what it costs the API server.
type gauges struct {
	heartbeats  prometheus.Gauge
	beatSummary prometheus.Gauge
	watches     *prometheus.GaugeVec
}

func newGauges() gauges {
	return gauges{
		heartbeats: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_heartbeats_watched",
			Help: "Peers whose heartbeat (a Lease) this speaker watches: those it does not hear over memberlist, while they are fewer than --heartbeat-summary-from or the controller's heartbeat summary is missing or stale, and for 30 s after. 0 when every speaker hears every other or the summary is in use.",
		}),
		beatSummary: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_speaker_heartbeat_summary_used",
			Help: "1 while this speaker tells the liveness of the peers it does not hear from the controller's heartbeat summary (current, renewed every 10 s); 0 when it needs none or the summary is missing or stale.",
		}),
		watches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_speaker_record_watches",
			Help: "Watches of the speakers' records, by scope: every (1 while this speaker is out of Quorum, and for 30 s after, unless it reads the digest), digest (1 while it reads the controller's records digest instead: out of Quorum in a cluster of --records-digest-from speakers or more, while the digest is current), leaving-out (1: the records that leave this speaker out) and trouble (1: those whose mode is not Quorum), both while in Quorum once the 30 s have passed, by-name (one per peer it does not hear while in Quorum).",
		}, []string{"scope"}),
	}
}

// Collectors are the Keeper's metrics, for a registry.
func (r *Keeper) Collectors() []prometheus.Collector {
	out := []prometheus.Collector{r.writes, r.reads, r.gauges.heartbeats, r.gauges.beatSummary, r.gauges.watches}
	if r.view != nil {
		out = append(out, r.view.events)
	}
	return out
}

// Watching is what a Keeper watches now.
type Watching struct {
	// Every is 1 while a watch of every record runs, Digest while the records digest
	// is read in its stead, Narrow while the watches of the records that leave this
	// speaker out and of those in trouble run; ByName counts the records watched by
	// name, Heartbeats the heartbeats.
	Every, Digest, Narrow, ByName, Heartbeats int
	// SummaryUsed: the peers' liveness comes from the controller's heartbeat summary.
	SummaryUsed bool
}

// Watching returns what the Keeper watches now.
func (r *Keeper) Watching() Watching {
	var w Watching
	if r.view != nil {
		w.Every, w.Digest, w.Narrow, w.ByName = r.view.counts()
	}
	if r.beats != nil {
		w.Heartbeats = len(r.beats.watched())
		w.SummaryUsed = r.beats.summaryUsed()
	}
	return w
}

// Observe sets the gauges of the watches after a decision that does not hear
// unreachable expected speakers.
func (r *Keeper) Observe(unreachable int) {
	if r.beats != nil {
		r.gauges.heartbeats.Set(float64(len(r.beats.watched())))
		used := 0.0
		if unreachable > 0 && r.beats.summaryUsed() {
			used = 1
		}
		r.gauges.beatSummary.Set(used)
	}
	if r.view != nil {
		every, digest, narrow, byName := r.view.counts()
		r.gauges.watches.WithLabelValues("every").Set(float64(every))
		r.gauges.watches.WithLabelValues("digest").Set(float64(digest))
		r.gauges.watches.WithLabelValues("by-name").Set(float64(byName))
		r.gauges.watches.WithLabelValues("trouble").Set(float64(narrow))
		r.gauges.watches.WithLabelValues("leaving-out").Set(float64(narrow))
	}
}
