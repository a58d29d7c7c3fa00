package records

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/speaker/quorum"
)

// Keeper reads the speakers' records and heartbeats and writes this speaker's own.
// Writes run in their own goroutine (Run): an unreachable API server never delays an
// election.
type Keeper struct {
	self      string
	namespace string
	cfg       Config
	log       logr.Logger
	cache     client.Reader
	api       client.Reader // uncached, for reads that must be current
	writer    client.Writer
	changed   func() // pokes the election
	macs      func(node string, macs []string)
	beats     *heartbeats // nil: every record's own renewal is all there is
	// view, when set, holds the watches of the records (watches.go), and the
	// cache none; nil: the cache holds every record.
	view *recordWatches
	now  func() time.Time

	wake chan struct{}
	// beatNow asks Run for a heartbeat now (RenewHeartbeat).
	beatNow chan struct{}
	// keysReport, when set, is the fingerprints of the memberlist keys this speaker
	// holds, which its heartbeat publishes (memberkey.ReportAnnotation).
	keysReport func() string

	mu sync.Mutex
	// heard says whether this speaker hears node over memberlist; nil until
	// memberlist runs.
	heard func(node string) bool
	wish  Wish
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

	// writes counts the record's successful writes by reason (writes.go); reads
	// the reads of every record afresh by source (reads.go); gauges show the
	// watches (metrics.go).
	writes, reads *prometheus.CounterVec
	gauges        gauges
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

// Options are what a Keeper reads, writes and calls back.
type Options struct {
	// Self is this speaker's node, Namespace herald's, where the records are.
	Self, Namespace string
	Config          Config
	// Cache reads the Nodes (the owners of the record and the heartbeat), and the
	// records when CacheHoldsRecords; API reads straight from the API server; Writer
	// writes this speaker's record and heartbeat.
	Cache, API client.Reader
	Writer     client.Writer
	// Watches, when set, opens the Keeper's own watches: of the peers' heartbeats,
	// and, unless CacheHoldsRecords, of the records (the cache then holds none, see
	// CacheScope). nil: no heartbeats, every record from the cache.
	Watches           client.WithWatch
	CacheHoldsRecords bool

	// PokeElection asks the speaker for a decision: what it reads changed (nil: none).
	PokeElection func()
	// PeerMACs says the MACs a peer's record lists (nil MACs: its record was deleted).
	PeerMACs func(node string, macs []string)
	// KeysReport, when set, is the fingerprints of the memberlist keys this speaker
	// holds, which its heartbeat publishes (memberkey.ReportAnnotation). Called by Run.
	KeysReport func() string
	Log        logr.Logger
}

// New returns the Keeper of o.Self's record; its watches run until ctx ends, its
// writes once Run is called.
func New(ctx context.Context, o Options) *Keeper {
	if o.PokeElection == nil {
		o.PokeElection = func() {}
	}
	if o.PeerMACs == nil {
		o.PeerMACs = func(string, []string) {}
	}
	r := newKeeper(o.Self, o.Namespace, o.Config, o.Cache, o.API, o.Writer, o.PokeElection, o.PeerMACs, o.Log)
	r.keysReport = o.KeysReport
	if o.Watches == nil {
		return r
	}
	r.beats = newHeartbeats(ctx, o.Namespace, o.Watches, o.PokeElection, o.Log.WithName("heartbeats"))
	r.beats.summaryFrom = o.Config.SummaryFrom
	if !o.CacheHoldsRecords {
		r.view = newRecordWatches(ctx, o.Namespace, o.Self, o.Watches, r.handler, o.PokeElection, o.Config, r.freshnessAsOf, o.Log)
	}
	return r
}

func newKeeper(self, namespace string, cfg Config, c, api client.Reader, w client.Writer, changed func(),
	macs func(node string, macs []string), log logr.Logger) *Keeper {
	return &Keeper{
		self: self, namespace: namespace, cfg: cfg, log: log, cache: c, api: api, writer: w, changed: changed, macs: macs, now: time.Now,
		wake: make(chan struct{}, 1), beatNow: make(chan struct{}, 1), seen: map[string]seenVersion{}, left: map[string]time.Time{}, heardOnce: map[string]struct{}{}, apiUp: true,
		wish:   firstWish(self, quorum.ModeRejoining),
		writes: newRecordWrites(), reads: newRecordReads(), gauges: newGauges(),
	}
}

// Restarting makes the record this speaker writes first say that it has just started
// with claims to take back (quorum.ModeRestarting), not merely Rejoining: peers
// started at the same moment wait to hear it before they take IPs. Call it before Run.
func (r *Keeper) Restarting() {
	r.Want(firstWish(r.self, quorum.ModeRestarting))
}

// firstWish is what a speaker's record says before its first decision: that it hears
// itself alone, in mode.
func firstWish(self string, mode quorum.Mode) Wish {
	return Wish{Mode: mode, Members: []string{self}}
}

// WatchCache notes when each record in c changes (by this node's clock) and pokes the
// election, when the cache holds every record (Options.CacheHoldsRecords); the
// Keeper's own watches hold them otherwise, and it does nothing.
func (r *Keeper) WatchCache(ctx context.Context, c cache.Informers) error {
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
func (r *Keeper) handler(gone bool) toolscache.ResourceEventHandler {
	return recordEvents{r: r, gone: gone}
}

// recordEvents is a watch's handler (records.handler).
type recordEvents struct {
	r    *Keeper
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
		if macs := SplitList(l.Annotations[MACsAnnotation]); l.Spec.HolderIdentity != nil && (len(macs) > 0 || r.view == nil) {
			r.macs(*l.Spec.HolderIdentity, macs)
		}
	}
	r.changed()
}

// noteLeft notes that the record name left a watch (see records.left), or was
// deleted: then it is forgotten.
func (r *Keeper) noteLeft(name string, gone bool) {
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
func (r *Keeper) forgetLocked(name string) {
	delete(r.seen, name)
	delete(r.left, name)
	delete(r.newest, name)
	delete(r.heardOnce, nodeOfRecord(name))
}

// hears says whether this speaker hears node over memberlist.
func (r *Keeper) hears(node string) bool {
	r.mu.Lock()
	heard := r.heard
	r.mu.Unlock()
	return heard != nil && heard(node)
}

// SetHeard tells the Keeper whom this speaker hears, once memberlist runs.
func (r *Keeper) SetHeard(heard func(node string) bool) {
	r.mu.Lock()
	r.heard = heard
	r.mu.Unlock()
}

// renewalOnly says whether b is a renewal of a: the same writer saying the same.
func renewalOnly(a, b *coordinationv1.Lease) bool {
	if a.UID != b.UID || !ptr.Equal(a.Spec.HolderIdentity, b.Spec.HolderIdentity) ||
		!ptr.Equal(a.Spec.LeaseDurationSeconds, b.Spec.LeaseDurationSeconds) || a.Labels[Label] != b.Labels[Label] {
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
func (r *Keeper) note(l *coordinationv1.Lease, observed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(l, observed)
}

func (r *Keeper) noteLocked(l *coordinationv1.Lease, observed bool) seenVersion {
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
func (r *Keeper) lastChangeLocked(name string) time.Time {
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
func (r *Keeper) known(expected, heard []string) []string {
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
func (r *Keeper) forgetNode(node string) {
	r.mu.Lock()
	delete(r.heardOnce, node)
	r.mu.Unlock()
}

// Decided tells the Keeper the decision taken: the start-up is over (versions seen
// from now on are changes), and its watches follow the mode, how many speakers the
// decision expects and how many of them this speaker does not hear (setMode).
func (r *Keeper) Decided(m quorum.Mode, expected, unheard int) {
	r.prime()
	if r.view != nil {
		r.view.setMode(m, expected, unheard)
	}
}

// prime marks the start-up over: versions seen from now on are changes.
func (r *Keeper) prime() {
	r.mu.Lock()
	r.primed = true
	r.mu.Unlock()
}

// Status returns whether the last write of this speaker's record or heartbeat
// succeeded, when the last successful one was, and when the records were last read
// afresh.
func (r *Keeper) Status() (up bool, lastWrite, readAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.apiUp, r.apiAt, r.readAt
}

// freshnessAsOf is the time the freshness of what this speaker read is judged at: now,
// or its last successful write while its writes fail (as the quorum rule judges the
// records), so that what it read does not expire just because it cannot renew.
func (r *Keeper) freshnessAsOf() time.Time {
	up, at, _ := r.Status()
	if !up && !at.IsZero() {
		return at
	}
	return r.now()
}
