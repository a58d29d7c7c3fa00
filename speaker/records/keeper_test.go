package records

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"herald.dev/herald/speaker/quorum"
)

// A record read in an older version than one seen before (the cache lagging behind a
// direct read) is not taken for news.
func TestRecordsNeverGoBack(t *testing.T) {
	r := &Keeper{}
	lease := func(rv, members string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "herald-speaker-a", UID: "u1", ResourceVersion: rv,
			Annotations: map[string]string{MembersAnnotation: members}}}
	}
	r.newer(lease("20", "a,b,c"))
	if got := r.newer(lease("15", "a,b")); got.ResourceVersion != "20" {
		t.Fatalf("older version 15 after 20: got %s", got.ResourceVersion)
	}
	if got := r.newer(lease("25", "a,b")); got.ResourceVersion != "25" {
		t.Fatalf("newer version 25: got %s", got.ResourceVersion)
	}
	recreated := lease("3", "a")
	recreated.UID = "u2"
	if got := r.newer(recreated); got.ResourceVersion != "3" {
		t.Fatalf("a record deleted and created again is new whatever its version: got %s", got.ResourceVersion)
	}
}

func TestRenewalOnly(t *testing.T) {
	base := &coordinationv1.Lease{}
	base.UID = "u1"
	base.Labels = map[string]string{Label: "true"}
	base.Annotations = map[string]string{MembersAnnotation: "a,b", ModeAnnotation: "Quorum"}
	base.Spec.HolderIdentity = ptr.To("a")
	base.Spec.LeaseDurationSeconds = ptr.To(int32(30))
	base.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(100, 0)}
	renewed := base.DeepCopy()
	renewed.ResourceVersion = "2"
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(110, 0)}
	if !renewalOnly(base, renewed) {
		t.Error("a renewal with the same annotations is not renewalOnly")
	}
	for name, change := range map[string]func(*coordinationv1.Lease){
		"members":  func(l *coordinationv1.Lease) { l.Annotations[MembersAnnotation] = "a" },
		"mode":     func(l *coordinationv1.Lease) { l.Annotations[ModeAnnotation] = "Hold" },
		"unreach":  func(l *coordinationv1.Lease) { l.Annotations[UnreachableAnnotation] = "b" },
		"macs":     func(l *coordinationv1.Lease) { l.Annotations[MACsAnnotation] = "02:00:00:00:00:01" },
		"holder":   func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("b") },
		"duration": func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To(int32(15)) },
		"uid":      func(l *coordinationv1.Lease) { l.UID = "u2" },
	} {
		l := renewed.DeepCopy()
		change(l)
		if renewalOnly(base, l) {
			t.Errorf("a change of %s is taken for a renewal", name)
		}
	}
}

// A record is parsed once per version; a new version, or a record made again under
// the same name, is read afresh, and each read carries when its version was first seen.
func TestRecordsParseOncePerVersion(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &Keeper{seen: map[string]seenVersion{}, primed: true, now: func() time.Time { return now }}
	lease := func(uid, rv, members string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "herald-speaker-a", UID: types.UID(uid), ResourceVersion: rv,
			Labels: map[string]string{Label: "true"}, Annotations: map[string]string{MembersAnnotation: members}}}
		l.Spec.HolderIdentity = ptr.To("a")
		l.Spec.LeaseDurationSeconds = ptr.To(int32(30))
		l.Spec.RenewTime = &metav1.MicroTime{Time: now}
		return l
	}
	read := func(l *coordinationv1.Lease) []string {
		t.Helper()
		r.note(l, true)
		rec, ok := r.parse(l)
		if !ok || !rec.ChangedAt.Equal(r.seen[l.Name].at) {
			t.Fatalf("parse(%s): ok %v, changed at %v, want %v", l.ResourceVersion, ok, rec.ChangedAt, r.seen[l.Name].at)
		}
		return rec.Members
	}
	first := read(lease("u1", "1", "a,b,c"))
	now = now.Add(time.Second)
	again := read(lease("u1", "1", "a,b,c"))
	if &first[0] != &again[0] {
		t.Error("the same version was parsed again")
	}
	if got := read(lease("u1", "2", "a,b")); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("version 2: members %v, want [a b]", got)
	}
	if got := read(lease("u2", "2", "a")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a record made again: members %v, want [a]", got)
	}
	if _, ok := r.parse(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other", ResourceVersion: "1"}}); ok {
		t.Error("a Lease that is not a record parsed as one")
	}
}

