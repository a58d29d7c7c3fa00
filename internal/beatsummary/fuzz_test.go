package beatsummary

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// FuzzFromLease reads summaries with any annotations. Invariants: no panic; a summary
// that reads names each speaker once, fresh or stale, never an empty name; and what
// Apply writes of it reads back the same.
func FuzzFromLease(f *testing.F) {
	f.Add("a,b,c", "d=2026-11-29T12:00:00Z", int32(25))
	f.Add("", "d=2026-11-29T12:00:00.123456789+01:00,e=0001-01-01T00:00:00Z", int32(25))
	f.Add(",a", "", int32(25))
	f.Add("a,a", "", int32(25))
	f.Add("a", "a=2026-11-29T12:00:00Z", int32(25))
	f.Add("b,a", "", int32(0))
	f.Add("a", "=2026-11-29T12:00:00Z", int32(-1))
	f.Add("a", "d=yesterday", int32(25))
	f.Fuzz(func(t *testing.T, fresh, stale string, seconds int32) {
		at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "herald-system", Name: Name,
				Annotations: map[string]string{FreshAnnotation: fresh, StaleAnnotation: stale}},
			Spec: coordinationv1.LeaseSpec{
				RenewTime:            &metav1.MicroTime{Time: at},
				LeaseDurationSeconds: ptr.To(seconds),
			},
		}
		s, err := FromLease(l)
		if err != nil {
			return
		}
		if !slices.IsSorted(s.Fresh) || len(slices.Compact(slices.Clone(s.Fresh))) != len(s.Fresh) {
			t.Fatalf("fresh %q is not sorted and unique", s.Fresh)
		}
		for _, node := range s.Fresh {
			if _, both := s.Stale[node]; both || node == "" {
				t.Fatalf("fresh %q: %q is empty or also stale (%v)", s.Fresh, node, s.Stale)
			}
		}
		if _, ok := s.Stale[""]; ok {
			t.Fatalf("stale names an empty node: %v", s.Stale)
		}
		var written coordinationv1.Lease
		s.Apply(&written)
		back, err := FromLease(&written)
		if err != nil {
			t.Fatalf("what Apply wrote of %+v does not read: %v", s, err)
		}
		if !back.SameSets(s) || !back.At.Equal(s.At) || back.Duration != s.Duration {
			t.Fatalf("round trip of %+v gave %+v", s, back)
		}
	})
}
