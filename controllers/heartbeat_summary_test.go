package controllers_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/beatsummary"
	"herald.dev/herald/internal/testkit"
)

// Against a real API server: the controller writes the heartbeat summary from the
// speakers' heartbeats in its namespace, when one turns stale with no event to tell
// (its renewal simply stops), when one is renewed or deleted, and renews the summary
// when nothing changes, so that its readers can tell it is current.
func TestHeartbeatSummary(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	beat := func(namespace, node string, at time.Time, d time.Duration, heartbeat bool) {
		t.Helper()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: beatsummary.HeartbeatName(node)}}
		if heartbeat {
			l.Labels = map[string]string{beatsummary.HeartbeatLabel: "true"}
		}
		err := h.c.Get(h.ctx, types.NamespacedName{Namespace: namespace, Name: l.Name}, l)
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), RenewTime: &metav1.MicroTime{Time: at},
			LeaseDurationSeconds: ptr.To(int32(d / time.Second))}
		if err == nil {
			err = h.c.Update(h.ctx, l)
		} else {
			err = h.c.Create(h.ctx, l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	beat(ns, "a", now, 4*time.Second, true)
	beat(ns, "b", now.Add(-10*time.Second), 3*time.Second, true)
	beat(ns, "c", now, time.Hour, true)
	beat(ns, "d", now, time.Hour, false)      // a Lease that is no heartbeat
	beat("team-a", "e", now, time.Hour, true) // a heartbeat outside herald's namespace
	h.startController(defaultOptions())

	summary := func() (beatsummary.Summary, error) {
		var l coordinationv1.Lease
		if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: beatsummary.Name}, &l); err != nil {
			return beatsummary.Summary{}, err
		}
		return beatsummary.FromLease(&l)
	}
	wait := func(what string, fresh []string, stale map[string]time.Time) beatsummary.Summary {
		t.Helper()
		var s beatsummary.Summary
		testkit.Eventually(t, waitFor, poll, what, func() error {
			var err error
			if s, err = summary(); err != nil {
				return err
			}
			if !slices.Equal(s.Fresh, fresh) || !maps.EqualFunc(s.Stale, stale, time.Time.Equal) {
				return fmt.Errorf("summary %+v, want fresh %v and stale %v", s, fresh, stale)
			}
			return nil
		})
		return s
	}
	stamp := func(at time.Time) time.Time { return at.Truncate(time.Microsecond) } // a MicroTime's precision

	first := wait("at start", []string{"a", "c"}, map[string]time.Time{"b": stamp(now.Add(-10 * time.Second))})
	if first.Duration != beatsummary.Duration {
		t.Errorf("summary trusted for %v, want %v", first.Duration, beatsummary.Duration)
	}
	// a's renewal stops: no event, its duration runs out, and the summary says so then,
	// not at its next renewal.
	aStale := wait("a stale", []string{"c"}, map[string]time.Time{"a": stamp(now), "b": stamp(now.Add(-10 * time.Second))})
	if !aStale.At.Before(first.At.Add(beatsummary.Renew)) {
		t.Errorf("a's heartbeat, stale 4 s after its renewal, was written stale at the summary's renewal (%v after the first)", aStale.At.Sub(first.At))
	}
	renewed := time.Now()
	beat(ns, "b", renewed, 3*time.Second, true)
	changed := wait("b renewed", []string{"b", "c"}, map[string]time.Time{"a": stamp(now)})
	if err := h.c.Delete(h.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: beatsummary.HeartbeatName("a")}}); err != nil {
		t.Fatal(err)
	}
	// b's 3 s run out meanwhile.
	last := wait("a deleted, b stale", []string{"c"}, map[string]time.Time{"b": stamp(renewed)})
	if !last.At.After(changed.At) {
		t.Errorf("summary written at %v after a change, not after %v", last.At, changed.At)
	}

	// Nothing changes now: the summary is renewed every beatsummary.Renew.
	var s beatsummary.Summary
	testkit.Eventually(t, beatsummary.Renew+waitFor, poll, "the summary renewed", func() error {
		var err error
		if s, err = summary(); err != nil {
			return err
		}
		if !s.At.After(last.At) {
			return fmt.Errorf("summary %+v not renewed", s)
		}
		return nil
	})
	if !s.SameSets(last) {
		t.Fatalf("summary %+v was renewed changed; want as %+v", s, last)
	}
	if gap := s.At.Sub(last.At); gap < beatsummary.Renew-time.Second {
		t.Errorf("summary rewritten %v after the last change with nothing new, want after about %v", gap, beatsummary.Renew)
	}
}
