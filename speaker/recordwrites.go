package speaker

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Why a speaker wrote its record: what an operator (and the scale benchmark) reads to
// tell what drives the records' API load.
const (
	// writeStart: the first write since the speaker started, or the stored record was
	// found deleted or changed by someone else and written again.
	writeStart = "start"
	// writeMode: its quorum mode changed.
	writeMode = "mode"
	// writeView: the members it hears, the expected ones it does not, or the known ones
	// it does not (its misses labels), changed.
	writeView = "view"
	// writeMACs: the MACs its responders answer with changed.
	writeMACs = "macs"
	// writeAnswer: nothing it says changed, but a peer newly asks whether it is alive
	// (quorum.AskedBy); the renewal is the answer.
	writeAnswer = "answer"
)

// writeReasons are the reasons, in the order writeReason tries them.
var writeReasons = []string{writeStart, writeMode, writeView, writeMACs, writeAnswer}

// writeReason says why wish w is written over what the record says (nil: unknown or
// nothing written yet). The first difference in this order names it.
func writeReason(written *recordWish, w recordWish) string {
	switch {
	case written == nil:
		return writeStart
	case written.mode != w.mode:
		return writeMode
	case !slices.Equal(written.members, w.members) || !slices.Equal(written.unreachable, w.unreachable) || !slices.Equal(written.misses, w.misses):
		return writeView
	case !slices.Equal(written.macs, w.macs):
		return writeMACs
	default:
		return writeAnswer
	}
}

// newRecordWrites is the counter of this speaker's record writes by reason.
func newRecordWrites() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_speaker_record_writes_total",
		Help: "Writes of this speaker's record (a Lease) to the API server, by reason: start (first write, or the stored record was found changed), mode (its quorum mode changed), view (the members it hears or misses changed), macs, answer (a peer newly asks whether it is alive). Heartbeat renewals are not counted.",
	}, []string{"reason"})
}

// coalesceWait is how long a write for reason waits, since the last write was
// sinceWrite ago, to go with the changes that follow: changes of view and new askers
// within window of the last write wait for its end (RecordConfig.Coalesce); the rest,
// and those after a quiet spell, are written at once (0).
func coalesceWait(window time.Duration, reason string, sinceWrite time.Duration) time.Duration {
	if (reason != writeView && reason != writeAnswer) || sinceWrite >= window {
		return 0
	}
	return window - sinceWrite
}
