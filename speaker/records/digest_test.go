package records

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// What a speaker out of Quorum reads through the records digest, at a real API
// server: the digest alone while it is usable and lists enough records (no watch of
// every record), each change of a record it carries seen as a change then, a version
// older than one seen not taken for a change, and every record straight from the API
// server again once the digest is stale or gone.
func TestRecordsThroughDigest(t *testing.T) {
	f := newRecordFixture(t)
	ctx := f.ctx
	write := func(node string, members []string, mode quorum.Mode) { t.Helper(); f.write(t, node, members, mode) }
	digest := func(at time.Time, given ...*coordinationv1.Lease) []*coordinationv1.Lease {
		t.Helper()
		return f.digest(t, at, given...)
	}
	all := []string{"a", "b", "c", "x"}
	for _, n := range all[1:] {
		write(n, all, quorum.ModeQuorum)
	}
	stored := digest(time.Now())

	r, _ := f.reader(t, Config{DigestFrom: 3, SummaryFrom: 2})
	byNode := func() map[string]quorum.Record {
		t.Helper()
		recs, err := r.list(ctx, false, []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]quorum.Record{}
		for _, rec := range recs {
			out[rec.Node] = rec
		}
		return out
	}
	usesDigest := func() bool {
		r.view.setMode(quorum.ModeHold, 4, 0)
		r.view.mu.Lock()
		defer r.view.mu.Unlock()
		return r.view.digest.used() && r.view.wide == nil
	}

	// Starting, out of Quorum: the digest lists 3 records, enough; it alone is read.
	eventually(t, "the digest in use, no watch of every record", usesDigest)
	if ok, _ := r.view.complete(); !ok {
		t.Fatal("the digest in use, but the records do not count as complete")
	}
	if every, digest, _, _ := r.view.counts(); every != 0 || digest != 1 {
		t.Errorf("the digest in use: %d watches of every record and %d of the digest counted, want 0 and 1", every, digest)
	}
	got := byNode()
	for _, n := range all[1:] {
		if !slices.Equal(got[n].Members, all) || got[n].Mode != quorum.ModeQuorum {
			t.Errorf("through the digest, %s's record reads %+v, want as stored", n, got[n])
		}
	}
	r.prime()

	// x holds: the record changes, the digest follows, and a sees the change then.
	before := time.Now()
	write("x", []string{"b", "c", "x"}, quorum.ModeHold)
	digest(time.Now())
	eventually(t, "x's Hold record through the digest", func() bool {
		rec := byNode()["x"]
		return rec.Mode == quorum.ModeHold && rec.ChangedAt.After(before)
	})
	changed := byNode()["x"].ChangedAt

	// A digest of the records as they were (a lagging writer) brings x's older version
	// back: no change, and the newer version is what a reads.
	digest(time.Now(), stored...)
	time.Sleep(300 * time.Millisecond)
	if rec := byNode()["x"]; !rec.ChangedAt.Equal(changed) {
		t.Errorf("an older version of x's record counted as a change at %v (seen changing at %v)", rec.ChangedAt, changed)
	}
	digest(time.Now())

	// The digest goes stale (its writer stopped): every record is watched again, read
	// straight from the API server until that watch has synced.
	digest(time.Now().Add(-recordformat.DigestDuration))
	eventually(t, "the wide watch back once the digest is stale", func() bool {
		r.view.setMode(quorum.ModeHold, 4, 0)
		ok, _ := r.view.complete()
		return ok && !r.view.digest.used()
	})
	if rec := byNode()["x"]; rec.Mode != quorum.ModeHold {
		t.Errorf("with the digest stale, x's record reads %+v, want its Hold record", rec)
	}

	// A usable digest listing fewer records than --records-digest-from is not used.
	digest(time.Now(), stored[:2]...)
	time.Sleep(300 * time.Millisecond)
	if usesDigest() {
		t.Error("a digest of 2 records is in use, want 3 at least")
	}
	// A usable one listing enough is, again.
	digest(time.Now())
	eventually(t, "the digest in use again", usesDigest)
	if rec := byNode()["x"]; rec.Mode != quorum.ModeHold || !rec.ChangedAt.Equal(changed) {
		t.Errorf("back on the digest, x's record reads %+v, want its Hold record seen changing at %v", rec, changed)
	}

	// In Quorum, not hearing 2 peers (--heartbeat-summary-from here): a split forming.
	// It keeps reading the digest, and watches nothing else (no watch by name of the
	// peers it lost, no narrow watch), even after the linger.
	r.view.wideLinger = 0
	for range 3 {
		r.view.setMode(quorum.ModeQuorum, 4, 2)
		time.Sleep(100 * time.Millisecond)
	}
	if every, digest, narrow, byName := r.view.counts(); every != 0 || digest != 1 || narrow != 0 || byName != 0 {
		t.Errorf("in Quorum without 2 peers: %d watches of every record, %d of the digest, %d narrow, %d by name; want the digest alone", every, digest, narrow, byName)
	}
	if got := r.view.track([]string{"b", "x"}); len(got) != 0 || len(r.view.byName.watched()) != 0 {
		t.Errorf("in Quorum on the digest, the records of b and x are watched by name: %v", r.view.byName.watched())
	}
	// x is back in Quorum listing a, and a hears all but one: few records concern
	// it, and it watches those, the digest no more.
	write("x", all, quorum.ModeQuorum)
	digest(time.Now())
	eventually(t, "the narrow watches in Quorum without 1 peer", func() bool {
		r.view.setMode(quorum.ModeQuorum, 4, 1)
		every, digest, narrow, _ := r.view.counts()
		return every == 0 && digest == 0 && narrow == 1
	})
	if _, wanted := r.view.complete(); wanted {
		t.Error("in Quorum hearing all but one, every record still wanted")
	}
	// Hearing everyone, but x holds and leaves a out: its record is in both narrow
	// watches, two records of concern, and a reads the digest again (the first
	// speakers in trouble write while the others still hear a majority).
	write("x", []string{"b", "c", "x"}, quorum.ModeHold)
	digest(time.Now())
	eventually(t, "the digest in Quorum with two records of concern", func() bool {
		r.view.setMode(quorum.ModeQuorum, 4, 0)
		every, digest, narrow, _ := r.view.counts()
		return every == 0 && digest == 1 && narrow == 0
	})
}
