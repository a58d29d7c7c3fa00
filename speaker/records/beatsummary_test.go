package records

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/beatsummary"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
)

// Against a real API server: while the controller's heartbeat summary is usable, a
// speaker tells its unheard peers' liveness from it and watches none of their
// heartbeats; once it is stale or unreadable, it falls back to watching them (unless
// its own writes fail); a
// direct read takes the summary rather than listing every heartbeat.
func TestHeartbeatSummaryInUse(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	lease := func(name string, mutate func(*coordinationv1.Lease)) {
		t.Helper()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, l)
		mutate(l)
		if err == nil {
			err = env.Client.Update(ctx, l)
		} else {
			err = env.Client.Create(ctx, l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	heartbeat := func(node string, at time.Time) {
		lease(HeartbeatName(node), func(l *coordinationv1.Lease) {
			l.Labels = map[string]string{HeartbeatLabel: "true"}
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &node, RenewTime: &metav1.MicroTime{Time: at}}
		})
	}
	summary := func(s beatsummary.Summary) { lease(beatsummary.Name, s.Apply) }

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHeartbeats(ctx, ns, wc, func() {}, logr.Discard())
	h.summaryFrom = 4
	var later time.Duration // how far the heartbeats' clock runs ahead; only this goroutine moves it
	h.watches.now = func() time.Time { return time.Now().Add(later) }
	h.summary.now = h.watches.now

	now := time.Now()
	longAgo := now.Add(-time.Hour).UTC().Truncate(time.Microsecond)
	heartbeat("b", now)
	summary(beatsummary.Summary{At: now, Duration: beatsummary.Duration, Fresh: []string{"b", "c"},
		Stale: map[string]time.Time{"d": longAgo}})
	unheard := []string{"b", "c", "d", "e"}
	// Fewer unheard peers than summaryFrom: their heartbeats, not the summary.
	h.track(unheard[:3])
	later += summaryDelay
	h.track(unheard[:3])
	if h.summary.watch(summaryKey) != nil {
		t.Errorf("the summary watched with 3 peers unheard, want from %d", h.summaryFrom)
	}
	h.track(unheard)
	if _, known := h.beat("c"); known {
		t.Errorf("c's liveness known as soon as it is unheard, want after %v", summaryDelay)
	}
	later += summaryDelay
	h.track(unheard)
	eventually(t, "the summary read from its watch", func() bool { return h.summaryUsed() })
	stamp := now.Truncate(time.Microsecond)
	for node, want := range map[string]time.Time{"b": stamp, "c": stamp, "d": longAgo, "e": {}} {
		if at, known := h.beat(node); !known || !at.Equal(want) {
			t.Errorf("beat(%s) from the summary = %v (known %v), want %v", node, at, known, want)
		}
	}
	later += heartbeatDelay
	h.track(unheard)
	if w := h.watched(); len(w) != 0 {
		t.Errorf("heartbeats %v watched while the summary is usable, want none", w)
	}

	// The controller stops: the summary turns stale, and the heartbeats are watched.
	later += beatsummary.Duration
	h.track(unheard)
	if h.summaryUsed() {
		t.Fatal("a summary past its duration is still used")
	}
	if _, known := h.beat("b"); known {
		t.Error("b's liveness known from a stale summary")
	}
	// Unless this speaker's own writes fail: every freshness is then judged as of its
	// last successful write, and a summary usable then stands. One that was stale
	// already does not.
	h.setWritesFail(true, now.Add(time.Second))
	if at, known := h.beat("c"); !known || !at.Equal(stamp) {
		t.Errorf("beat(c) with this speaker's writes failing since just after the summary = %v (known %v), want %v from the summary", at, known, stamp)
	}
	h.setWritesFail(true, now.Add(beatsummary.Duration))
	if _, known := h.beat("c"); known {
		t.Error("beat(c) known from a summary already stale at this speaker's last successful write")
	}
	h.setWritesFail(false, time.Time{})
	later += heartbeatDelay
	h.track(unheard)
	eventually(t, "b's heartbeat from its own watch", func() bool {
		at, known := h.beat("b")
		return known && at.Equal(stamp)
	})
	if w := h.watched(); len(w) != len(unheard) {
		t.Errorf("heartbeats %v watched with the summary stale, want %v", w, unheard)
	}

	// A direct read takes a usable summary (here it says c, f and g are fresh, which
	// no heartbeat does), and lists the heartbeats when it is unreadable.
	summary(beatsummary.Summary{At: time.Now().Add(later), Duration: beatsummary.Duration, Fresh: []string{"c", "f", "g"}})
	if err := h.readAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.renewedSince(time.Now().Add(later-time.Minute), "a"); n != 3 {
		t.Errorf("%d heartbeats fresh after a direct read of the summary, want 3 (c, f, g)", n)
	}
	lease(beatsummary.Name, func(l *coordinationv1.Lease) { l.Annotations[beatsummary.FreshAnnotation] = "g,c" })
	if err := h.readAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.renewedSince(now.Add(-time.Minute), "a"); n != 1 {
		t.Errorf("%d heartbeats fresh after a direct read with the summary unreadable, want 1 (b's own heartbeat)", n)
	}
	eventually(t, "the unreadable summary seen by its watch", func() bool {
		h.track(unheard)
		return !h.summaryUsed()
	})
}
