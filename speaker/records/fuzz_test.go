package records

import (
	"slices"
	"testing"
	"time"

	"herald.dev/herald/speaker/quorum"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// FuzzRecordFromLease: a record Lease with any annotations reads as the record of its
// holder, and a peer's record, whatever it says, leads this speaker's quorum rule to a
// verdict among the known modes whose electors are live members.
func FuzzRecordFromLease(f *testing.F) {
	f.Add("a,b,c", "", string(quorum.ModeQuorum), int32(10))
	f.Add("c", "a,b", string(quorum.ModeIsolated), int32(10))
	f.Add(",,", ",a,,a", "Hold", int32(0))
	f.Add("a,b,c,d,e,f", "", "", int32(-5))
	f.Add("", "a", "\x00", int32(2147483647))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, members, unreachable, mode string, seconds int32) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "herald-speaker-c",
				Labels: map[string]string{Label: "true"},
				Annotations: map[string]string{
					MembersAnnotation:     members,
					UnreachableAnnotation: unreachable,
					ModeAnnotation:        mode,
				},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To("c"),
				RenewTime:            &metav1.MicroTime{Time: now.Add(-time.Second)},
				LeaseDurationSeconds: ptr.To(seconds),
			},
		}
		r, ok := recordFromLease(l, now.Add(-time.Second))
		if !ok || r.Node != "c" {
			t.Fatalf("record = %+v, %v; want c's", r, ok)
		}
		live := []quorum.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}
		fresh := func(node string) quorum.Record {
			return quorum.Record{Node: node, Members: []string{"a", "b", "c"}, Mode: quorum.ModeQuorum,
				RenewedAt: now.Add(-time.Second), Duration: 10 * time.Second}
		}
		st := quorum.State{}
		for range 3 {
			var v quorum.Verdict
			v, st = quorum.Decide(quorum.DefaultConfig(), st, quorum.Input{
				Self: "a", Members: live, Records: []quorum.Record{fresh("a"), fresh("b"), r},
				APIUp: true, APIAt: now, RecordsReadAt: now, Now: now,
			})
			known := []quorum.Mode{quorum.ModeQuorum, quorum.ModeHold, quorum.ModeArbitrated,
				quorum.ModeMinority, quorum.ModeIsolated, quorum.ModeRejoining, quorum.ModeRestarting}
			if !slices.Contains(known, v.Mode) {
				t.Fatalf("verdict mode %q", v.Mode)
			}
			for _, e := range v.Electors {
				if !slices.ContainsFunc(live, func(m quorum.Member) bool { return m.Name == e }) {
					t.Fatalf("elector %q is not a live member (verdict %+v)", e, v)
				}
			}
			now = now.Add(time.Second)
		}
	})
}
