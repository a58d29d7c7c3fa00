package records

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/speaker/quorum"
)

// Where a read of every record afresh came from (see the package doc), as
// herald_speaker_record_reads_total labels it.
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

// ListAfresh returns the records as they stood after since, and notes them read
// afresh then (status): from the records digest in use if it holds them as of a
// write of this speaker's begun after since, else straight from the API server. heard
// are the members the decision takes as heard.
func (r *Keeper) ListAfresh(ctx context.Context, since time.Time, heard []string) ([]quorum.Record, error) {
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

// List returns the records as the cache and the watches hold them (see list). heard
// are the members the decision takes as heard.
func (r *Keeper) List(ctx context.Context, heard []string) ([]quorum.Record, error) {
	return r.list(ctx, false, heard)
}

// list returns the records in the cache and the watches beside it, or read afresh
// from the API server: always while the watches lack records this speaker needs (it is
// out of Quorum and the watch of every record has not synced yet). heard are the
// members the decision takes as heard.
func (r *Keeper) list(ctx context.Context, fresh bool, heard []string) ([]quorum.Record, error) {
	complete := true
	if r.view != nil && !fresh {
		var wanted bool
		complete, wanted = r.view.complete()
		fresh = wanted && !complete
	}
	var leases coordinationv1.LeaseList
	src, start := r.cache, r.now()
	if fresh {
		src = r.api
	}
	// Read only, never changed: the cache's objects need no copy (a speaker lists
	// every record before each decision). With the watches of its view, the cache
	// holds none.
	if fresh || r.view == nil {
		if err := src.List(ctx, &leases, client.InNamespace(r.namespace), client.HasLabels{Label}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing speaker records: %w", err)
		}
	}
	// The cache and the watches may hold one record in two versions: newer keeps the
	// newest seen.
	byName := make(map[string]*coordinationv1.Lease, len(leases.Items))
	for i := range leases.Items {
		byName[leases.Items[i].Name] = r.newer(&leases.Items[i])
	}
	if r.view != nil && !fresh {
		for _, l := range r.view.leases() {
			byName[l.Name] = r.newer(l)
		}
	}
	out := make([]quorum.Record, 0, len(byName))
	for _, l := range byName {
		if rec, ok := r.parse(l); ok {
			out = append(out, rec)
		}
	}
	if !complete && !fresh {
		more, err := r.unwatched(ctx, byName, heard)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	if fresh && r.beats != nil {
		if err := r.beats.readAll(ctx); err != nil {
			return nil, err
		}
	}
	if fresh {
		r.mu.Lock()
		r.readAt = start
		r.mu.Unlock()
	}
	return out, nil
}

// unwatched returns the records of the writers known to this speaker that its
// watches do not hold (have, by name). The record of a peer it hears lists it and
// says Quorum (else a watch would hold it): it stands in for it, renewed now, as
// changed when it last saw it change. That of a peer it does not hear is watched by
// name, and read straight from the API server until that watch has synced.
func (r *Keeper) unwatched(ctx context.Context, have map[string]*coordinationv1.Lease, heard []string) ([]quorum.Record, error) {
	hears := make(map[string]bool, len(heard))
	for _, n := range heard {
		hears[n] = true
	}
	var synth []quorum.Record
	var unheard []string
	now := r.now()
	r.mu.Lock()
	for name := range r.seen {
		node := nodeOfRecord(name)
		if node == "" || node == r.self {
			continue
		}
		if !hears[node] {
			unheard = append(unheard, node)
			continue
		}
		if have[name] != nil {
			continue
		}
		synth = append(synth, quorum.Record{Node: node, Members: []string{r.self}, Mode: quorum.ModeQuorum,
			RenewedAt: now, Duration: r.cfg.Duration, ChangedAt: r.lastChangeLocked(name)})
	}
	known := len(r.seen)
	r.mu.Unlock()
	slices.Sort(unheard)
	pending := r.view.track(unheard)
	var digested map[string]*coordinationv1.Lease
	if len(pending) > 0 {
		digested = r.view.digestFor(ctx, len(unheard), known)
	}
	for _, node := range unheard {
		name := Name(node)
		if have[name] != nil {
			continue
		}
		var l coordinationv1.Lease
		var err error = apierrors.NewNotFound(coordinationv1.Resource("leases"), name) // its synced watch holds none
		switch d := digested[name]; {
		case d != nil && slices.Contains(pending, node):
			l, err = *d, nil // the digest's version: read, not seen changing, as a direct read
		case slices.Contains(pending, node):
			err = r.api.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, &l)
		}
		switch {
		case apierrors.IsNotFound(err):
			r.mu.Lock()
			r.forgetLocked(name)
			r.mu.Unlock()
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the record of %s: %w", node, err)
		}
		if rec, ok := r.parse(r.newer(&l)); ok {
			synth = append(synth, rec)
		}
	}
	return synth, nil
}

// Live returns recs with the freshness this speaker can tell (see liveness.apply)
// given the members it hears, the view the decision takes, and watches the heartbeats
// of their writers it does not hear.
func (r *Keeper) Live(recs []quorum.Record, heard []string, now time.Time) []quorum.Record {
	if r.beats == nil {
		return recs
	}
	set := make(map[string]bool, len(heard))
	for _, n := range heard {
		set[n] = true
	}
	lv := liveness{heard: func(n string) bool { return set[n] }, beat: r.beats.beat}
	up, lastWrite, _ := r.Status()
	r.beats.setWritesFail(!up, lastWrite)
	r.beats.track(lv.unheard(r.self, recs))
	return lv.apply(r.self, recs, now)
}

// parse notes l (see note) and reads it as a record (see recordFromLease), once per
// version: a speaker lists every record before each decision, and splitting each
// record's member list (one name per member) again every time would be most of its
// work in a large cluster.
// The Records handed out share their slices: they are read only.
func (r *Keeper) parse(l *coordinationv1.Lease) (quorum.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.noteLocked(l, false)
	if s.version != l.ResourceVersion {
		return recordFromLease(l, s.at) // older than the version seen: read, not kept
	}
	if !s.parsed {
		s.rec, s.ok = recordFromLease(l, s.at)
		s.parsed = true
		r.seen[l.Name] = s
	}
	return s.rec, s.ok
}

// newer returns l, or the newer version of the same record that a direct read or
// this speaker's own write saw earlier: the informer's cache may lag behind both, and
// deciding on an older record after a newer one (a peer that heard this node, then
// seemingly no longer) would release IPs only to take them again.
func (r *Keeper) newer(l *coordinationv1.Lease) *coordinationv1.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.newest == nil {
		r.newest = map[string]*coordinationv1.Lease{}
	}
	if prev := r.newest[l.Name]; prev != nil && prev.UID == l.UID && olderVersion(l.ResourceVersion, prev.ResourceVersion) {
		return prev
	}
	r.newest[l.Name] = l // never changed (write copies before it changes r.lease)
	return l
}

// olderVersion says whether resourceVersion a precedes b. They are etcd revisions,
// increasing integers; if either does not parse, a is taken as current.
func olderVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}
