package records

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker/quorum"
)

// A peer this speaker hears counts as alive now; one it does not hear is as fresh as
// the later of its record's renewal and its heartbeat's, and counts as fresh while
// its heartbeat is not known yet.
func TestLivenessApply(t *testing.T) {
	now := time.Unix(10_000, 0)
	old, recent := now.Add(-time.Hour), now.Add(-5*time.Second)
	beats := map[string]time.Time{"c": recent, "e": old.Add(-time.Minute), "f": {}}
	lv := liveness{
		heard: func(n string) bool { return n == "b" },
		beat: func(n string) (time.Time, bool) {
			at, ok := beats[n]
			return at, ok
		},
	}
	recs := []quorum.Record{{Node: "a", RenewedAt: old}, {Node: "b", RenewedAt: old}, {Node: "c", RenewedAt: old},
		{Node: "d", RenewedAt: old}, {Node: "e", RenewedAt: old}, {Node: "f", RenewedAt: recent}}
	got := lv.apply("a", recs, now)
	want := map[string]time.Time{
		"a": old,    // self: its own record as written
		"b": now,    // heard
		"c": recent, // the heartbeat is newer than the record
		"d": now,    // heartbeat not known yet
		"e": old,    // the record is newer than the heartbeat
		"f": recent, // no heartbeat: the record's own renewal
	}
	for _, r := range got {
		if !r.RenewedAt.Equal(want[r.Node]) {
			t.Errorf("%s renewed at %v, want %v", r.Node, r.RenewedAt, want[r.Node])
		}
	}
	if !recs[1].RenewedAt.Equal(old) {
		t.Error("apply changed the records it was given")
	}
	if u := lv.unheard("a", append(recs, quorum.Record{Node: "c"})); !slices.Equal(u, []string{"c", "d", "e", "f"}) {
		t.Errorf("unheard %v, want [c d e f]", u)
	}
}

// countingWriter counts the writes of each Lease.
type countingWriter struct {
	client.Writer
	mu     sync.Mutex
	writes map[string]int
}

func (w *countingWriter) count(obj client.Object) {
	w.mu.Lock()
	w.writes[obj.GetName()]++
	w.mu.Unlock()
}

func (w *countingWriter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	w.count(obj)
	return w.Writer.Create(ctx, obj, opts...)
}

func (w *countingWriter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	w.count(obj)
	return w.Writer.Update(ctx, obj, opts...)
}

func (w *countingWriter) of(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes[name]
}

