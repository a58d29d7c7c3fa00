package records

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/beatsummary"
	"herald.dev/herald/speaker/quorum"
)

// When a speaker starts watching the heartbeat summary and the peers' heartbeats, how
// fast, and how long it keeps them (see the package doc).
const (
	summaryDelay    = 2 * time.Second
	heartbeatDelay  = 5 * time.Second
	heartbeatStarts = 10
	heartbeatBurst  = 20
	heartbeatLinger = 30 * time.Second
)

// HeartbeatLabel marks the speakers' heartbeats among the Leases.
const HeartbeatLabel = beatsummary.HeartbeatLabel

// HeartbeatName is the name of node's heartbeat.
func HeartbeatName(node string) string { return beatsummary.HeartbeatName(node) }

// liveness gives the records the freshness this speaker can vouch for.
type liveness struct {
	// heard says whether this speaker hears a node over memberlist.
	heard func(node string) bool
	// beat returns when node's heartbeat was last renewed (zero if it has none), and
	// false while this speaker does not know yet.
	beat func(node string) (time.Time, bool)
}

// apply returns the records with RenewedAt as this speaker knows it: a record of a
// peer it hears counts as renewed now (it is alive, and its record says what it last
// published), one of a peer it does not hear as renewed at the later of the record's
// own renewal and its heartbeat's, and as renewed now while the heartbeat is not known
// yet: counting a speaker expected can only delay a majority, never make one. The
// records are copies; their slices are shared, read only.
func (lv liveness) apply(self string, recs []quorum.Record, now time.Time) []quorum.Record {
	out := make([]quorum.Record, len(recs))
	for i, r := range recs {
		if r.Node != self {
			switch at, known := lv.beat(r.Node); {
			case lv.heard(r.Node) || !known:
				r.RenewedAt = now
			case at.After(r.RenewedAt):
				r.RenewedAt = at
			}
		}
		out[i] = r
	}
	return out
}

// unheard returns the writers of recs, self aside, that this speaker does not hear.
func (lv liveness) unheard(self string, recs []quorum.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Node != self && !lv.heard(r.Node) {
			out = append(out, r.Node)
		}
	}
	return sortedUnique(out)
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// heartbeats tells the liveness of the peers this speaker does not hear: from the
// heartbeat summary while it is usable, else from one watch per peer, filtered by name
// at the API server.
type heartbeats struct {
	namespace string
	client    client.WithWatch
	watches   *leasesByName
	summary   *leasesByName // one watch, of the summary, under summaryKey
	// summaryFrom is how many unheard peers make the summary worth its renewals
	// (Config.SummaryFrom; 0: never).
	summaryFrom int
	changed     func()
	log         logr.Logger

	mu sync.Mutex
	// read holds the heartbeats last read straight from the API server (readAll),
	// at readAt, for a decision that needs the records current; readSummary the
	// summary they came from, if they did.
	read        map[string]time.Time
	readAt      time.Time
	readSummary beatsummary.Summary
	// parsed is the summary as its watch last held it, at version parsedVersion:
	// a decision reads it once per peer, and it lists every speaker.
	parsed        beatsummary.Summary
	parsedVersion string
	// expiryPoke is when a decision is due because the summary in use turns stale.
	expiryPoke time.Time
	// writesFail: this speaker's last write to the API server failed, and its last
	// successful one was at lastWrite (setWritesFail).
	writesFail bool
	lastWrite  time.Time
}

// summaryKey is the one key of heartbeats.summary.
const summaryKey = "summary"

func newHeartbeats(ctx context.Context, namespace string, c client.WithWatch, changed func(), log logr.Logger) *heartbeats {
	poke := func(any) { changed() }
	handler := toolscache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }, DeleteFunc: poke}
	pace := byNamePace{delay: heartbeatDelay, linger: heartbeatLinger, starts: heartbeatStarts, burst: heartbeatBurst}
	return &heartbeats{namespace: namespace, client: c, changed: changed, log: log,
		watches: newLeasesByName(ctx, namespace, c, "heartbeat", HeartbeatName, pace, handler, changed, log),
		summary: newLeasesByName(ctx, namespace, c, "heartbeat summary", func(string) string { return beatsummary.Name },
			byNamePace{delay: summaryDelay, linger: heartbeatLinger, starts: 1, burst: 1}, handler, changed, log)}
}

// track follows the liveness of these nodes (the peers not heard): from summaryFrom
// of them, it watches the summary once they have been passed for summaryDelay; while
// the summary is unusable or fewer are passed, it watches the heartbeats of these
// nodes once they have been passed for heartbeatDelay, starting at most
// heartbeatStarts watches a second. It stops the watches no longer needed after
// heartbeatLinger. A node left unwatched for now is
// picked up by a later call, which it pokes a decision for.
func (h *heartbeats) track(nodes []string) {
	if h.summaryFrom == 0 || len(nodes) < h.summaryFrom {
		h.summary.track(nil)
		h.watches.track(nodes)
		return
	}
	h.summary.track([]string{summaryKey})
	if s, ok := h.summarized(); ok {
		h.watches.track(nil)
		h.pokeAt(s.At.Add(s.Duration))
		return
	}
	h.watches.track(nodes)
}

// watched returns the nodes whose heartbeat is watched, sorted.
func (h *heartbeats) watched() []string { return h.watches.watched() }

