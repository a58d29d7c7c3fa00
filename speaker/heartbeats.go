package speaker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/speaker/quorum"
)

// A speaker's liveness lives apart from what its record says: besides its record,
// which changes only when its view or mode does, every speaker renews a heartbeat, a
// second Lease herald-heartbeat-<node>, at the record's renewal pace. A speaker needs
// a peer's heartbeat only while it cannot hear that peer over memberlist (hearing it
// says it is alive), so it watches, by name, the heartbeats of the peers it does not
// hear and of no other. In steady state every speaker hears every other: the
// heartbeats' renewals reach no watcher, and the records do not change. Before, every
// renewal of every record went to every speaker, N²/10 watch events a second.

// When to watch. A heartbeat not watched yet counts as fresh, which only delays a
// majority; and a peer that stops renewing stays fresh for the record duration minus
// a renewal period (20 s by default) after its last renewal. So a watch that starts a
// few seconds after its peer went unheard changes no decision, and spares the API
// server what a speaker starting (it hears nobody until memberlist's join) or a
// member flapping would cost: a speaker watches a peer's heartbeat once it has not
// heard that peer for heartbeatDelay, starts at most heartbeatStarts watches a second
// (after a burst of heartbeatBurst: a node cut off from a thousand peers opens its
// watches over 100 s), and stops one only after its peer was heard again for
// heartbeatLinger.
const (
	heartbeatDelay  = 5 * time.Second
	heartbeatStarts = 10
	heartbeatBurst  = 20
	heartbeatLinger = 30 * time.Second
)

// HeartbeatLabel marks the speakers' heartbeats among the Leases.
const HeartbeatLabel = "herald.dev/speaker-heartbeat"

// HeartbeatName is the name of node's heartbeat.
func HeartbeatName(node string) string { return "herald-heartbeat-" + node }

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

// heartbeats watches the heartbeats of the peers this speaker does not hear, one
// watch per peer, filtered by name at the API server.
type heartbeats struct {
	namespace string
	client    client.WithWatch
	watches   *leasesByName

	mu sync.Mutex
	// read holds the heartbeats last read straight from the API server (readAll),
	// at readAt, for a decision that needs the records current.
	read   map[string]time.Time
	readAt time.Time
}

func newHeartbeats(ctx context.Context, namespace string, c client.WithWatch, changed func(), log logr.Logger) *heartbeats {
	poke := func(any) { changed() }
	pace := byNamePace{delay: heartbeatDelay, linger: heartbeatLinger, starts: heartbeatStarts, burst: heartbeatBurst}
	return &heartbeats{namespace: namespace, client: c,
		watches: newLeasesByName(ctx, namespace, c, "heartbeat", HeartbeatName, pace,
			toolscache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }, DeleteFunc: poke}, changed, log)}
}

// track watches the heartbeats of these nodes (the peers not heard) once they have
// been passed for heartbeatDelay, starting at most heartbeatStarts watches a second;
// it stops the watches of the others once they are not needed for heartbeatLinger. A
// node left unwatched for now is picked up by a later call, which it pokes a decision
// for.
func (h *heartbeats) track(nodes []string) { h.watches.track(nodes) }

// watched returns the nodes whose heartbeat is watched, sorted.
func (h *heartbeats) watched() []string { return h.watches.watched() }

// beat returns when node's heartbeat was last renewed (zero if it has none), as its
// watch saw it or as last read straight from the API server since the watch started,
// whichever is newer; false while its heartbeat is not watched, or neither knows.
func (h *heartbeats) beat(node string) (time.Time, bool) {
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

// readAll reads every heartbeat straight from the API server: a decision that needs
// the records current needs the heartbeats current too, and a watch may lag.
func (h *heartbeats) readAll(ctx context.Context) error {
	var l coordinationv1.LeaseList
	start := h.watches.now()
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
	h.read, h.readAt = read, start
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

// countSpeakers is how many speakers the cluster holds, this one included, for
// memberlist's automatic suspicion, which is set before this speaker joins: the peers
// whose heartbeat was renewed within the record duration. On an error it counts this
// speaker alone, which only lengthens the suspicion (that of a small cluster). A
// cluster starting all at once counts few, and so does a new one: the same.
func (s *Speaker) countSpeakers(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.records.beats.readAll(ctx); err != nil {
		s.log.Error(err, "counting the speakers for memberlist's suspicion timeout; counting this one alone")
		return 1
	}
	return 1 + s.records.beats.renewedSince(time.Now().Add(-s.cfg.Records.Duration), s.cfg.NodeName)
}

// renewedAt is when l was last renewed, zero if never.
func renewedAt(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
