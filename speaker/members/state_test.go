package members

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"herald.dev/herald/internal/testkit"
)

func statesString(s map[string][]byte) string {
	out := map[string]string{}
	for n, b := range s {
		out[n] = string(b)
	}
	return fmt.Sprint(out)
}

func TestStatesReachEveryPeerAndAComeback(t *testing.T) {
	ms := cluster(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	a.Publish([]byte("a1"))
	b.Publish([]byte("b1"))
	want := map[string]map[string]string{
		a.name: {b.name: "b1", c.name: ""},
		b.name: {a.name: "a1", c.name: ""},
		c.name: {a.name: "a1", b.name: "b1"},
	}
	for _, m := range ms {
		testkit.Eventually(t, 5*time.Second, convergeTick, "every member has the states", testkit.Holds(func() bool {
			got := m.Snapshot().States
			w := want[m.name]
			if len(got) != len(w) {
				return false
			}
			for n, v := range w {
				if g, ok := got[n]; !ok || string(g) != v {
					return false
				}
			}
			return true
		}, func() string {
			return fmt.Sprintf("%s has states %s, want %v", m.name, statesString(m.Snapshot().States), want[m.name])
		}))
	}

	// A newer state replaces the older one; an older version is ignored.
	a.Publish([]byte("a2"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "c has a's second state", testkit.Holds(func() bool { return string(c.Snapshot().States[a.name]) == "a2" },
		func() string { return "c did not get a's second state: " + statesString(c.Snapshot().States) }))
	a.mu.Lock()
	old := a.own
	a.own.version--
	a.own.data = []byte("stale")
	stale := a.stateMessage(false)
	a.own = old
	a.mu.Unlock()
	(*messageDelegate)(c.Members).NotifyMsg(stale)
	if got := string(c.Snapshot().States[a.name]); got != "a2" {
		t.Errorf("an older version replaced a's state: %q", got)
	}

	// c dies and a new c comes back at the same name: its old state is gone, and it
	// learns its peers' states from the join alone.
	c.Publish([]byte("c-old"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a has c's state", testkit.Holds(func() bool { return string(a.Snapshot().States[c.name]) == "c-old" },
		func() string { return "a did not get c's state: " + statesString(a.Snapshot().States) }))
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, convergeTick, "a drops dead c's state", testkit.Holds(func() bool { _, ok := a.Snapshot().States[c.name]; return !ok },
		func() string { return "a kept the state of dead c: " + statesString(a.Snapshot().States) }))
	// Same name, same address: a node whose speaker restarted.
	_, port, _ := strings.Cut(c.Addr(), ":")
	cfg := testConfig(c.name, testKey)
	cfg.BindPort, _ = strconv.Atoi(port)
	m2, err := Start(cfg, logr.Discard(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Shutdown() })
	c2 := member{m2, c.name, nil}
	if _, err := c2.Join([]string{a.Addr(), b.Addr()}); err != nil {
		t.Fatal(err)
	}
	wantC2 := map[string][]byte{a.name: []byte("a2"), b.name: []byte("b1")}
	testkit.Eventually(t, 5*time.Second, convergeTick, "the returning c has the states", testkit.Holds(func() bool {
		return maps.EqualFunc(c2.Snapshot().States, wantC2, func(x, y []byte) bool { return string(x) == string(y) })
	}, func() string { return "the returning c has states " + statesString(c2.Snapshot().States) }))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a has an empty state for the returning c", testkit.Holds(func() bool { s, ok := a.Snapshot().States[c.name]; return ok && len(s) == 0 },
		func() string { return "a has for the returning c: " + statesString(a.Snapshot().States) }))

	// Garbage is ignored.
	for _, msg := range []string{statePrefix, statePrefix + "x", statePrefix + "x\nnotanumber\n", statePrefix + "\n1\n"} {
		(*messageDelegate)(a.Members).NotifyMsg([]byte(msg))
	}
	if _, ok := a.Snapshot().States["x"]; ok {
		t.Error("a malformed state was stored")
	}
}

func TestRestartingMemberIsHeld(t *testing.T) {
	ms := cluster(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	b.Publish([]byte("b-claims"))
	c.Publish([]byte("c-claims"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a has b's and c's states", testkit.Holds(func() bool {
		s := a.Snapshot().States
		return string(s[b.name]) == "b-claims" && string(s[c.name]) == "c-claims"
	}, func() string { return "a did not get the states: " + statesString(a.Snapshot().States) }))

	// b restarts: a holds its state; c stops for good: a holds nothing of it.
	before := time.Now()
	if err := b.Leave(time.Second, true); err != nil {
		t.Fatal(err)
	}
	_ = b.Shutdown()
	if err := c.Leave(time.Second, false); err != nil {
		t.Fatal(err)
	}
	_ = c.Shutdown()
	testkit.Eventually(t, 5*time.Second, convergeTick, "a sees only itself", testkit.Holds(func() bool { return len(a.Live()) == 1 },
		func() string { return fmt.Sprintf("a still sees %v", a.Live()) }))
	held := a.Snapshot().Kept
	if h, ok := held[b.name]; !ok || string(h.Data) != "b-claims" || h.Since.Before(before) {
		t.Errorf("a holds %v for b, want its state since it left", held)
	}
	if _, ok := held[c.name]; ok || len(held) != 1 {
		t.Errorf("a holds %v; c stopped without saying it restarts", held)
	}
	if !a.LeftGracefully(b.name) {
		t.Error("a restarting member did not leave gracefully")
	}
	a.Release(b.name)
	if held := a.Snapshot().Kept; len(held) != 0 {
		t.Errorf("after Release: %v", held)
	}
}

