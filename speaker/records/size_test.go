package records

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/quorum"
)

// A record and a heartbeat, as stored by a real API server, carry no managedFields once
// rewritten (a create keeps them: the API server strips them on an update only): at a
// thousand members they would repeat every label and annotation key. The test logs
// what a record of a thousand members weighs, in steady state and split in two.
func TestRecordsStoredWithoutManagedFields(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	members := make([]string, 1000)
	for i := range members {
		members[i] = fmt.Sprintf("node-%04d", i)
	}
	r := newKeeper(members[0], ns, DefaultConfig(), env.Client, env.Client, env.Client, func() {}, func(string, []string) {}, logr.Discard())
	stored := func(name string) *coordinationv1.Lease {
		t.Helper()
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &l); err != nil {
			t.Fatal(err)
		}
		return &l
	}
	for i, w := range []Wish{
		{Members: members, Mode: quorum.ModeQuorum},                            // created
		{Members: members[:600], Misses: members[600:], Mode: quorum.ModeHold}, // updated: a split
		{Members: members, Mode: quorum.ModeQuorum},                            // updated again
	} {
		if err := r.writeRecord(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := r.writeHeartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{Name(r.self), HeartbeatName(r.self)} {
			l := stored(name)
			if n := len(l.ManagedFields); n != 0 && i > 0 {
				t.Errorf("write %d: %s stored with %d managedFields entries, want none", i+1, name, n)
			}
			if name == Name(r.self) {
				if got := l.Labels[ModeLabel]; got != string(w.Mode) {
					t.Errorf("write %d: the record's mode label %q, want %q", i+1, got, w.Mode)
				}
				if got, want := len(l.Labels), len(w.Misses)+2; got != want {
					t.Errorf("write %d: the record has %d labels, want %d (one per speaker missed, its mode, the record's)", i+1, got, want)
				}
				raw, _ := json.Marshal(l)
				t.Logf("write %d: a record of %d members, missing %d, is %d bytes as JSON (%d managedFields entries)", i+1, len(w.Members), len(w.Misses), len(raw), len(l.ManagedFields))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
