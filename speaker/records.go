package speaker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// Every speaker keeps a record of itself in the API server (speaker/quorum explains
// what for): a Lease named herald-speaker-<node> in herald's namespace, whose
// annotations carry the memberlist members it hears and its mode, written when they
// change; its liveness is a second Lease, its heartbeat (heartbeats.go), renewed like
// a kubelet's node lease. The Node owns both, so deleting the Node deletes them.

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=herald-system

// The record's format is internal/recordformat's, which herald's controller reads too.
const (
	// RecordLabel marks the speakers' records (and only them) among the Leases.
	RecordLabel = recordformat.Label
	// RecordMembersAnnotation lists the memberlist members the speaker hears.
	RecordMembersAnnotation = recordformat.MembersAnnotation
	// RecordModeAnnotation is the speaker's quorum.Mode.
	RecordModeAnnotation = recordformat.ModeAnnotation
	// RecordUnreachableAnnotation lists the expected speakers it does not hear.
	RecordUnreachableAnnotation = recordformat.UnreachableAnnotation
	// RecordMACsAnnotation lists the MACs its ARP/NDP responders answer with: another
	// speaker seeing one of them answer for its IP knows it is a peer, not a foreign
	// device.
	RecordMACsAnnotation = recordformat.MACsAnnotation
)

// RecordName is the name of node's record.
func RecordName(node string) string { return recordformat.Name(node) }

// RecordConfig says how records are renewed.
type RecordConfig struct {
	// Renew is the period of the heartbeat's renewals.
	Renew time.Duration
	// FastRenew is the period of retries after a failed write.
	FastRenew time.Duration
	// Duration is how long a record stays fresh after it or its heartbeat was last
	// written: the longest a dead speaker keeps counting among the expected ones.
	Duration time.Duration
	// SummaryFrom is how many peers a speaker must not hear before it reads the
	// controller's heartbeat summary instead of their heartbeats (0: never).
	SummaryFrom int
	// Coalesce is how long after a write of the record a change of its view, or a
	// new peer asking, waits to be written with whatever else changes meanwhile
	// (0: each at once). A change of mode, or one after a quiet spell, is written at
	// once.
	Coalesce time.Duration
	// DigestFrom is how many records the controller's records digest must list for
	// a speaker out of Quorum to read it instead of every record (0: never).
	DigestFrom int
}

// DefaultRecordConfig renews the heartbeat every 10 s, a kubelet node lease's pace,
// with records fresh for 30 s, retries a failed write twice a second, and reads the
// heartbeat summary from 8 unheard peers (heartbeats.go says why 8). Renewals are
// far from the failover path: a change of view or mode is written at once, and so is
// the record when a peer starts asking whether this speaker is alive (quorum.AskedBy),
// except that changes of view and new askers within 250 ms of the last write wait
// for those 250 ms to end and go in one write. At a split memberlist loses the other
// side's peers, and they start asking, in batches over a second or so; each batch
// cost a write that reached every speaker out of Quorum (writes by reason at a
// 30-node split: 60 of mode, 121 of view, 84 answers). A quarter of Grace (1 s)
// leaves an answer time to reach an asker before it arbitrates.
func DefaultRecordConfig() RecordConfig {
	return RecordConfig{Renew: 10 * time.Second, FastRenew: 500 * time.Millisecond, Duration: 30 * time.Second, SummaryFrom: 8,
		Coalesce: 250 * time.Millisecond, DigestFrom: 32}
}

func (c RecordConfig) validate() error {
	switch {
	case c.Renew <= 0 || c.FastRenew <= 0 || c.Duration <= 0:
		return fmt.Errorf("record timings must be positive (renew %v, fast renew %v, duration %v)", c.Renew, c.FastRenew, c.Duration)
	case c.Duration < c.Renew*2:
		return fmt.Errorf("--record-duration %v must be at least twice --record-renew-interval %v", c.Duration, c.Renew)
	case c.Duration < time.Second:
		return fmt.Errorf("--record-duration %v must be at least 1s (Leases count whole seconds)", c.Duration)
	case c.SummaryFrom < 0:
		return fmt.Errorf("--heartbeat-summary-from %d must be 0 (never) or more", c.SummaryFrom)
	case c.Coalesce < 0:
		return fmt.Errorf("--record-coalesce %v must not be negative (0: write each change at once)", c.Coalesce)
	case c.DigestFrom < 0:
		return fmt.Errorf("--records-digest-from %d must be 0 (never) or more", c.DigestFrom)
	}
	return nil
}

// recordFromLease reads a speaker's record; ok is false for a Lease that is not one.
func recordFromLease(l *coordinationv1.Lease, changedAt time.Time) (quorum.Record, bool) {
	if l.Labels[RecordLabel] == "" || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return quorum.Record{}, false
	}
	r := quorum.Record{
		Node:      *l.Spec.HolderIdentity,
		Mode:      quorum.Mode(l.Annotations[RecordModeAnnotation]),
		RenewedAt: l.Spec.RenewTime.Time,
		Duration:  time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second,
		ChangedAt: changedAt,
	}
	r.Members = splitList(l.Annotations[RecordMembersAnnotation])
	r.Unreachable = splitList(l.Annotations[RecordUnreachableAnnotation])
	return r, true
}

