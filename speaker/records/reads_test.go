package records

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"herald.dev/herald/speaker/quorum"
)

// A speaker back from silence reads every record afresh, at a real API server: from
// the records digest in use when it holds them as of a write of this speaker's begun
// after the silence began, else from the API server: when the silence began after
// every write the digest covers, and until the digest covers one made since.
func TestListAfreshThroughDigest(t *testing.T) {
	f := newRecordFixture(t)
	ctx := f.ctx
	all := []string{"a", "b", "c", "x"}
	for _, n := range all[1:] {
		f.write(t, n, all, quorum.ModeQuorum)
	}
	r, _ := f.reader(t, Config{DigestFrom: 3, SummaryFrom: 2})
	// write writes a's record and returns when it began.
	write := func(members []string) time.Time {
		t.Helper()
		if err := r.writeRecord(ctx, Wish{Members: members, Mode: quorum.ModeMinority}); err != nil {
			t.Fatal(err)
		}
		return r.lease.Spec.RenewTime.Time
	}
	// covered waits until the digest in use covers a's last write.
	covered := func(what string) {
		t.Helper()
		rev, err := strconv.ParseUint(r.lease.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, what, func() bool {
			r.view.setMode(quorum.ModeMinority, 4, 3)
			got, ok := r.view.digestRevision()
			return ok && got >= rev
		})
	}
	silent := time.Now()
	first := write([]string{"a"})
	f.digest(t, time.Now())
	covered("the digest in use, covering a's write")
	// o writes a record after the digest: a read through the digest lacks it, one
	// from the API server has it.
	f.write(t, "o", []string{"o"}, quorum.ModeRejoining)

	afresh := func(since time.Time) (nodes []string, readAt time.Time) {
		t.Helper()
		recs, err := r.ListAfresh(ctx, since, []string{"a"})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			nodes = append(nodes, rec.Node)
		}
		slices.Sort(nodes)
		_, _, readAt = r.Status()
		return nodes, readAt
	}
	reads := func(source string) float64 {
		t.Helper()
		n, err := counterValue(r.reads, source)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Silent since before a's write, which the digest covers: the digest serves, as of
	// that write.
	nodes, readAt := afresh(silent)
	if reads(readsDigest) != 1 || reads(readsAPI) != 0 {
		t.Errorf("silent before a write the digest covers: %v reads from the digest, %v from the API server; want 1 and 0", reads(readsDigest), reads(readsAPI))
	}
	if !slices.Equal(nodes, all) {
		t.Errorf("through the digest, the records of %v, want %v (o came after it)", nodes, all)
	}
	if !readAt.Truncate(time.Microsecond).Equal(first) { // the stored renewal keeps microseconds
		t.Errorf("through the digest, read afresh at %v, want when a's write began, %v", readAt, first)
	}

	// Silent since after that write: the digest may hold the records as they stood
	// before the silence.
	silent = time.Now()
	nodes, readAt = afresh(silent)
	if reads(readsAPI) != 1 || reads(readsDigest) != 1 {
		t.Errorf("silent since after every write the digest covers: %v reads from the API server and %v from the digest, want 1 and 1", reads(readsAPI), reads(readsDigest))
	}
	if !slices.Contains(nodes, "o") || readAt.Before(silent) {
		t.Errorf("from the API server: the records of %v read at %v, want o's too, read after %v", nodes, readAt, silent)
	}

	// a writes again, after the silence began; once the digest covers that write, it
	// serves again, as of it.
	second := write([]string{"a", "b"})
	if afresh(silent); reads(readsAPI) != 2 {
		t.Errorf("the digest not covering a's write begun since the silence: %v reads from the API server, want 2", reads(readsAPI))
	}
	f.digest(t, time.Now())
	covered("the digest covering a's second write")
	nodes, readAt = afresh(silent)
	if reads(readsDigest) != 2 || reads(readsAPI) != 2 {
		t.Errorf("the digest covering a write begun since the silence: %v reads from it and %v from the API server, want 2 and 2", reads(readsDigest), reads(readsAPI))
	}
	// (The read from the API server just before it was later still, and stands.)
	if !slices.Contains(nodes, "o") || readAt.Truncate(time.Microsecond).Before(second) {
		t.Errorf("through the digest: the records of %v read at %v, want o's (in it now), read when a's second write began (%v) or later", nodes, readAt, second)
	}
}