// Against a real API server: a speaker renews its heartbeat at the renewal pace and
// writes its record only when what it says changes; a reader sees the heartbeats of
// the peers it watches, and no event of the others reaches it.
func TestHeartbeats(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	cfg := Config{Renew: time.Second, FastRenew: 200 * time.Millisecond, Duration: 3 * time.Second}
	w := &countingWriter{Writer: env.Client, writes: map[string]int{}}
	writer := func(node string) (*Keeper, context.CancelFunc) {
		r := newKeeper(node, ns, cfg, env.Client, env.Client, w, func() {}, func(string, []string) {}, logr.Discard())
		r.Want(Wish{Members: []string{node}, Mode: quorum.ModeQuorum})
		ctx, stop := context.WithCancel(ctx)
		go r.Run(ctx)
		return r, stop
	}
	b, stopB := writer("b")
	_, stopC := writer("c")
	defer stopC()

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	var pokes atomic.Int32
	h := newHeartbeats(ctx, ns, wc, func() { pokes.Add(1) }, logr.Discard())
	var later atomic.Int64 // how far the heartbeats' clock runs ahead
	h.watches.now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	advance := func(d time.Duration) { later.Add(int64(d)) }
	h.track([]string{"b"})
	firstTrack := time.Now() // its poke for the delayed watch comes heartbeatDelay later
	if _, known := h.beat("b"); known || len(h.watched()) > 0 {
		t.Errorf("a heartbeat is watched (%v) or known (%v) as soon as its peer is unheard, want after %v", h.watched(), known, heartbeatDelay)
	}
	advance(heartbeatDelay)
	h.track([]string{"b"})
	stored := func(node string) time.Time {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: HeartbeatName(node)}, &l); err != nil {
			return time.Time{}
		}
		return renewedAt(&l)
	}
	eventually(t, "b's heartbeat seen as stored", func() bool {
		at, known := h.beat("b")
		return known && !at.IsZero() && at.Equal(stored("b"))
	})
	first, _ := h.beat("b")
	eventually(t, "b's heartbeat renewed", func() bool { at, _ := h.beat("b"); return at.After(first) })
	if _, known := h.beat("c"); known {
		t.Error("c's heartbeat is known without being watched")
	}

	// Records: written once at start, then only when what they say changes.
	for _, node := range []string{"b", "c"} {
		if n := w.of(Name(node)); n != 1 {
			t.Errorf("%s's record written %d times without a change, want once", node, n)
		}
	}
	b.Want(Wish{Members: []string{"b", "c"}, Mode: quorum.ModeQuorum})
	eventually(t, "b's changed record written", func() bool { return w.of(Name("b")) == 2 })

	// A record deleted by hand is written again at the next renewal period, though
	// what it says did not change.
	if err := env.Client.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name("b")}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's deleted record written again", func() bool {
		var l coordinationv1.Lease
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: Name("b")}, &l) == nil
	})
	time.Sleep(2 * cfg.Renew)
	if n := w.of(Name("b")); n != 4 {
		t.Errorf("b's record written %d times: once at start, once changed, once re-created (and failed once on the deleted one), want 4", n)
	}

	// c renews (every second) while only b is watched: with b's writer stopped, no
	// event reaches the reader.
	stopB()
	time.Sleep(max(500*time.Millisecond, time.Until(firstTrack.Add(heartbeatDelay+500*time.Millisecond))))
	pokes.Store(0)
	before := w.of(HeartbeatName("c"))
	time.Sleep(2500 * time.Millisecond)
	if renewals := w.of(HeartbeatName("c")) - before; renewals < 2 {
		t.Fatalf("c renewed its heartbeat %d times in 2.5 s at a 1 s pace", renewals)
	}
	if n := pokes.Load(); n != 0 {
		t.Errorf("%d heartbeat events reached a reader watching b alone while only c renewed", n)
	}

	// Watching c instead: c's heartbeat is known; a direct read makes a heartbeat
	// known before its watch has synced. b's watch lingers for heartbeatLinger, then
	// stops.
	h.track([]string{"c"})
	advance(heartbeatDelay)
	h.track([]string{"c"})
	if err := h.readAll(ctx); err != nil {
		t.Fatal(err)
	}
	if at, known := h.beat("c"); !known || at.IsZero() {
		t.Errorf("c's heartbeat after a direct read: %v, known %v", at, known)
	}
	if got := h.watched(); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("watched %v right after b was heard again, want [b c]", got)
	}
	advance(heartbeatLinger)
	h.track([]string{"c"})
	if _, known := h.beat("b"); known {
		t.Error("b's heartbeat is still known after its watch stopped")
	}
	if got := h.watched(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("watched %v %v after b was heard again, want [c]", got, heartbeatLinger)
	}

	// A speaker hearing nobody starts at most a burst of watches at once, and the rest
	// as the limit allows, poked to decide again meanwhile.
	var many []string
	for i := range 3 * heartbeatBurst {
		many = append(many, fmt.Sprintf("n%02d", i))
	}
	stopC() // no heartbeat event pokes from here on
	time.Sleep(300 * time.Millisecond)
	pokes.Store(0)
	h.track(many)
	advance(heartbeatDelay)
	h.track(many)
	if n := len(h.watched()); n > heartbeatBurst+2 {
		t.Errorf("%d watches started at once, want at most about %d", n, heartbeatBurst)
	}
	eventually(t, "a poke to start the watches held back", func() bool { return pokes.Load() > 0 })
	eventually(t, "every heartbeat watched", func() bool { h.track(many); return len(h.watched()) == len(many) })
}

// memberlist's automatic suspicion counts the speakers by their heartbeats: the peers
// renewed within the record duration, and this speaker once.
func TestCountSpeakers(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	beat := func(node string, at time.Time) {
		t.Helper()
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: HeartbeatName(node), Labels: map[string]string{HeartbeatLabel: "true"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &metav1.MicroTime{Time: at}},
		}
		if err := env.Client.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	r := New(ctx, Options{Self: "a", Namespace: ns, Config: DefaultConfig(), Watches: wc, CacheHoldsRecords: true, Log: logr.Discard()})
	if n, err := r.CountSpeakers(ctx); n != 1 || err != nil {
		t.Errorf("no heartbeat yet: %d speakers counted (%v), want 1 (this one)", n, err)
	}
	now := time.Now()
	beat("a", now)                        // this speaker's, from before its restart
	beat("b", now.Add(-time.Second))      // fresh
	beat("c", now.Add(-r.cfg.Duration/2)) // fresh
	beat("d", now.Add(-2*r.cfg.Duration)) // a node gone
	if n, err := r.CountSpeakers(ctx); n != 3 || err != nil {
		t.Errorf("%d speakers counted (%v), want 3 (a, b and c; d's heartbeat is stale)", n, err)
	}
}

// TestHeartbeatReportsKeys: against a real API server, the heartbeat carries the
// fingerprints of the keys, and a change of keys is reported at once, not at the
// next renewal (an hour here).
func TestHeartbeatReportsKeys(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	cfg := Config{Renew: time.Hour, FastRenew: 200 * time.Millisecond, Duration: 3 * time.Second}
	r := newKeeper("a", ns, cfg, env.Client, env.Client, env.Client, func() {}, func(string, []string) {}, logr.Discard())
	var report atomic.Value
	report.Store("1111111111111111")
	r.keysReport = func() string { return report.Load().(string) }
	go r.Run(ctx)
	reported := func() string {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: HeartbeatName("a")}, &l); err != nil {
			return ""
		}
		return l.Annotations[memberkey.ReportAnnotation]
	}
	eventually(t, "the first heartbeat reports the keys", func() bool { return reported() == "1111111111111111" })
	report.Store("2222222222222222,1111111111111111")
	r.RenewHeartbeat()
	eventually(t, "the new keys reported before the next renewal", func() bool { return reported() == "2222222222222222,1111111111111111" })
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, what, testkit.Holds(cond, func() string { return "not yet" }))
}