func TestRestartedMemberMovesFromHeldToLive(t *testing.T) {
	ms := cluster(t, 2)
	a, b := ms[0], ms[1]
	if err := b.Leave(time.Second, true); err != nil {
		t.Fatal(err)
	}
	_ = b.Shutdown()
	testkit.Eventually(t, 5*time.Second, convergeTick, "a holds b", testkit.Holds(func() bool { held := a.Snapshot().Kept; _, ok := held[b.name]; return ok },
		func() string { held := a.Snapshot().Kept; return fmt.Sprintf("a holds %v, want b", held) }))
	if live := a.Snapshot().Live; slices.Contains(live, b.name) {
		t.Errorf("a sees the restarting b live: %v", live)
	}

	// b's next process joins: a sees it live and holds it no longer.
	b2 := start(t, b.name, testKey)
	if _, err := b2.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, convergeTick, "a sees b back", testkit.Holds(func() bool { live := a.Snapshot().Live; return slices.Contains(live, b.name) },
		func() string { return fmt.Sprintf("a sees %v, want b back", a.Live()) }))
	if held := a.Snapshot().Kept; len(held) != 0 {
		t.Errorf("a still holds %v for a member that is back", held)
	}
}

func TestLostMemberKeepsItsLastState(t *testing.T) {
	ms := cluster(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	b.Publish([]byte("b-claims"))
	c.Publish([]byte("c-claims"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a has b's and c's states", testkit.Holds(func() bool {
		s := a.Snapshot().States
		return string(s[b.name]) == "b-claims" && string(s[c.name]) == "c-claims"
	}, func() string { return "a did not get the states: " + statesString(a.Snapshot().States) }))

	// b vanishes without a goodbye, c leaves: a keeps b's last state apart, not c's.
	_ = b.Shutdown()
	if err := c.Leave(time.Second, false); err != nil {
		t.Fatal(err)
	}
	_ = c.Shutdown()
	testkit.Eventually(t, 10*time.Second, convergeTick, "a sees only itself", testkit.Holds(func() bool { return len(a.Live()) == 1 },
		func() string { return fmt.Sprintf("a still sees %v", a.Live()) }))
	if lost := a.Snapshot().Lost; len(lost) != 1 || string(lost[b.name]) != "b-claims" {
		t.Errorf("a's lost states: %q, want b's last state only", lost)
	}
	if _, ok := a.Snapshot().States[b.name]; ok {
		t.Error("a lists the lost b among the live members' states")
	}
}

// A restarting member's word travels over TCP and memberlist's leave over UDP: a peer
// may hear the leave first. The word, arriving just after, still makes the departure
// a goodbye (its state held, not lost); long after, it changes nothing.
func TestGoodbyeHeardAfterTheLeave(t *testing.T) {
	ms := cluster(t, 2)
	a, b := ms[0], ms[1]
	b.Publish([]byte("b-claims"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a has b's state", testkit.Holds(func() bool { return string(a.Snapshot().States[b.name]) == "b-claims" },
		func() string { return "a did not get b's state: " + statesString(a.Snapshot().States) }))

	// memberlist reports b gone (the leave first), then b's word arrives.
	(*eventDelegate)(a.Members).set(b.name, false)
	if lost := a.Snapshot().Lost; string(lost[b.name]) != "b-claims" {
		t.Fatalf("a's lost states %q before the word, want b's", lost)
	}
	(*messageDelegate)(a.Members).NotifyMsg([]byte(restartingPrefix + b.name))
	s := a.Snapshot()
	if h, ok := s.Kept[b.name]; !ok || string(h.Data) != "b-claims" {
		t.Errorf("a holds %v after b's late word, want b's state", s.Kept)
	}
	if len(s.Lost) != 0 || !a.LeftGracefully(b.name) {
		t.Errorf("after b's late word: lost %q, left gracefully %v; want nothing lost, a goodbye", s.Lost, a.LeftGracefully(b.name))
	}

	// The same word long after the loss: b stays lost.
	a.Release(b.name)
	(*eventDelegate)(a.Members).set(b.name, true)
	(*eventDelegate)(a.Members).set(b.name, false)
	a.mu.Lock()
	a.lostAt[b.name] = time.Now().Add(-2 * lateGoodbye)
	a.mu.Unlock()
	(*messageDelegate)(a.Members).NotifyMsg([]byte(restartingPrefix + b.name))
	if s := a.Snapshot(); len(s.Kept) != 0 || a.LeftGracefully(b.name) {
		t.Errorf("a word %v after the loss made it a goodbye: held %v", 2*lateGoodbye, s.Kept)
	}
}
