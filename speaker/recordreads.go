package speaker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herald.dev/herald/speaker/quorum"
)

// A speaker back from silence reads every record afresh before it announces again
// (quorum: the records as they stood after its silence began, not as a watch that may
// lag holds them). Listed from the API server, that is every record's bytes to each
// such speaker: after an uneven split of 1,000 nodes, each of the minority's hundreds
// of speakers lists a thousand records of 10 to 20 KB, some GB within seconds of the
// heal. The records digest it already reads out of Quorum serves instead when it can
// be shown to hold the records as they stood after the silence began:
//   - the controller writes the digest from one snapshot of its watch of the records,
//     which brings every write in the order of its etcd revision, so the digest holds
//     every record as it stood once the write of the highest revision it lists (R)
//     was made;
//   - etcd gives revisions in the order writes are made, across every object, so a
//     write of this speaker's (its record or its heartbeat, Leases of the same etcd)
//     that got a revision of R or lower was made before that;
//   - if this speaker began that write after its silence began (by its own clock),
//     the digest is as good as a list made then, which is all a read afresh promises.
//
// Otherwise (no digest in use, the controller behind, no write of this speaker's
// since the silence began that the digest covers) it lists them from the API server
// as before.
const (
	readsAPI    = "api"
	readsDigest = "digest"
)

// newRecordReads is the counter of the reads of every record afresh, by source.
func newRecordReads() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_speaker_record_reads_total",
		Help: "Reads of every speaker record afresh, before a speaker back from silence announces again, by source: api (listed from the API server), digest (the records digest in use held them as of a write of this speaker's made after its silence began).",
	}, []string{"source"})
}

// listAfresh returns the records as they stood after since, and notes them read
// afresh then (status): from the records digest in use if it holds them as of a
// write of this speaker's begun after since, else straight from the API server. heard
// are the members the decision takes as heard.
func (r *records) listAfresh(ctx context.Context, since time.Time, heard []string) ([]quorum.Record, error) {
	var asOf time.Time
	if r.view != nil {
		if rev, ok := r.view.digestRevision(); ok {
			asOf = r.writtenUpTo(rev)
		}
	}
	if !asOf.After(since) {
		recs, err := r.list(ctx, true, heard)
		if err == nil {
			r.reads.WithLabelValues(readsAPI).Inc()
		}
		return recs, err
	}
	recs, err := r.list(ctx, false, heard)
	if err != nil {
		return nil, err
	}
	// The heartbeats' summary is one object: read as before.
	if r.beats != nil {
		if err := r.beats.readAll(ctx); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	if asOf.After(r.readAt) {
		r.readAt = asOf
	}
	r.mu.Unlock()
	r.reads.WithLabelValues(readsDigest).Inc()
	return recs, nil
}
