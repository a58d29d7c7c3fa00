package records

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// A speaker started with claims to take back writes its first record as Restarting
// (Keeper.Restarting), one without as Rejoining; the mode reads back from the record
// and from the records digest, which speakers read instead in a large cluster.
func TestFirstRecordSaysRestarting(t *testing.T) {
	f := newRecordFixture(t)
	want := map[string]quorum.Mode{"o": quorum.ModeRestarting, "x": quorum.ModeRejoining}
	for node, mode := range want {
		k := newKeeper(node, f.ns, f.cfg, f.env.Client, f.env.Client, f.env.Client, func() {}, func(string, []string) {}, logr.Discard())
		if mode == quorum.ModeRestarting {
			k.Restarting()
		}
		if err := k.writeRecord(f.ctx, k.Wanted()); err != nil {
			t.Fatal(err)
		}
		var l coordinationv1.Lease
		if err := f.env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: Name(node)}, &l); err != nil {
			t.Fatal(err)
		}
		if r, ok := recordFromLease(&l, time.Now()); !ok || r.Mode != mode || !r.Mode.Silent() {
			t.Errorf("%s's first record reads as %+v (a record: %v), want mode %s, silent", node, r, ok, mode)
		}
	}
	data, _, err := recordformat.EncodeDigest(time.Now(), f.digest(t, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := recordformat.DecodeDigest(f.ns, data)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]quorum.Mode{}
	for _, l := range d.Records {
		if r, ok := recordFromLease(l, time.Now()); ok {
			got[r.Node] = r.Mode
		}
	}
	for node, mode := range want {
		if got[node] != mode {
			t.Errorf("the digest gives %s mode %q, want %s", node, got[node], mode)
		}
	}
}
