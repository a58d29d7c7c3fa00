package beatsummary

import (
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSummarize(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	d := 30 * time.Second
	fresh, stale, next := Summarize([]Beat{
		{Node: "c", RenewedAt: now.Add(-5 * time.Second), Duration: d},
		{Node: "a", RenewedAt: now.Add(-29 * time.Second), Duration: d},
		{Node: "b", RenewedAt: now.Add(-30 * time.Second), Duration: d}, // stale at exactly its duration
		{Node: "e", RenewedAt: now.Add(-time.Second), Duration: 0},      // no duration: stale at once
		{Node: "z"}, // never renewed
	}, now)
	if want := []string{"a", "c"}; !slices.Equal(fresh, want) {
		t.Errorf("fresh %v, want %v", fresh, want)
	}
	if len(stale) != 3 || !stale["b"].Equal(now.Add(-30*time.Second)) || !stale["z"].IsZero() || !stale["e"].Equal(now.Add(-time.Second)) {
		t.Errorf("stale %v, want b at its renewal, e at its renewal and z at the zero time", stale)
	}
	if want := now.Add(time.Second); !next.Equal(want) {
		t.Errorf("next look at %v, want %v (when a turns stale)", next, want)
	}
	if _, _, next := Summarize([]Beat{{Node: "b", RenewedAt: now.Add(-time.Hour), Duration: d}}, now); !next.IsZero() {
		t.Errorf("next look at %v with none fresh, want zero", next)
	}
}

func TestLeaseRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 28, 3, 0, 0, 123456000, time.UTC)
	s := Summary{At: at, Duration: Duration, Fresh: []string{"a", "b"},
		Stale: map[string]time.Time{"c": at.Add(-time.Minute), "d": {}}}
	var l coordinationv1.Lease
	s.Apply(&l)
	if got := l.Annotations[StaleAnnotation]; got != "c=2026-11-28T02:59:00.123456Z,d=0001-01-01T00:00:00Z" {
		t.Errorf("stale annotation %q", got)
	}
	back, err := FromLease(&l)
	if err != nil {
		t.Fatal(err)
	}
	if !back.At.Equal(at) || back.Duration != Duration || !back.SameSets(s) {
		t.Errorf("read back %+v, want %+v", back, s)
	}
	for node, want := range map[string]time.Time{"a": at, "b": at, "c": at.Add(-time.Minute), "d": {}, "x": {}} {
		if got := back.Beat(node); !got.Equal(want) {
			t.Errorf("Beat(%s) = %v, want %v", node, got, want)
		}
	}
	if !back.Usable(at.Add(Duration-time.Millisecond)) || back.Usable(at.Add(Duration)) || (Summary{}).Usable(at) {
		t.Error("a summary is usable only within its duration after it was written, and never unwritten")
	}
	other := back
	other.Stale = map[string]time.Time{"c": at.Add(-time.Minute), "d": at}
	if back.SameSets(other) {
		t.Error("summaries with different stale renewals count as the same")
	}
}

// A malformed summary is refused with the field named, never read as an empty one
// (which would count every unheard peer as having no heartbeat).
func TestFromLeaseErrors(t *testing.T) {
	ok := func() *coordinationv1.Lease {
		var l coordinationv1.Lease
		Summary{At: time.Now(), Duration: Duration}.Apply(&l)
		return &l
	}
	for name, tc := range map[string]struct {
		mutate func(*coordinationv1.Lease)
		want   string
	}{
		"no renewal":      {func(l *coordinationv1.Lease) { l.Spec.RenewTime = nil }, "spec.renewTime"},
		"no duration":     {func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = nil }, "spec.leaseDurationSeconds"},
		"unsorted fresh":  {func(l *coordinationv1.Lease) { l.Annotations[FreshAnnotation] = "b,a" }, FreshAnnotation},
		"stale without =": {func(l *coordinationv1.Lease) { l.Annotations[StaleAnnotation] = "c" }, StaleAnnotation},
		"stale bad time":  {func(l *coordinationv1.Lease) { l.Annotations[StaleAnnotation] = "c=yesterday" }, StaleAnnotation},
		"stale empty node": {func(l *coordinationv1.Lease) {
			l.Annotations[StaleAnnotation] = "=" + time.Now().Format(time.RFC3339Nano)
		}, StaleAnnotation},
	} {
		l := ok()
		l.ObjectMeta = metav1.ObjectMeta{Namespace: "herald-system", Name: Name, Annotations: l.Annotations}
		tc.mutate(l)
		_, err := FromLease(l)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", name, err, tc.want)
		}
	}
}
