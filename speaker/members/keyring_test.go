package members

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald.dev/herald/internal/testkit"
)

func TestDiffKeys(t *testing.T) {
	a, b, c := []byte("a"), []byte("b"), []byte("c")
	str := func(ks [][]byte) string {
		var s []string
		for _, k := range ks {
			s = append(s, string(k))
		}
		return strings.Join(s, "")
	}
	for _, tc := range []struct {
		name             string
		have, want       [][]byte
		add, use, remove string
		empty            bool
	}{
		{"same", [][]byte{a, b}, [][]byte{a, b}, "", "", "", true},
		{"same keys, other secondary order", [][]byte{a, b, c}, [][]byte{a, c, b}, "", "", "", true},
		{"add a secondary", [][]byte{a}, [][]byte{a, b}, "b", "", "", false},
		{"switch the primary", [][]byte{a, b}, [][]byte{b, a}, "", "b", "", false},
		{"drop the old", [][]byte{b, a}, [][]byte{b}, "", "", "a", false},
		{"replace outright: add, use, then remove", [][]byte{a}, [][]byte{b}, "b", "b", "a", false},
		{"new primary and a new secondary", [][]byte{a}, [][]byte{c, b}, "cb", "c", "a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := diffKeys(tc.have, tc.want)
			if str(ch.add) != tc.add || string(ch.use) != tc.use || str(ch.remove) != tc.remove || ch.empty() != tc.empty {
				t.Errorf("diff = add %q use %q remove %q (empty %v), want add %q use %q remove %q",
					str(ch.add), ch.use, str(ch.remove), ch.empty(), tc.add, tc.use, tc.remove)
			}
		})
	}
}

func TestSetKeys(t *testing.T) {
	k1, k2 := testKey, mustKey("second-key-material-0123")
	m := start(t, "a", k1)
	if changed, err := m.SetKeys([][]byte{k1}); changed || err != nil {
		t.Fatalf("SetKeys(same) = %v, %v", changed, err)
	}
	if changed, err := m.SetKeys([][]byte{k2}); !changed || err != nil {
		t.Fatalf("SetKeys(replace) = %v, %v", changed, err)
	}
	if got := m.Keys(); len(got) != 1 || string(got[0]) != string(k2) {
		t.Fatalf("Keys = %x, want only the second", got)
	}
	if _, err := m.SetKeys(nil); err == nil {
		t.Fatal("SetKeys(nil): no error")
	}
	if _, err := m.SetKeys([][]byte{make([]byte, 20)}); err == nil {
		t.Fatal("SetKeys(bad length): no error")
	}
	if got := m.Keys(); len(got) != 1 || string(got[0]) != string(k2) {
		t.Fatalf("a refused change altered the keyring: %x", got)
	}
}

// splitWatch fails the test if any member ever sees fewer than all names live while
// it runs: memberlist declares a member it cannot read dead within a suspicion, and
// nothing here makes it join again.
type splitWatch struct {
	stop  chan struct{}
	done  sync.WaitGroup
	mu    sync.Mutex
	first string
}

func watchSplits(ms []member) *splitWatch {
	w := &splitWatch{stop: make(chan struct{})}
	var names []string
	for _, m := range ms {
		names = append(names, m.name)
	}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			for _, m := range ms {
				if got := m.Live(); !slices.Equal(got, names) {
					w.mu.Lock()
					if w.first == "" {
						w.first = fmt.Sprintf("%s saw %v, want %v", m.name, got, names)
					}
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

func (w *splitWatch) end() string {
	close(w.stop)
	w.done.Wait()
	return w.first
}

// gossip publishes a new state from a member in turn every 20 ms until stopped, and
// returns how many it published.
func gossip(ms []member) (stop func() int) {
	quit := make(chan struct{})
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ms[i%len(ms)].Publish(fmt.Appendf(nil, "state-%d", i))
			n.Add(1)
		}
	}()
	return func() int { close(quit); wg.Wait(); return int(n.Load()) }
}

// settle is longer than memberlist needs to declare a member it cannot read dead
// (a probe interval and the suspicion, with room).
const settle = 1500 * time.Millisecond

// TestKeyRotationKeepsTheCluster rotates the key of five real members on loopback
// while they gossip, in the safe order (add the new key everywhere, make it primary
// everywhere, then remove the old one), each step reaching some members a while
// before the others: no member is ever
// declared dead, and at the end only the new key opens the cluster.
func TestKeyRotationKeepsTheCluster(t *testing.T) {
	k1, k2 := testKey, mustKey("second-key-material-0123")
	ms := cluster(t, 5)
	w := watchSplits(ms)
	stopGossip := gossip(ms)
	for _, step := range []struct {
		name string
		keys [][]byte
	}{
		{"add", [][]byte{k1, k2}},
		{"use", [][]byte{k2, k1}},
		{"remove", [][]byte{k2}},
	} {
		// Two members first, the others a while later: the cluster runs mixed for
		// longer than a split takes to show.
		for _, part := range [][]member{ms[:2], ms[2:]} {
			for _, m := range part {
				if _, err := m.SetKeys(step.keys); err != nil {
					t.Fatalf("%s on %s: %v", step.name, m.name, err)
				}
			}
			time.Sleep(settle)
		}
		if split := w.first; split != "" {
			t.Fatalf("after %s: %s", step.name, split)
		}
	}
	published := stopGossip()
	if split := w.end(); split != "" {
		t.Fatalf("split during the rotation: %s", split)
	}
	t.Logf("%d states published during the rotation", published)

	// Gossip still flows: a state published now reaches everyone.
	ms[0].Publish([]byte("after"))
	for _, m := range ms[1:] {
		testkit.Eventually(t, 15*time.Second, convergeTick, "the state published after the rotation", testkit.Holds(func() bool { return string(m.Snapshot().States[ms[0].name]) == "after" },
			func() string { return m.name + " did not get the state published after the rotation" }))
	}
	// Only the new key opens the cluster now.
	old := start(t, "old", k1)
	_, _ = old.Join([]string{ms[0].Addr()})
	fresh := start(t, "fresh", k2)
	if _, err := fresh.Join([]string{ms[0].Addr()}); err != nil {
		t.Fatalf("a member with the new key cannot join: %v", err)
	}
	// Generous: under the race detector on a loaded machine gossip takes seconds.
	testkit.Eventually(t, 15*time.Second, convergeTick, "the member with the new key seen", testkit.Holds(func() bool { return slices.Contains(ms[4].Live(), "fresh") },
		func() string { return fmt.Sprintf("the member with the new key is not seen: %v", ms[4].Live()) }))
	if slices.Contains(ms[4].Live(), "old") || len(old.Live()) != 1 {
		t.Errorf("a member with the old key joined: %v, it sees %v", ms[4].Live(), old.Live())
	}
}

// TestKeySwapSplits is the check on the one above: replacing the key member by
// member, without the keyring, declares members dead, which the watch sees.
func TestKeySwapSplits(t *testing.T) {
	k2 := mustKey("second-key-material-0123")
	ms := cluster(t, 3)
	w := watchSplits(ms)
	stopGossip := gossip(ms)
	if _, err := ms[0].SetKeys([][]byte{k2}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
	stopGossip()
	if split := w.end(); split == "" {
		t.Fatal("a member with another key only was never declared dead: the split watch sees nothing")
	} else {
		t.Logf("as expected: %s", split)
	}
}
