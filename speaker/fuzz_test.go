package speaker

import (
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/speaker/quorum"
)

// The fuzz targets feed what a peer, a node's state directory or a Lease could hold to
// the speaker's decoders. Whoever wrote it (a peer with the memberlist key, a node's
// own speaker token), the reader must not panic and must read one meaning from it.

// FuzzDecodeClaims: claims that decode are read the same every time, and what Encode
// writes of them decodes to the same claims.
func FuzzDecodeClaims(f *testing.F) {
	for _, seed := range []string{
		`{"172.18.255.200":{"t":"2026-11-25T10:00:00Z","o":["worker"],"g":3},"fc00::1":{}}`,
		`{"::ffff:10.0.0.1":{"g":1},"10.0.0.1":{"g":2}}`,
		`{"fe80::1%eth0":{}}`,
		`{"10.0.0.1":{"o":[""]}}`,
		`{"10.0.0.1":{"g":-1}}`,
		`{"10.0.0.1":{"g":18446744073709551616}}`,
		`{"not-an-ip":{}}`,
		`[1,2]`,
		`null`,
		"",
		" \n",
		"{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeClaims(data)
		if err != nil {
			return
		}
		for range 4 {
			if again, _ := DecodeClaims(data); !reflect.DeepEqual(again, c) {
				t.Fatalf("decoded %q once as %v and once as %v", data, c, again)
			}
		}
		back, err := DecodeClaims(c.Encode())
		if err != nil {
			t.Fatalf("the encoding of %v does not decode: %v", c, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %v gave %v", c, back)
		}
	})
}

// FuzzLoadClaims: whatever the state file holds, loading it either fails with an error
// or gives claims, and the file is gone after (good for one start).
func FuzzLoadClaims(f *testing.F) {
	f.Add([]byte(`{"172.18.255.200":{"t":"t1","o":["worker"]}}`))
	f.Add([]byte(`{"172.18.255.200":`))
	f.Add([]byte{0xff, 0xfe, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(claimsFile(dir, "n"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := loadClaims(dir, "n", time.Hour, time.Now())
		if err == nil && c == nil {
			t.Fatal("a fresh state file loaded as no claims and no error")
		}
		if _, err := os.Stat(claimsFile(dir, "n")); !os.IsNotExist(err) {
			t.Fatalf("the state file is still there after loading: %v", err)
		}
	})
}

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
				Labels: map[string]string{RecordLabel: "true"},
				Annotations: map[string]string{
					RecordMembersAnnotation:     members,
					RecordUnreachableAnnotation: unreachable,
					RecordModeAnnotation:        mode,
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
				quorum.ModeMinority, quorum.ModeIsolated, quorum.ModeRejoining}
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
