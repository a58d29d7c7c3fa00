package records

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// How long a speaker back in Quorum keeps watching every record, and how its watches
// by name start and stop (see the package doc).
const (
	recordsWideLinger = 30 * time.Second
	// recordsByNameStarts limits how many watches by name start a second, after a
	// burst of recordsByNameBurst: a node that cannot hear hundreds of peers while
	// still in Quorum is rare (it lost a minority), and the limit only delays watches,
	// whose records are read straight from the API server meanwhile.
	recordsByNameStarts = 20
	recordsByNameBurst  = 50
	recordsByNameLinger = 30 * time.Second
)

// CacheScope is what a speaker's cache may hold of the Leases: the records, in
// herald's namespace, whose writer misses node. A speaker reads its records from the
// Keeper's own watches, not from the cache; should anything ask the cache for Leases,
// it gets this narrow informer, never one of every Lease in the cluster.
func CacheScope(namespace, node string) cache.ByObject {
	return cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      missing(node),
	}
}

// missing selects the records whose writer knows of node and does not hear it: those
// that do not list it (labels.go).
func missing(node string) labels.Selector {
	return recordsWhere(MissesLabel(node), selection.Exists, nil)
}

// inTrouble selects the records whose mode is not Quorum (and those of speakers of
// an older version, which have no mode label under its key).
func inTrouble() labels.Selector {
	return recordsWhere(ModeLabel, selection.NotEquals, []string{string(quorum.ModeQuorum)})
}

// recordsWhere selects the records whose label key satisfies op with values. The keys
// are constants or MissesLabel's, always valid.
func recordsWhere(key string, op selection.Operator, values []string) labels.Selector {
	is, err := labels.NewRequirement(Label, selection.Equals, []string{"true"})
	if err != nil {
		panic(err)
	}
	req, err := labels.NewRequirement(key, op, values)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*is, *req)
}

// digestSyncWait is how long a speaker that needs every record waits for the records
// digest's watch to sync before it watches every record.
const digestSyncWait = 2 * time.Second

// recordWatches are a speaker's watches of the records: in Quorum, those that leave
// it out (narrow), those in trouble (troubled) and by name those of the peers it does
// not hear; out of Quorum, the records digest or every record (wide) alone.
type recordWatches struct {
	ctx       context.Context
	namespace string
	self      string
	client    client.WithWatch
	handler   func(gone bool) toolscache.ResourceEventHandler // gone: a record leaving the watch was deleted
	poke      func()                                          // a decision, when a linger ends
	log       logr.Logger
	now       func() time.Time
	// wideLinger is recordsWideLinger (shorter in tests).
	wideLinger time.Duration
	// digestFrom is how many records the digest must list to be used (0: never,
	// Config.DigestFrom); unheardFrom how many peers a speaker in Quorum must
	// not hear to read it (Config.SummaryFrom: from there it reads the
	// heartbeat summary too); asOf is the time its freshness is judged at.
	digestFrom, unheardFrom int
	asOf                    func() time.Time
	// events counts the watch events received, by watch (events.go).
	events *prometheus.CounterVec

	mu sync.Mutex
	// narrow and troubled run while this speaker is in Quorum (nil otherwise).
	narrow, troubled *leaseWatch
	// wide watches every record, and digest the records digest; wideUnneeded is since
	// when this speaker has been in Quorum (zero while it is not). digestSince is when
	// the digest's watch started.
	wide   *leaseWatch
	digest *digestWatch
	// needEvery: this speaker reads every record (out of Quorum, or not hearing many
	// peers with the digest usable), the last decision said.
	needEvery    bool
	digestSince  time.Time
	wideUnneeded time.Time
	// byName watches the records of the peers not heard, while in Quorum.
	byName *leasesByName
}

// newRecordWatches starts the watches of the records of a speaker that has just
// started, out of Quorum: the digest's if cfg.DigestFrom is not 0, else the wide one.
// asOf is when the digest's freshness is judged.
func newRecordWatches(ctx context.Context, namespace, self string, c client.WithWatch, handler func(gone bool) toolscache.ResourceEventHandler, poke func(),
	cfg Config, asOf func() time.Time, log logr.Logger) *recordWatches {
	pace := byNamePace{linger: recordsByNameLinger, starts: recordsByNameStarts, burst: recordsByNameBurst}
	w := &recordWatches{ctx: ctx, namespace: namespace, self: self, client: c, handler: handler, poke: poke, log: log, now: time.Now, wideLinger: recordsWideLinger,
		digestFrom: cfg.DigestFrom, unheardFrom: cfg.SummaryFrom, asOf: asOf, events: newRecordEvents(), needEvery: true}
	w.byName = newLeasesByName(ctx, namespace, c, "record", Name, pace, counted(handler(true), w.events, eventsByName), poke, log)
	w.mu.Lock()
	w.everyRecordLocked(w.now())
	w.mu.Unlock()
	return w
}

