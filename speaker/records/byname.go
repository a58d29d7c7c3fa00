package records

import (
	"context"
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
)

// leasesByName keeps one watch per node of a set that changes with each decision (the
// peers this speaker does not hear), each picking that node's Lease by name at the API
// server: its heartbeat, or its record. A node's watch starts once the node has been
// in the set for delay, at most a limited number a second after a burst (a node cut
// off from hundreds of peers opens their watches over seconds, not at once), and
// stops once the node has been out of the set for linger (a member that flaps does not
// restart its watch each time). Its timers poke a decision, which calls track again.
type leasesByName struct {
	ctx       context.Context // the watches' lifetime
	namespace string
	client    client.WithWatch
	what      string // names the Leases in logs and errors: "heartbeat", "record"
	name      func(node string) string
	handler   toolscache.ResourceEventHandler
	poke      func()
	log       logr.Logger

	delay, linger time.Duration
	starts        *rate.Limiter
	now           func() time.Time

	mu       sync.Mutex
	watching map[string]*nodeLeaseWatch
	// wantedSince is since when each node passed to track has been in its set.
	wantedSince map[string]time.Time
	// retry: a poke is due for the watches the limit held back.
	retry bool
}

// byNamePace is when and how fast a leasesByName starts and stops its watches.
type byNamePace struct {
	delay, linger time.Duration
	starts        rate.Limit // a second, after a burst
	burst         int
}

type nodeLeaseWatch struct {
	*leaseWatch
	key     string // namespace/name of the Lease it watches
	started time.Time
	// unneeded is since when its node is out of the set (zero while it is in).
	unneeded time.Time
}

func newLeasesByName(ctx context.Context, namespace string, c client.WithWatch, what string, name func(string) string, pace byNamePace, h toolscache.ResourceEventHandler, poke func(), log logr.Logger) *leasesByName {
	return &leasesByName{ctx: ctx, namespace: namespace, client: c, what: what, name: name, handler: h, poke: poke, log: log,
		delay: pace.delay, linger: pace.linger, starts: rate.NewLimiter(pace.starts, pace.burst), now: time.Now,
		watching: map[string]*nodeLeaseWatch{}, wantedSince: map[string]time.Time{}}
}

// track makes nodes the set: it starts the watches of those in it for delay (as the
// limit allows) and stops those out of it for linger. It returns the nodes of the set
// whose watch has not synced yet (or not started).
func (b *leasesByName) track(nodes []string) (pending []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	wanted := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		wanted[n] = true
		if _, ok := b.wantedSince[n]; !ok {
			b.wantedSince[n] = now
			if b.delay > 0 {
				time.AfterFunc(b.delay, b.poke) // a decision then starts its watch
			}
		}
	}
	for n := range b.wantedSince {
		if !wanted[n] {
			delete(b.wantedSince, n)
		}
	}
	for n, w := range b.watching {
		switch {
		case wanted[n]:
			w.unneeded = time.Time{}
		case w.unneeded.IsZero():
			w.unneeded = now
			time.AfterFunc(b.linger, b.poke) // a decision then stops it
		case now.Sub(w.unneeded) >= b.linger:
			w.Stop()
			delete(b.watching, n)
		}
	}
	held := false
	for _, n := range nodes {
		w := b.watching[n]
		if w == nil && b.ctx.Err() == nil && now.Sub(b.wantedSince[n]) >= b.delay {
			if b.starts.Allow() {
				w = b.startLocked(n, now)
			} else {
				held = true
			}
		}
		if w == nil || !w.Synced() {
			pending = append(pending, n)
		}
	}
	if held && !b.retry {
		b.retry = true
		time.AfterFunc(2*time.Duration(float64(time.Second)/float64(b.starts.Limit())), func() {
			b.mu.Lock()
			b.retry = false
			b.mu.Unlock()
			b.poke()
		})
	}
	return pending
}

// stopAll stops every watch at once, and forgets the set: another watch holds
// their Leases now.
func (b *leasesByName) stopAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n, w := range b.watching {
		w.Stop()
		delete(b.watching, n)
	}
	clear(b.wantedSince)
}

func (b *leasesByName) startLocked(node string, now time.Time) *nodeLeaseWatch {
	w := &nodeLeaseWatch{started: now, key: b.namespace + "/" + b.name(node), leaseWatch: watchLeases(b.ctx, b.client, b.namespace, b.what+" of "+node, func(o *client.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", b.name(node))
	}, b.handler)}
	b.watching[node] = w
	b.log.V(1).Info("watching by name", "lease", b.what, "node", node)
	return w
}

// watch returns node's watch, nil if there is none.
func (b *leasesByName) watch(node string) *nodeLeaseWatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.watching[node]
}

// lease returns the Lease as the watch holds it (nil if there is none), and whether
// the watch has synced.
func (w *nodeLeaseWatch) lease() (*coordinationv1.Lease, bool) {
	if !w.Synced() {
		return nil, false
	}
	obj, ok, _ := w.Store.GetByKey(w.key)
	if !ok {
		return nil, true
	}
	return obj.(*coordinationv1.Lease), true
}

// watched returns the nodes whose Lease is watched, sorted.
func (b *leasesByName) watched() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.watching))
}

// synced says whether every watch has synced.
func (b *leasesByName) synced() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.watching {
		if !w.Synced() {
			return false
		}
	}
	return true
}

// leases returns what the synced watches hold. Read only.
func (b *leasesByName) leases() []*coordinationv1.Lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*coordinationv1.Lease
	for _, w := range b.watching {
		out = append(out, w.leases()...)
	}
	return out
}