// A change of what the record says, or a peer that starts asking whether this speaker
// is alive, is written at once; an asker that stops asking, or the same wish again,
// waits for the renewal period.
func TestRecordsWriteAtOnce(t *testing.T) {
	r := newKeeper("a", "herald-system", DefaultConfig(), nil, nil, nil, func() {}, func(string, []string) {}, logr.Discard())
	base := Wish{Members: []string{"a", "b", "c"}, Mode: quorum.ModeQuorum}
	with := func(mutate func(*Wish)) Wish {
		w := base
		mutate(&w)
		return w
	}
	steps := []struct {
		name string
		wish Wish
		now  bool
	}{
		{"the first wish", base, true},
		{"the same again", base, false},
		{"c starts asking", with(func(w *Wish) { w.Askers = []string{"c"} }), true},
		{"c still asks", with(func(w *Wish) { w.Askers = []string{"c"} }), false},
		{"b asks too", with(func(w *Wish) { w.Askers = []string{"b", "c"} }), true},
		{"c stops asking", with(func(w *Wish) { w.Askers = []string{"b"} }), false},
		{"nobody asks", base, false},
		{"the view changes", with(func(w *Wish) { w.Members = []string{"a", "b"} }), true},
		{"the mode changes", with(func(w *Wish) { w.Members = []string{"a", "b"}; w.Mode = quorum.ModeHold }), true},
	}
	for _, s := range steps {
		r.Want(s.wish)
		woken := false
		select {
		case <-r.wake:
			woken = true
		default:
		}
		if woken != s.now {
			t.Errorf("%s: written at once %v, want %v", s.name, woken, s.now)
		}
	}
}

// A version read from a list, not seen changing, counts as changed when this speaker
// last saw its record change, or after the latest write of this speaker's that its
// etcd revision follows; a watch event for it later says it changed then.
func TestRecordsChangedAtOfAVersionRead(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &Keeper{seen: map[string]seenVersion{}, left: map[string]time.Time{}, primed: true, now: func() time.Time { return now }}
	lease := func(rv string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "herald-speaker-x", UID: "u1", ResourceVersion: rv,
			Labels: map[string]string{Label: "true"}, Annotations: map[string]string{MembersAnnotation: "a,x"}}}
		l.Spec.HolderIdentity = ptr.To("x")
		l.Spec.LeaseDurationSeconds = ptr.To(int32(30))
		l.Spec.RenewTime = &metav1.MicroTime{Time: now}
		return l
	}
	changed := func(l *coordinationv1.Lease) time.Time { rec, _ := r.parse(l); return rec.ChangedAt }
	if at := changed(lease("10")); !at.IsZero() {
		t.Errorf("a version read, the record never seen before: changed at %v, want zero", at)
	}
	r.note(lease("11"), true)
	seenAt := now
	now = now.Add(time.Second)
	if at := changed(lease("12")); !at.Equal(seenAt) {
		t.Errorf("a version read after version 11 was seen changing at %v: changed at %v, want then", seenAt, at)
	}
	r.mu.Lock()
	r.noteOwnWrite("20", now)
	r.mu.Unlock()
	wrote := now
	now = now.Add(time.Second)
	if at := changed(lease("15")); !at.Equal(seenAt) {
		t.Errorf("a version older than this speaker's write: changed at %v, want %v", at, seenAt)
	}
	if at := changed(lease("21")); !at.Equal(wrote) {
		t.Errorf("a version newer than this speaker's write at %v: changed at %v, want then", wrote, at)
	}
	now = now.Add(time.Second)
	r.note(lease("21"), true)
	if at := changed(lease("21")); !at.Equal(now) {
		t.Errorf("a version read, then seen in a watch event at %v: changed at %v", now, at)
	}
}
