package speaker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/speaker/quorum"
)

// records reads the speakers' records and writes this speaker's own. Writes run in
// their own goroutine: an unreachable API server never delays an election.
type records struct {
	self      string
	namespace string
	cfg       RecordConfig
	log       logr.Logger
	cache     client.Reader
	api       client.Reader // uncached, for reads that must be current
	writer    client.Writer
	changed   func() // pokes the election
	macs      func(node string, macs []string)
	beats     *heartbeats // nil: every record's own renewal is all there is
	// view, when set, holds the watches of the records (recordview.go), and the
	// cache none; nil: the cache holds every record.
	view *recordWatches
	now  func() time.Time

	wake chan struct{}
	// beatNow asks run for a heartbeat now (renewHeartbeat).
	beatNow chan struct{}
	// keysReport, when set, is the fingerprints of the memberlist keys this speaker
	// holds, which its heartbeat publishes (memberkey.ReportAnnotation).
	keysReport func() string

	mu sync.Mutex
	// heard says whether this speaker hears node over memberlist; nil until
	// memberlist runs.
	heard func(node string) bool
	wish  recordWish
	// seen is, by lease name, when its current version was first seen, and that
	// version read as a record once asked for (see parse).
	seen   map[string]seenVersion
	apiUp  bool
	apiAt  time.Time // last successful write of our record or heartbeat
	readAt time.Time // last direct read of every record
	// lease and beat are the versions of the record and the heartbeat this speaker
	// wrote last.
	lease, beat *coordinationv1.Lease
	// newest is the newest version seen of each record, by name (see newer).
	newest map[string]*coordinationv1.Lease
	// primed: the first decision was taken. Versions first seen before it are what
	// the records were at start-up, not changes seen happening.
	primed bool
	// left is when each record was last seen leaving a watch's selection (it began
	// listing this speaker, or left trouble): a change, whose new version only a
	// watch by name would show.
	left map[string]time.Time
	// own are this speaker's latest writes, oldest first (writtenUpTo).
	own []ownWrite
	// heardOnce are the members this speaker has heard over memberlist since it
	// started, whether or not it saw their records (see known).
	heardOnce map[string]struct{}

	// writes counts the record's successful writes by reason (recordwrites.go);
	// reads the reads of every record afresh by source (recordreads.go).
	writes, reads *prometheus.CounterVec
}

type seenVersion struct {
	uid     types.UID
	version string
	at      time.Time
	// observed: at is when a watch event showed it (see note).
	observed bool
	// rec is this version as a record, ok whether it is one; parsed once rec is set.
	rec        quorum.Record
	ok, parsed bool
}

func newRecords(self, namespace string, cfg RecordConfig, c, api client.Reader, w client.Writer, changed func(),
	macs func(node string, macs []string), log logr.Logger) *records {
	return &records{
		self: self, namespace: namespace, cfg: cfg, log: log, cache: c, api: api, writer: w, changed: changed, macs: macs, now: time.Now,
		wake: make(chan struct{}, 1), beatNow: make(chan struct{}, 1), seen: map[string]seenVersion{}, left: map[string]time.Time{}, heardOnce: map[string]struct{}{}, apiUp: true,
		wish:   recordWish{mode: quorum.ModeRejoining, members: []string{self}},
		writes: newRecordWrites(), reads: newRecordReads(),
	}
}

// watch notes when each record in c changes (by this node's clock) and pokes the
// election, for records without a view (whose watches hold the records otherwise):
// the cache then holds every record.
func (r *records) watch(ctx context.Context, c cache.Informers) error {
	if r.view != nil {
		return nil
	}
	inf, err := c.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("watching speaker records: %w", err)
	}
	if _, err = inf.AddEventHandler(r.handler(true)); err != nil {
		return fmt.Errorf("watching speaker records: %w", err)
	}
	return nil
}

// handler is what a watch of records calls. gone says whether a record leaving the
// watch was deleted; if not, it may only have left the watch's selection.
func (r *records) handler(gone bool) toolscache.ResourceEventHandler {
	return recordEvents{r: r, gone: gone}
}

// recordEvents is a watch's handler (records.handler).
type recordEvents struct {
	r    *records
	gone bool
}

// OnAdd notes a record; one listed when the watch started was not seen changing.
func (h recordEvents) OnAdd(obj any, initial bool) { h.noted(obj, !initial) }

