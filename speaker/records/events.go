package records

import (
	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"
)

// The watches a speaker reads the records through, as
// herald_speaker_record_events_total labels them: what reaches each speaker is what
// the records cost the API server.
const (
	eventsEvery      = "every"
	eventsLeavingOut = "leaving-out"
	eventsTrouble    = "trouble"
	eventsByName     = "by-name"
	eventsDigest     = "digest"
)

// newRecordEvents is the counter of the watch events of records a speaker receives.
func newRecordEvents() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_speaker_record_events_total",
		Help: "Watch events of the speakers' records this speaker received, by watch: every (every record, out of Quorum), leaving-out and trouble (in Quorum: the records that leave it out, those not in Quorum), by-name (the records of peers it does not hear, in Quorum), digest (versions of the controller's records digest, read instead of every record). The records listed when a watch starts are not counted.",
	}, []string{"watch"})
}

// countedHandler passes a watch's events on to h, counting them in c.
type countedHandler struct {
	h toolscache.ResourceEventHandler
	c prometheus.Counter
}

func counted(h toolscache.ResourceEventHandler, c *prometheus.CounterVec, watch string) toolscache.ResourceEventHandler {
	if c == nil {
		return h
	}
	return countedHandler{h: h, c: c.WithLabelValues(watch)}
}

func (h countedHandler) OnAdd(obj any, initial bool) {
	if !initial {
		h.c.Inc()
	}
	h.h.OnAdd(obj, initial)
}

func (h countedHandler) OnUpdate(old, cur any) {
	h.c.Inc()
	h.h.OnUpdate(old, cur)
}

func (h countedHandler) OnDelete(obj any) {
	h.c.Inc()
	h.h.OnDelete(obj)
}