// startNarrow starts the watches of the records that leave this speaker out and of
// those in trouble, unless they run; a decision follows once both have synced (their
// first lists may bring no event to cause one). Under mu.
func (w *recordWatches) startNarrow() {
	if w.narrow != nil || w.ctx.Err() != nil {
		return
	}
	w.narrow = watchLeases(w.ctx, w.client, w.namespace, "the records that leave this speaker out", func(o *client.ListOptions) {
		o.LabelSelector = missing(w.self)
	}, counted(w.handler(false), w.events, eventsLeavingOut))
	w.troubled = watchLeases(w.ctx, w.client, w.namespace, "the records of speakers in trouble", func(o *client.ListOptions) {
		o.LabelSelector = inTrouble()
	}, counted(w.handler(false), w.events, eventsTrouble))
	narrow, troubled := w.narrow, w.troubled
	go func() {
		// Both stop together (stopNarrow): narrow's end ends the wait.
		if toolscache.WaitForCacheSync(narrow.Done, narrow.Synced, troubled.Synced) {
			w.poke()
		}
	}()
}

// stopNarrow stops the narrow watches, the wide one holding every record. Under mu.
// (The watches by name, opened while in Quorum for the peers it lost, stop with
// them: setMode.)
func (w *recordWatches) stopNarrow() {
	if w.narrow == nil {
		return
	}
	w.narrow.Stop()
	w.troubled.Stop()
	w.narrow, w.troubled = nil, nil
}

// narrowSynced says whether the narrow watches run and have synced. Under mu.
func (w *recordWatches) narrowSynced() bool {
	return w.narrow != nil && w.narrow.Synced() && w.troubled.Synced()
}

func (w *recordWatches) startWide() *leaseWatch {
	w.log.V(1).Info("watching every record")
	return watchLeases(w.ctx, w.client, w.namespace, "every speaker record", func(o *client.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{Label: "true"})
	}, counted(w.handler(true), w.events, eventsEvery))
}

// setMode tells the watches this speaker's mode, how many speakers it expects and how
// many of them it does not hear: out of Quorum it reads every record, and once that
// source has synced nothing else; back in Quorum (or just started) it keeps reading
// every record for recordsWideLinger, then starts the narrow watches, and stops
// reading every record once they and those by name have synced. In Quorum, when the records that concern it are many
// (unheardFrom or more, counting the peers it does not hear and the records its
// narrow watches hold: a split forming, each side losing the other a few peers at a
// time and the first speakers in trouble writing while the others still hear a
// majority), it reads the records digest if it is usable, as out of Quorum: each
// write of those records would reach it, and half the cluster writes.
func (w *recordWatches) setMode(m quorum.Mode, expected, unheard int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	concern := unheard + w.narrow.held() + w.troubled.held()
	manyConcern := m == quorum.ModeQuorum && w.digestFrom > 0 && expected >= w.digestFrom && w.unheardFrom > 0 && concern >= w.unheardFrom
	if manyConcern && w.digest == nil {
		w.startDigestLocked(now) // to tell whether it is usable
	}
	w.needEvery = m != quorum.ModeQuorum || (manyConcern && w.readable(w.digest))
	switch {
	case w.needEvery:
		w.wideUnneeded = time.Time{}
		w.everyRecordLocked(now)
		if (w.wide != nil && w.wide.Synced()) || w.digest.used() {
			w.stopNarrow()
			w.byName.stopAll()
		}
	case w.narrow != nil && w.wide == nil && !w.digest.used():
		// Settled in Quorum on the narrow watches. A digest's watch started to tell
		// whether it is usable stops once the records of concern are few again.
		if !manyConcern && w.digest != nil {
			w.stopWideLocked()
		}
	case w.wideUnneeded.IsZero():
		w.wideUnneeded = now
		time.AfterFunc(w.wideLinger, w.poke) // a decision then stops it
		w.everyRecordLocked(now)
	case now.Sub(w.wideUnneeded) < w.wideLinger:
		w.everyRecordLocked(now) // the digest may turn stale meanwhile
	default:
		w.startNarrow()
		if w.narrowSynced() && w.byName.synced() {
			w.stopWideLocked()
			w.log.V(1).Info("watching the records that concern this speaker only")
		}
	}
}

// everyRecordLocked picks the source of every record, out of Quorum and while it
// lingers: the digest while it is usable and lists digestFrom records or more, else
// the wide watch. The digest's watch runs throughout (its use is decided anew each
// time), the wide one only while the digest is not used or has not synced for
// digestSyncWait. Under mu.
func (w *recordWatches) everyRecordLocked(now time.Time) {
	if w.ctx.Err() != nil {
		return
	}
	if w.digestFrom > 0 && w.digest == nil {
		w.startDigestLocked(now)
	}
	use := w.readable(w.digest)
	if w.digest != nil && use != w.digest.used() {
		_, n := w.digest.state(w.asOf())
		w.log.V(1).Info("records source", "digest", use, "digestRecords", n)
		w.digest.use(use)
	}
	switch {
	case use && w.wide != nil:
		w.wide.Stop()
		w.wide = nil
	case !use && w.wide == nil && (w.digest == nil || w.digest.Synced() || now.Sub(w.digestSince) >= digestSyncWait):
		w.wide = w.startWide()
	}
}