func (h recordEvents) OnUpdate(old, cur any) {
	o, _ := old.(*coordinationv1.Lease)
	c, ok := cur.(*coordinationv1.Lease)
	// A peer this speaker hears renewing a record that says the same as before
	// (in answer to a peer asking, or a speaker of an older version renewing
	// on a timer) changes no decision: note when, but run no election. A
	// degraded speaker decides again every recheckDegraded anyway, and one it
	// cannot hear pokes as before: its renewal tells it is alive.
	if ok && o != nil && renewalOnly(o, c) && c.Spec.HolderIdentity != nil && h.r.hears(*c.Spec.HolderIdentity) {
		h.r.note(c, true)
		return
	}
	h.noted(cur, true)
}

func (h recordEvents) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		h.r.noteLeft(l.Name, h.gone)
		if h.gone && l.Spec.HolderIdentity != nil {
			h.r.macs(*l.Spec.HolderIdentity, nil)
		}
	}
	h.r.changed()
}

func (h recordEvents) noted(obj any, observed bool) {
	r := h.r
	if l, ok := obj.(*coordinationv1.Lease); ok {
		r.note(l, observed)
		if macs := splitList(l.Annotations[RecordMACsAnnotation]); l.Spec.HolderIdentity != nil && (len(macs) > 0 || r.view == nil) {
			r.macs(*l.Spec.HolderIdentity, macs)
		}
	}
	r.changed()
}

// noteLeft notes that the record name left a watch (see records.left), or was
// deleted: then it is forgotten.
func (r *records) noteLeft(name string, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case gone:
		r.forgetLocked(name)
	case r.primed:
		r.left[name] = r.now()
	}
}

// forgetLocked forgets the record name: it no longer exists. Known records are
// watched by name while their writers are unheard (see unwatched), so a deleted one
// must not stay known.
func (r *records) forgetLocked(name string) {
	delete(r.seen, name)
	delete(r.left, name)
	delete(r.newest, name)
	delete(r.heardOnce, nodeOfRecord(name))
}

// hears says whether this speaker hears node over memberlist.
func (r *records) hears(node string) bool {
	r.mu.Lock()
	heard := r.heard
	r.mu.Unlock()
	return heard != nil && heard(node)
}

// setHeard tells the records whom this speaker hears, once memberlist runs.
func (r *records) setHeard(heard func(node string) bool) {
	r.mu.Lock()
	r.heard = heard
	r.mu.Unlock()
}

// renewalOnly says whether b is a renewal of a: the same writer saying the same.
func renewalOnly(a, b *coordinationv1.Lease) bool {
	if a.UID != b.UID || !ptr.Equal(a.Spec.HolderIdentity, b.Spec.HolderIdentity) ||
		!ptr.Equal(a.Spec.LeaseDurationSeconds, b.Spec.LeaseDurationSeconds) || a.Labels[RecordLabel] != b.Labels[RecordLabel] {
		return false
	}
	for _, k := range recordContentKeys {
		if a.Annotations[k] != b.Annotations[k] {
			return false
		}
	}
	return true
}

// note records when this version of l was first seen changing: now if observed (a
// watch event as it happened, or this speaker's own write); else (read from a list,
// which tells nothing of when) when this speaker last saw the record change, or the
// zero time, that is before this speaker started. A version first read, then seen
// in an event, was seen changing then. Stamping a version first read, say when a
// peer goes unheard and its record is read straight from the API server, with the
// time of the read would make an old record look like a live speaker's answer.
func (r *records) note(l *coordinationv1.Lease, observed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(l, observed)
}

func (r *records) noteLocked(l *coordinationv1.Lease, observed bool) seenVersion {
	observed = observed && r.primed
	s, ok := r.seen[l.Name]
	switch {
	case ok && s.uid == l.UID && olderVersion(l.ResourceVersion, s.version):
		// A watch that lags another (or the digest, which lags the records) brings
		// back a version older than one seen: no change, and the newer one's time
		// stands.
		return s
	case !ok || s.uid != l.UID || s.version != l.ResourceVersion:
		last := r.lastChangeLocked(l.Name)
		if t := r.writtenBefore(l.ResourceVersion); t.After(last) {
			last = t
		}
		s = seenVersion{uid: l.UID, version: l.ResourceVersion, at: last, observed: observed}
		if observed {
			s.at = r.now()
		}
	case observed && !s.observed:
		s.at, s.observed = r.now(), true
		s.rec.ChangedAt = s.at
	default:
		return s
	}
	r.seen[l.Name] = s
	return s
}