// splitList reads a comma-separated annotation; empty is none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// recordWish is what this speaker wants its record to say.
type recordWish struct {
	members, unreachable, macs []string
	mode                       quorum.Mode
	// misses are the speakers known to this one that it does not hear (missed): its
	// record's labels, which the annotations do not repeat.
	misses []string
	// askers are the peers asking whether this speaker is alive (quorum.AskedBy): a
	// new one gets a renewal at once. Not written: the renewal is the answer.
	askers []string
}

// content is what the record says, as the annotations write sets; renewalOnly compares
// the same keys (recordContentKeys).
func (w recordWish) content() map[string]string {
	return map[string]string{
		RecordMembersAnnotation:     strings.Join(w.members, ","),
		RecordModeAnnotation:        string(w.mode),
		RecordUnreachableAnnotation: strings.Join(w.unreachable, ","),
		RecordMACsAnnotation:        strings.Join(w.macs, ","),
	}
}

// recordContentKeys are the annotations that make up a record's content.
var recordContentKeys = slices.Sorted(maps.Keys(recordWish{}.content()))

// sameContent says whether w and o make the record say the same.
func (w recordWish) sameContent(o recordWish) bool {
	return w.mode == o.mode && slices.Equal(w.members, o.members) && slices.Equal(w.unreachable, o.unreachable) &&
		slices.Equal(w.macs, o.macs) && slices.Equal(w.misses, o.misses)
}

// newAsker says whether w has an asker that o has not.
func (w recordWish) newAsker(o recordWish) bool {
	for _, a := range w.askers {
		if !slices.Contains(o.askers, a) {
			return true
		}
	}
	return false
}

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

// ownWritesKept is how many of its own latest writes a speaker remembers
// (writtenBefore).
const ownWritesKept = 32

// ownWrite is one of this speaker's writes (record or heartbeat): the etcd revision it
// got, and when.
type ownWrite struct {
	rev uint64
	at  time.Time
}

// noteOwnWrite remembers a write of this speaker's.
func (r *records) noteOwnWrite(resourceVersion string, at time.Time) {
	rev, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	r.own = append(r.own, ownWrite{rev: rev, at: at})
	if len(r.own) > ownWritesKept {
		r.own = slices.Delete(r.own, 0, len(r.own)-ownWritesKept)
	}
}

// writtenBefore returns when this speaker made the latest of its remembered writes
// that precedes resourceVersion, zero if none: a version with a higher etcd revision
// was written after it, whenever this speaker read it. That is how a version it did
// not see changing (read from a list) still tells a peer's answer to a record this
// speaker wrote (quorum.AskedBy) from what the peer wrote before. Under mu.
func (r *records) writtenBefore(resourceVersion string) time.Time {
	rev, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil || rev == 0 {
		return time.Time{}
	}
	return r.writtenUpToLocked(rev - 1)
}

// writtenUpTo returns when this speaker made the latest of its remembered writes
// whose etcd revision is rev or lower, zero if none: what holds every record as of
// revision rev holds them as they stood after that write was made.
func (r *records) writtenUpTo(rev uint64) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writtenUpToLocked(rev)
}

