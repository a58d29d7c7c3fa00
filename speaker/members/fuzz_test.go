package members

import (
	"bytes"
	"testing"

	"github.com/go-logr/logr"
)

// FuzzNotifyMsg feeds arbitrary gossip messages (states and goodbyes) to a member, as
// a peer holding the key could send them. Invariants: no panic; a state is kept
// only under a peer's name, never under the member's own or an empty one; a state
// replaces a peer's earlier one only with a higher version; a goodbye marks only the
// name it carries.
func FuzzNotifyMsg(f *testing.F) {
	for _, seed := range []string{
		statePrefix + "b\n7\n{\"10.0.0.1\":{\"t\":\"x\"}}",
		statePrefix + stateAsk + "b\n8\n{}",
		statePrefix + "a\n9\n{}", // in the receiver's own name
		statePrefix + "b\n18446744073709551615\n",
		statePrefix + "b\n18446744073709551616\n",
		statePrefix + "b\n-1\n",
		statePrefix + "\n1\n",
		statePrefix + "b\n",
		statePrefix,
		leavingPrefix + "b",
		restartingPrefix + "b",
		leavingPrefix,
		"",
		"\x00\xff",
	} {
		f.Add([]byte(seed), []byte(statePrefix+"b\n1\n{}"))
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		m := newMembers(Config{NodeName: "a"}, logr.Discard())
		d := (*messageDelegate)(m)
		d.NotifyMsg(first)
		before, had := m.states["b"]
		d.NotifyMsg(second)
		d.MergeRemoteState(second, false)
		for name := range m.states {
			if name == "" || name == "a" {
				t.Fatalf("a state is kept under the name %q", name)
			}
		}
		after := m.states["b"]
		if had && after.version < before.version {
			t.Fatalf("b's state went back from version %d to %d", before.version, after.version)
		}
		if had && after.version == before.version &&
			!bytes.Equal(after.data, before.data) {
			t.Fatalf("b's state changed without a higher version")
		}
		for name := range m.leaving {
			if name == "" {
				t.Fatal("a goodbye without a name was kept")
			}
		}
	})
}
