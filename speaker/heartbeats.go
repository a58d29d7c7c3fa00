package speaker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	ctx       context.Context // the watches' lifetime
	namespace string
	client    client.WithWatch
	changed   func() // pokes the election
	log       logr.Logger

	starts *rate.Limiter

	mu       sync.Mutex
	watching map[string]*heartbeatWatch
	// unheardSince is since when each node passed to track has been in its list.
	unheardSince map[string]time.Time
	// retry: a decision is due for the watches the limit held back.
	retry bool
	// read holds the heartbeats last read straight from the API server (readAll),
	// at readAt, for a decision that needs the records current.
	read   map[string]time.Time
	readAt time.Time
	now    func() time.Time
}

type heartbeatWatch struct {
	*leaseWatch
	// unneeded is since when its node is heard again (zero while it is not).
	unneeded time.Time
	started  time.Time
}

func newHeartbeats(ctx context.Context, namespace string, c client.WithWatch, changed func(), log logr.Logger) *heartbeats {
	return &heartbeats{ctx: ctx, namespace: namespace, client: c, changed: changed, log: log, watching: map[string]*heartbeatWatch{}, unheardSince: map[string]time.Time{}, now: time.Now,
		starts: rate.NewLimiter(heartbeatStarts, heartbeatBurst)}
}

// track watches the heartbeats of these nodes (the peers not heard) once they have
// been passed for heartbeatDelay, starting at most heartbeatStarts watches a second;
// it stops the watches of the others once they are not needed for heartbeatLinger. A
// node left unwatched for now is picked up by a later call, which it pokes a decision
// for.
func (h *heartbeats) track(nodes []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	needed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		needed[n] = true
		if _, ok := h.unheardSince[n]; !ok {
			h.unheardSince[n] = now
			time.AfterFunc(heartbeatDelay, h.changed) // a decision then watches it
		}
	}
	for n := range h.unheardSince {
		if !needed[n] {
			delete(h.unheardSince, n)
		}
	}
	for n, w := range h.watching {
		switch {
		case needed[n]:
			w.unneeded = time.Time{}
		case w.unneeded.IsZero():
			w.unneeded = now
			time.AfterFunc(heartbeatLinger, h.changed) // a decision then stops it
		case now.Sub(w.unneeded) >= heartbeatLinger:
			w.stop()
			delete(h.watching, n)
		}
	}
	held := false
	for _, n := range nodes {
		if h.watching[n] == nil && h.ctx.Err() == nil && now.Sub(h.unheardSince[n]) >= heartbeatDelay {
			if !h.starts.Allow() {
				held = true
				continue
			}
			h.watching[n] = h.start(h.ctx, n)
		}
	}
	if held && !h.retry {
		h.retry = true
		time.AfterFunc(time.Second/heartbeatStarts*2, func() {
			h.mu.Lock()
			h.retry = false
			h.mu.Unlock()
			h.changed()
		})
	}
}

// watched returns the nodes whose heartbeat is watched, sorted.
func (h *heartbeats) watched() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.watching))
}

func (h *heartbeats) start(ctx context.Context, node string) *heartbeatWatch {
	poke := func(any) { h.changed() }
	w := watchLeases(ctx, h.client, h.namespace, "heartbeat of "+node, func(o *client.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", HeartbeatName(node))
	}, toolscache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }, DeleteFunc: poke})
	h.log.V(1).Info("watching a heartbeat", "node", node)
	return &heartbeatWatch{leaseWatch: w, started: h.now()}
}

// beat returns when node's heartbeat was last renewed (zero if it has none), as its
// watch saw it or as last read straight from the API server since the watch started,
// whichever is newer; false while its heartbeat is not watched, or neither knows.
func (h *heartbeats) beat(node string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.watching[node]
	if w == nil {
		return time.Time{}, false
	}
	var at time.Time
	known := h.readAt.After(w.started)
	if known {
		at = h.read[node]
	}
	if w.synced() {
		known = true
		if obj, ok, _ := w.store.GetByKey(h.namespace + "/" + HeartbeatName(node)); ok {
			if t := renewedAt(obj.(*coordinationv1.Lease)); t.After(at) {
				at = t
			}
		}
	}
	return at, known
}

// readAll reads every heartbeat straight from the API server: a decision that needs
// the records current needs the heartbeats current too, and a watch may lag.
func (h *heartbeats) readAll(ctx context.Context) error {
	var l coordinationv1.LeaseList
	start := h.now()
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

// renewedAt is when l was last renewed, zero if never.
func renewedAt(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}