// digestFor returns, by name, the records the digest lists if this speaker, in a
// cluster of known records, does not hear unheard peers, enough to read the digest in
// Quorum (see setMode), and the digest is usable; nil otherwise. It starts the
// digest's watch if need be and waits for it up to digestFirstWait: its records stand
// in for those of the peers not heard whose watches by name have not synced, each of
// which would otherwise be read straight from the API server. A split forming loses
// many peers at once, and those reads, one by one from an API server the split keeps
// busy, held a decision back while the narrow watches brought every write of the
// speakers already in trouble.
func (w *recordWatches) digestFor(ctx context.Context, unheard, known int) map[string]*coordinationv1.Lease {
	w.mu.Lock()
	if w.digestFrom == 0 || known < w.digestFrom || w.unheardFrom == 0 || unheard < w.unheardFrom || w.ctx.Err() != nil {
		w.mu.Unlock()
		return nil
	}
	if w.digest == nil {
		w.startDigestLocked(w.now())
	}
	d := w.digest
	w.mu.Unlock()
	if !d.Synced() {
		wctx, cancel := context.WithTimeout(ctx, digestFirstWait)
		toolscache.WaitForCacheSync(wctx.Done(), d.Synced)
		cancel()
	}
	if !w.readable(d) {
		return nil
	}
	return d.byName()
}

// digestFirstWait is how long a decision waits for the digest's watch to sync before
// it reads the records it lacks one by one (the digest is one object, quick to read
// from an API server that answers).
const digestFirstWait = 500 * time.Millisecond

// readable says whether digest d (nil: none) may be read instead of every record: it
// has synced, is usable as of asOf and lists digestFrom records or more.
func (w *recordWatches) readable(d *digestWatch) bool {
	usable, n := d.state(w.asOf())
	return usable && n >= w.digestFrom
}

// startDigestLocked starts the digest's watch. Under mu.
func (w *recordWatches) startDigestLocked(now time.Time) {
	w.digest = watchDigest(w.ctx, w.client, w.namespace, w.handler, w.poke, w.events.WithLabelValues(eventsDigest), w.log)
	w.digestSince = now
	time.AfterFunc(digestSyncWait, w.poke) // a decision then starts the wide watch if need be
}

// stopWideLocked stops the watches of every record, the wide one and the digest's.
// Under mu.
func (w *recordWatches) stopWideLocked() {
	if w.wide != nil {
		w.wide.Stop()
		w.wide = nil
	}
	if w.digest != nil {
		w.digest.use(false)
		w.digest.Stop()
		w.digest = nil
	}
}

// complete says whether the watches hold every record: the wide one has synced, or
// the digest is in use. wanted says whether this speaker needs every record (it is out
// of Quorum, or was until lately).
func (w *recordWatches) complete() (complete, wanted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// In Quorum, every record is wanted until the narrow watches run (a speaker that
	// has just started, or is back from trouble, lingers on every record).
	return (w.wide != nil && w.wide.Synced()) || w.digest.used(), w.needEvery || w.narrow == nil || w.wide != nil || w.digest.used()
}

// digestRevision returns, while the records digest is in use and usable, the etcd
// revision it holds every record as of (digestWatch.revision).
func (w *recordWatches) digestRevision() (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.digest.used() {
		return 0, false
	}
	if !w.readable(w.digest) {
		return 0, false
	}
	return w.digest.revision()
}

// track watches by name the records of these nodes (the peers not heard), at once
// as the limit allows, and stops the others once they have been unneeded for
// recordsByNameLinger. Only in Quorum: out of it the wide watch holds them all (and a
// speaker starting, which hears nobody yet, opens no watch by name). It returns the
// nodes whose watch by name has not synced yet.
func (w *recordWatches) track(nodes []string) (pending []string) {
	w.mu.Lock()
	if w.needEvery {
		nodes = nil
	}
	w.mu.Unlock()
	return w.byName.track(nodes)
}

// leases returns the records the synced watches hold. Read only.
func (w *recordWatches) leases() []*coordinationv1.Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.narrow.leases()
	out = append(out, w.troubled.leases()...)
	out = append(out, w.wide.leases()...)
	out = append(out, w.digest.leases()...)
	return append(out, w.byName.leases()...)
}

// counts returns how many watches of every record (0 or 1) run, whether the records
// digest is read in their stead (0 or 1), how many of the narrow ones (each 0 or 1)
// and by name.
func (w *recordWatches) counts() (every, digest, narrow, byName int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wide != nil {
		every = 1
	}
	if w.digest.used() {
		digest = 1
	}
	if w.narrow != nil {
		narrow = 1
	}
	return every, digest, narrow, len(w.byName.watched())
}

// nodeOfRecord returns the node whose record name is, or "".
func nodeOfRecord(name string) string { return recordformat.NodeOf(name) }
