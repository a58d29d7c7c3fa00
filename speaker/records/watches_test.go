package records

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/speaker/quorum"
)

// What a speaker reads of the records, at a real API server: in Quorum, the records
// that leave it out, those in trouble and by name those of peers it does not hear,
// and nothing of a death's rewrites; out of Quorum, every record.
func TestRecordView(t *testing.T) {
	f := newRecordFixture(t)
	ctx, cfg, env, ns := f.ctx, f.cfg, f.env, f.ns
	write := func(node string, members []string, mode quorum.Mode) { t.Helper(); f.write(t, node, members, mode) }
	all := []string{"a", "b", "c", "x"}
	for _, n := range all[1:] {
		write(n, all, quorum.ModeQuorum)
	}

	// The reader, a, as Run sets it up.
	r, events := f.reader(t, cfg)
	r.view.wideLinger = 0
	byNode := func(heard []string) map[string]quorum.Record {
		t.Helper()
		recs, err := r.list(ctx, false, heard)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]quorum.Record{}
		for _, rec := range recs {
			if _, dup := out[rec.Node]; dup {
				t.Errorf("%s's record listed twice", rec.Node)
			}
			out[rec.Node] = rec
		}
		return out
	}

	// Starting (out of Quorum): every record, as stored.
	eventually(t, "the watch of every record synced", func() bool { ok, _ := r.view.complete(); return ok })
	got := byNode(all)
	for _, n := range all[1:] {
		if !slices.Equal(got[n].Members, all) {
			t.Errorf("starting: %s's record lists %v, want %v", n, got[n].Members, all)
		}
	}
	r.prime()

	// Out of Quorum, once the wide watch has synced, it alone runs: a record that
	// leaves a out and is in trouble reaches a once (three times while the narrow
	// watches ran beside it).
	r.view.setMode(quorum.ModeHold, 4, 0)
	if every, _, narrow, _ := r.view.counts(); every != 1 || narrow != 0 {
		t.Fatalf("out of Quorum: %d wide and %d narrow watches, want 1 and 0", every, narrow)
	}
	events.Store(0)
	write("x", []string{"b", "c", "x"}, quorum.ModeHold)
	eventually(t, "x's Hold record", func() bool { return byNode(all)["x"].Mode == quorum.ModeHold })
	time.Sleep(500 * time.Millisecond)
	if n := events.Load(); n != 1 {
		t.Errorf("out of Quorum, one write reached a %d times, want once", n)
	}
	write("x", all, quorum.ModeQuorum)
	eventually(t, "x's record back", func() bool { return byNode(all)["x"].Mode == quorum.ModeQuorum })

	// In Quorum, hearing everyone: after the linger the narrow watches start, the
	// wide one stops once they have synced, and no record is watched; each stands in
	// as listing a, in Quorum.
	r.view.setMode(quorum.ModeQuorum, 4, 0)
	eventually(t, "the wide watch stopped in Quorum after the linger", func() bool {
		r.view.setMode(quorum.ModeQuorum, 4, 0)
		_, wanted := r.view.complete()
		return !wanted
	})
	if every, _, narrow, _ := r.view.counts(); every != 0 || narrow != 1 {
		t.Fatalf("in Quorum: %d wide and %d narrow watches, want 0 and 1", every, narrow)
	}
	got = byNode(all)
	for _, n := range all[1:] {
		if rec := got[n]; !slices.Contains(rec.Members, "a") || rec.Mode != quorum.ModeQuorum || rec.Duration != cfg.Duration {
			t.Errorf("in Quorum: %s's record stands in as %+v, want listing a, Quorum", n, rec)
		}
	}

	// x dies: b and c rewrite their records without it. Nothing reaches a.
	events.Store(0)
	write("b", []string{"a", "b", "c"}, quorum.ModeQuorum)
	write("c", []string{"a", "b", "c"}, quorum.ModeQuorum)
	time.Sleep(time.Second)
	if n := events.Load(); n != 0 {
		t.Errorf("%d record events reached a after a death it survived, want none", n)
	}

	// x rewrites its record while a hears it (it still lists a): a sees nothing. Then
	// a stops hearing x: x's record, read straight until its watch by name syncs, is
	// not taken for a change seen at the read (it would count x alive, and keep its
	// IPs with it, dead or not), then comes from that watch, which shows its renewals.
	write("x", all, quorum.ModeQuorum)
	lost := time.Now()
	heard := []string{"a", "b", "c"}
	got = byNode(heard)
	if !slices.Equal(got["x"].Members, all) {
		t.Errorf("x unheard: its record lists %v, want %v as stored", got["x"].Members, all)
	}
	if !got["x"].ChangedAt.Before(lost) {
		t.Errorf("x's record, written while a heard x and read once a lost it, counts as changed at %v, after the loss at %v", got["x"].ChangedAt, lost)
	}
	eventually(t, "x's record watched by name", func() bool { return len(r.view.track([]string{"x"})) == 0 })
	if w := r.view.byName.watched(); !slices.Equal(w, []string{"x"}) {
		t.Errorf("watched by name: %v, want [x]", w)
	}
	before := time.Now()
	write("x", all, quorum.ModeQuorum) // a renewal in answer to a peer asking
	eventually(t, "x's renewal seen", func() bool { return byNode(heard)["x"].ChangedAt.After(before) })

	// b stops hearing a: its record enters a's watch, as written.
	write("b", []string{"b", "c"}, quorum.ModeQuorum)
	eventually(t, "b's record without a", func() bool { return slices.Equal(byNode(heard)["b"].Members, []string{"b", "c"}) })
	// It hears a again: its record leaves the watch, and stands in as changed then.
	before = time.Now()
	write("b", []string{"a", "b", "c"}, quorum.ModeQuorum)
	eventually(t, "b's record listing a again", func() bool {
		rec := byNode(heard)["b"]
		return slices.Contains(rec.Members, "a") && rec.ChangedAt.After(before)
	})

	// c holds, a peer a hears and which lists it: watched as in trouble.
	write("c", []string{"a", "c"}, quorum.ModeHold)
	eventually(t, "c's Hold record", func() bool { return byNode(heard)["c"].Mode == quorum.ModeHold })

	// A record of an older version, labelled with the members it hears and its mode
	// under the older key, is watched as it is (as in trouble), though it lists a and
	// says Quorum: a newer speaker cannot tell from its labels whom it leaves out.
	oldLabels := map[string]string{Label: "true", olderModeLabel: "Quorum", hearsLabelPrefix + "a": "", hearsLabelPrefix + "o": ""}
	old := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name("o"), Labels: oldLabels,
		Annotations: map[string]string{MembersAnnotation: "a,o", ModeAnnotation: "Quorum"}}}
	old.Spec.HolderIdentity, old.Spec.LeaseDurationSeconds = ptr.To("o"), ptr.To(int32(30))
	old.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the older version's record", func() bool { return slices.Equal(byNode(append(heard, "o"))["o"].Members, []string{"a", "o"}) })

	// Out of Quorum: every record again, read straight until the watch syncs.
	r.view.setMode(quorum.ModeHold, 4, 0)
	got = byNode(heard)
	if !slices.Equal(got["c"].Members, []string{"a", "c"}) || !slices.Equal(got["b"].Members, []string{"a", "b", "c"}) {
		t.Errorf("out of Quorum: b lists %v, c %v; want the stored records", got["b"].Members, got["c"].Members)
	}
	eventually(t, "the watch of every record synced again", func() bool { ok, _ := r.view.complete(); return ok })
	if n := len(byNode(heard)); n != 4 {
		t.Errorf("out of Quorum: %d records, want b, c, x and o", n)
	}
	if w := r.view.byName.watched(); !slices.Equal(w, []string{"x"}) {
		t.Errorf("watched by name before the wide watch took over: %v, want [x]", w)
	}
	r.view.setMode(quorum.ModeHold, 4, 0)
	if every, _, narrow, byName := r.view.counts(); every != 1 || narrow != 0 || byName != 0 {
		t.Errorf("out of Quorum again: %d wide, %d narrow and %d by-name watches, want 1, 0 and 0", every, narrow, byName)
	}
	if n := len(byNode(heard)); n != 4 {
		t.Errorf("out of Quorum, the wide watch alone: %d records, want b, c, x and o", n)
	}
}