// lastChangeLocked is when this speaker last saw the record name change: a version
// first seen, or the record leaving a watch; zero if never since it started.
func (r *records) lastChangeLocked(name string) time.Time {
	last := r.seen[name].at
	if t := r.left[name]; t.After(last) {
		last = t
	}
	return last
}

// known returns the speakers this one's record's misses labels are taken from: the
// writers of the records it has seen (and not seen deleted), the members it has heard
// since it started (heard now included), and expected. A reader's first record,
// written in trouble, reaches every writer's watches; the members heard stand in for
// it where a watch lost that event (a relist lists only what its selector holds now):
// a reader this speaker once heard and no longer does gets its misses label even so.
func (r *records) known(expected, heard []string) []string {
	r.mu.Lock()
	for _, n := range heard {
		r.heardOnce[n] = struct{}{}
	}
	out := make([]string, 0, len(r.seen)+len(r.heardOnce)+len(expected))
	for name := range r.seen {
		if node := nodeOfRecord(name); node != "" {
			out = append(out, node)
		}
	}
	for n := range r.heardOnce {
		out = append(out, n)
	}
	r.mu.Unlock()
	return append(out, expected...)
}

// forgetNode forgets a speaker whose Node is gone: it is no longer known (known).
func (r *records) forgetNode(node string) {
	r.mu.Lock()
	delete(r.heardOnce, node)
	r.mu.Unlock()
}

// prime marks the start-up over: versions seen from now on are changes.
func (r *records) prime() {
	r.mu.Lock()
	r.primed = true
	r.mu.Unlock()
}

// list returns the records in the cache and the watches beside it, or read afresh
// from the API server: always while the watches lack records this speaker needs (it is
// out of Quorum and the watch of every record has not synced yet). heard are the
// members the decision takes as heard.
func (r *records) list(ctx context.Context, fresh bool, heard []string) ([]quorum.Record, error) {
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
	// every record before each decision, a thousand at a thousand nodes). With the
	// watches of its view, the cache holds none.
	if fresh || r.view == nil {
		if err := src.List(ctx, &leases, client.InNamespace(r.namespace), client.HasLabels{RecordLabel}, client.UnsafeDisableDeepCopy); err != nil {
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
func (r *records) unwatched(ctx context.Context, have map[string]*coordinationv1.Lease, heard []string) ([]quorum.Record, error) {
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
		name := RecordName(node)
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

// live returns recs with the freshness this speaker can tell (see liveness.apply)
// given the members it hears, the view the decision takes, and watches the heartbeats
// of their writers it does not hear.
func (r *records) live(recs []quorum.Record, heard []string, now time.Time) []quorum.Record {
	if r.beats == nil {
		return recs
	}
	set := make(map[string]bool, len(heard))
	for _, n := range heard {
		set[n] = true
	}
	lv := liveness{heard: func(n string) bool { return set[n] }, beat: r.beats.beat}
	up, lastWrite, _ := r.status()
	r.beats.setWritesFail(!up, lastWrite)
	r.beats.track(lv.unheard(r.self, recs))
	return lv.apply(r.self, recs, now)
}

// parse notes l (see note) and reads it as a record (see recordFromLease), once per
// version: a speaker lists every record before each decision, and splitting each
// record's member list again every time (a thousand names in each of a thousand
// records at a thousand nodes) was most of a speaker's work in the scale benchmark.
// The Records handed out share their slices: they are read only.
func (r *records) parse(l *coordinationv1.Lease) (quorum.Record, bool) {
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
func (r *records) newer(l *coordinationv1.Lease) *coordinationv1.Lease {
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

// api returns whether the last write of our record succeeded, when the last
// successful one was, and when the records were last read afresh.
func (r *records) status() (up bool, at, readAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.apiUp, r.apiAt, r.readAt
}

// freshnessAsOf is the time the freshness of what this speaker read is judged at: now,
// or its last successful write while its writes fail (as the quorum rule judges the
// records), so that what it read does not expire just because it cannot renew.
func (r *records) freshnessAsOf() time.Time {
	up, at, _ := r.status()
	if !up && !at.IsZero() {
		return at
	}
	return r.now()
}