func (r *records) writtenUpToLocked(rev uint64) time.Time {
	for i := len(r.own) - 1; i >= 0; i-- {
		if r.own[i].rev <= rev {
			return r.own[i].at
		}
	}
	return time.Time{}
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

// want sets what the record should say; a change, or a new peer asking whether this
// speaker is alive, wakes run to write it (at once, or once RecordConfig.Coalesce
// has passed since the last write).
func (r *records) want(w recordWish) {
	r.mu.Lock()
	now := !r.wish.sameContent(w) || w.newAsker(r.wish)
	r.wish = w
	r.mu.Unlock()
	if now {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// renewHeartbeat asks for the heartbeat to be written now rather than at the next
// renewal: what it reports changed (the memberlist keys).
func (r *records) renewHeartbeat() {
	select {
	case r.beatNow <- struct{}{}:
	default:
	}
}

// run writes the record when want asks (at once, or a change of view or a new asker
// within RecordConfig.Coalesce of the last write at that window's end, with what
// changed meanwhile), and the heartbeat every renewal period, until ctx ends. After a
// failed write both are retried every FastRenew.
func (r *records) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	// held fires when a change held back (coalesceWait) may be written: at the
	// window's end after the last write, the same moment however often it is set.
	held := time.NewTimer(time.Hour)
	held.Stop()
	defer held.Stop()
	var written *recordWish // what the record says, once written
	var writtenAt time.Time
	for {
		beat := false
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-r.beatNow:
			beat = true
		case <-held.C:
		case <-timer.C:
			beat = true
		}
		r.mu.Lock()
		w := r.wish
		r.mu.Unlock()
		// Once a renewal period, check the record is still what was written (deleted
		// by hand, say): nothing else would rewrite it while its content stays. Not
		// right after a write, which the cache may not show yet.
		if beat && written != nil && r.now().Sub(writtenAt) > r.cfg.FastRenew*2 && !r.recordStored(ctx, *written) {
			written = nil
		}
		var err error
		wrote := false
		if written == nil || !w.sameContent(*written) || w.newAsker(*written) {
			reason := writeReason(written, w)
			if wait := coalesceWait(r.cfg.Coalesce, reason, r.now().Sub(writtenAt)); wait > 0 {
				held.Reset(wait)
			} else {
				wrote = true
				if err = r.writeRecord(ctx, w); err == nil {
					r.writes.WithLabelValues(reason).Inc()
					written, writtenAt = &w, r.now()
				}
			}
		}
		if beat && err == nil {
			wrote = true
			err = r.writeHeartbeat(ctx)
		}
		if !wrote {
			continue // woken for a wish the record already says
		}
		r.mu.Lock()
		flipped := r.apiUp != (err == nil)
		r.apiUp = err == nil
		if err == nil {
			r.apiAt = r.now()
		}
		r.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			r.log.V(1).Info("writing this speaker's record", "error", err.Error())
		}
		if flipped {
			r.changed()
		}
		// A record written on request leaves the heartbeat's pace alone.
		if !beat && err == nil {
			continue
		}
		period := r.cfg.Renew
		if err != nil {
			period = r.cfg.FastRenew
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(period)
	}
}

// recordStored says whether the stored record says what w does; true when it cannot
// tell. Read from the API server: the cache does not hold a record that lists this
// speaker (recordview.go), its own included.
func (r *records) recordStored(ctx context.Context, w recordWish) bool {
	var l coordinationv1.Lease
	if err := r.api.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: RecordName(r.self)}, &l); err != nil {
		return !apierrors.IsNotFound(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.self {
		return false
	}
	for k, v := range w.content() {
		if l.Annotations[k] != v {
			return false
		}
	}
	return true
}

// writeRecord creates or rewrites the record with the wish.
func (r *records) writeRecord(ctx context.Context, w recordWish) error {
	l, err := r.put(ctx, RecordName(r.self), recordLabels(w.misses, w.mode), w.content(), &r.lease)
	if err != nil {
		return err
	}
	r.newer(l)
	r.note(l, true)
	return nil
}

// writeHeartbeat creates or renews the heartbeat (see heartbeats).
func (r *records) writeHeartbeat(ctx context.Context) error {
	var ann map[string]string
	if r.keysReport != nil {
		ann = map[string]string{memberkey.ReportAnnotation: r.keysReport()}
	}
	_, err := r.put(ctx, HeartbeatName(r.self), map[string]string{HeartbeatLabel: "true"}, ann, &r.beat)
	return err
}

// put creates or renews the Lease name with these labels (replacing the misses labels
// it had, see setLabels) and annotations; last is the version this speaker wrote last
// (nil: read it first).
func (r *records) put(ctx context.Context, name string, labels, annotations map[string]string, last **coordinationv1.Lease) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.FastRenew*2)
	defer cancel()
	r.mu.Lock()
	l := *last
	r.mu.Unlock()
	key := types.NamespacedName{Namespace: r.namespace, Name: name}
	if l == nil {
		l = &coordinationv1.Lease{}
		if err := r.api.Get(ctx, key, l); apierrors.IsNotFound(err) {
			l = nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	now := metav1.NewMicroTime(r.now())
	create := l == nil
	if create {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
		l.Spec.AcquireTime = &now
		var node corev1.Node
		if err := r.cache.Get(ctx, types.NamespacedName{Name: r.self}, &node); err == nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
	} else {
		l = l.DeepCopy()
	}
	l.Labels = setLabels(l.Labels, labels)
	if len(annotations) > 0 {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		maps.Copy(l.Annotations, annotations)
	}
	l.Spec.HolderIdentity = ptr.To(r.self)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.cfg.Duration / time.Second))
	l.Spec.RenewTime = &now
	// No managedFields: the API server would list in them every label and
	// annotation again (the older format's hears labels, 35 KB of its 77 at a thousand
	// members), in every write stored and every watch event sent. Nothing reads
	// them, and one empty entry strips them (documented API behaviour; on an update
	// only: a create keeps them until the first rewrite).
	l.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	var err error
	if create {
		err = r.writer.Create(ctx, l)
	} else {
		err = r.writer.Update(ctx, l)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		*last = nil // start from the stored object next time (a conflict, or deleted under us)
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	*last = l
	r.noteOwnWrite(l.ResourceVersion, now.Time)
	return l, nil
}

// remove deletes this speaker's record and heartbeat, on a graceful stop: the peers
// stop expecting it at once.
func (r *records) remove(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var errs []error
	for _, name := range []string{RecordName(r.self), HeartbeatName(r.self)} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
		if err := r.writer.Delete(ctx, l); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