// summaryUsed says whether the peers' liveness now comes from the summary.
func (h *heartbeats) summaryUsed() bool {
	_, ok := h.summarized()
	return ok
}

// setWritesFail says whether this speaker's last write to the API server failed, and
// when its last successful one was. The quorum rule then judges every record's
// freshness as of that write (speaker/quorum), so a summary that was usable then stays
// usable, as the heartbeats' own watches keep what they last saw. Falling back to
// those watches, which cannot start, would count every unheard peer as fresh, even
// one long dead.
func (h *heartbeats) setWritesFail(fail bool, lastWrite time.Time) {
	h.mu.Lock()
	h.writesFail, h.lastWrite = fail, lastWrite
	h.mu.Unlock()
}

// summarized returns the summary if one is usable now (or was at this speaker's last
// successful write while its writes fail, see setWritesFail): the newer of what its
// watch holds and what readAll last read.
func (h *heartbeats) summarized() (beatsummary.Summary, bool) {
	var l *coordinationv1.Lease
	if w := h.summary.watch(summaryKey); w != nil {
		l, _ = w.lease()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l != nil && l.ResourceVersion != h.parsedVersion {
		s, err := beatsummary.FromLease(l)
		if err != nil {
			h.log.Error(err, "the heartbeat summary is unreadable; watching the peers' heartbeats instead")
		}
		h.parsed, h.parsedVersion = s, l.ResourceVersion
	}
	best := h.readSummary
	if l != nil && h.parsed.At.After(best.At) {
		best = h.parsed
	}
	return best, best.Usable(h.watches.now()) || (h.writesFail && best.Usable(h.lastWrite))
}

// pokeAt has a decision made at t (once per t).
func (h *heartbeats) pokeAt(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.Equal(h.expiryPoke) {
		return
	}
	h.expiryPoke = t
	time.AfterFunc(t.Sub(h.watches.now()), h.changed)
}

// beat returns when node's heartbeat was last renewed (zero if it has none): as the
// usable summary tells, else as its watch saw it or as last read straight from the
// API server since the watch started, whichever is newer; false while the summary is
// unusable and node's heartbeat not watched, or neither knows.
func (h *heartbeats) beat(node string) (time.Time, bool) {
	if s, ok := h.summarized(); ok {
		return s.Beat(node), true
	}
	w := h.watches.watch(node)
	if w == nil {
		return time.Time{}, false
	}
	var at time.Time
	h.mu.Lock()
	known := h.readAt.After(w.started)
	if known {
		at = h.read[node]
	}
	h.mu.Unlock()
	if l, synced := w.lease(); synced {
		known = true
		if l != nil && renewedAt(l).After(at) {
			at = renewedAt(l)
		}
	}
	return at, known
}

// readAll reads the heartbeats straight from the API server: a decision that needs
// the records current needs the heartbeats current too, and a watch may lag. It reads
// the summary, one object, and lists the heartbeats only if the summary is missing,
// unreadable or stale.
func (h *heartbeats) readAll(ctx context.Context) error {
	start := h.watches.now()
	var sl coordinationv1.Lease
	err := h.client.Get(ctx, types.NamespacedName{Namespace: h.namespace, Name: beatsummary.Name}, &sl)
	if err == nil {
		if s, err := beatsummary.FromLease(&sl); err == nil && s.Usable(start) {
			read := make(map[string]time.Time, len(s.Fresh)+len(s.Stale))
			maps.Copy(read, s.Stale)
			for _, node := range s.Fresh {
				read[node] = s.At
			}
			h.mu.Lock()
			h.read, h.readAt, h.readSummary = read, start, s
			h.mu.Unlock()
			return nil
		}
	}
	var l coordinationv1.LeaseList
	if err := h.client.List(ctx, &l, client.InNamespace(h.namespace), client.HasLabels{HeartbeatLabel}); err != nil {
		return fmt.Errorf("reading the speakers' heartbeats: %w", err)
	}
	read := make(map[string]time.Time, len(l.Items))
	for i := range l.Items {
		if l.Items[i].Spec.HolderIdentity != nil {
			read[*l.Items[i].Spec.HolderIdentity] = renewedAt(&l.Items[i])
		}
	}
	h.mu.Lock()
	h.read, h.readAt, h.readSummary = read, start, beatsummary.Summary{}
	h.mu.Unlock()
	return nil
}

// renewedSince is how many heartbeats of nodes other than self, as readAll last read
// them, were renewed after since.
func (h *heartbeats) renewedSince(since time.Time, self string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for node, at := range h.read {
		if node != self && at.After(since) {
			n++
		}
	}
	return n
}

// CountSpeakers is how many speakers the cluster holds, this one included, for
// memberlist's automatic suspicion, which is set before this speaker joins: the peers
// whose heartbeat was renewed within the record duration. On an error it counts this
// speaker alone, which only lengthens the suspicion (that of a small cluster). A
// cluster starting all at once counts few, and so does a new one: the same.
func (r *Keeper) CountSpeakers(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.beats.readAll(ctx); err != nil {
		return 1, err
	}
	return 1 + r.beats.renewedSince(r.now().Add(-r.cfg.Duration), r.self), nil
}

// renewedAt is when l was last renewed, zero if never.
func renewedAt(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
