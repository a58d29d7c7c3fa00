package members

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"herald.dev/herald/internal/testkit"
)

// TestSendsToAPeerCoalesce: while a send to a peer is on its way, the states published
// meanwhile become one more send, which carries the newest.
func TestSendsToAPeerCoalesce(t *testing.T) {
	gate := newGatedTransport(t)
	cfg := testConfig("a", testKey)
	cfg.Transport = gate
	reg := prometheus.NewRegistry()
	m, err := Start(cfg, logr.Discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	a := member{m, "a", reg}
	b := start(t, "b", testKey)
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, convergeTick, "a and b see each other", testkit.Holds(func() bool { return a.liveCount() == 2 && b.liveCount() == 2 },
		func() string { return fmt.Sprintf("a sees %v, b sees %v", a.Live(), b.Live()) }))
	a.Publish([]byte("v0"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "b has a's v0", testkit.Holds(func() bool { return string(b.Snapshot().States["a"]) == "v0" },
		func() string { return "b has a's states " + statesString(b.Snapshot().States) }))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a's sends to b end", testkit.Holds(func() bool { return !a.sending("b") },
		func() string { return "a's sends to b do not end" }))
	before := a.sent()

	gate.hold()
	a.Publish([]byte("v1"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "one send waits at the gate", testkit.Holds(func() bool { return gate.waiting() == 1 },
		func() string { return fmt.Sprintf("%d sends wait at the gate, want 1", gate.waiting()) }))
	// The first send waits at the gate; the nine after it are due as one.
	for i := 2; i <= 10; i++ {
		a.Publish(fmt.Appendf(nil, "v%d", i))
	}
	if w := gate.waiting(); w != 1 {
		t.Errorf("%d sends wait at the gate, want 1", w)
	}
	gate.release()
	testkit.Eventually(t, 5*time.Second, convergeTick, "b has a's v10", testkit.Holds(func() bool { return string(b.Snapshot().States["a"]) == "v10" },
		func() string { return "b has a's states " + statesString(b.Snapshot().States) }))
	testkit.Eventually(t, 5*time.Second, convergeTick, "a's sends to b end", testkit.Holds(func() bool { return !a.sending("b") },
		func() string { return "a's sends to b do not end" }))
	if got := a.sent() - before; got != 2 {
		t.Errorf("ten states published while a send was on its way took %v sends, want 2", got)
	}
}

// TestStateForAsksOnlyWhatItLacks: a message asks for the peer's state only when this
// member does not hold it, and a peer no longer live gets none.
func TestStateForAsksOnlyWhatItLacks(t *testing.T) {
	m := &Members{
		name:   "a",
		own:    peerState{version: 7, data: []byte("mine")},
		live:   map[string]bool{"a": true, "b": true, "c": true},
		states: map[string]peerState{"b": {version: 3, data: []byte("b's")}},
	}
	for _, tc := range []struct {
		peer      string
		ask       bool
		wantLive  bool
		wantAsked bool
	}{
		{peer: "b", ask: true, wantLive: true, wantAsked: false}, // held: nothing to ask
		{peer: "c", ask: true, wantLive: true, wantAsked: true},
		{peer: "c", ask: false, wantLive: true, wantAsked: false},
		{peer: "d", ask: true, wantLive: false},
	} {
		msg, live := m.stateFor(tc.peer, tc.ask)
		if live != tc.wantLive {
			t.Errorf("stateFor(%s, %v): live %v, want %v", tc.peer, tc.ask, live, tc.wantLive)
			continue
		}
		if !live {
			continue
		}
		body, ok := strings.CutPrefix(string(msg), statePrefix)
		if !ok || !strings.HasSuffix(body, "a\n7\nmine") {
			t.Errorf("stateFor(%s, %v) = %q, want a's state, version 7", tc.peer, tc.ask, msg)
		}
		if asked := strings.HasPrefix(body, stateAsk); asked != tc.wantAsked {
			t.Errorf("stateFor(%s, %v) asks: %v, want %v", tc.peer, tc.ask, asked, tc.wantAsked)
		}
	}
}

// sent is how many states m sent.
func (m *Members) sent() float64 {
	var d dto.Metric
	if err := m.sends.WithLabelValues(sendSent).Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// sending says whether a goroutine still owns the sends to peer.
func (m *Members) sending(peer string) bool {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	_, ok := m.out[peer]
	return ok
}

// gatedTransport is memberlist's own transport whose connections, while the gate is
// held, wait for its release before they are made.
type gatedTransport struct {
	*memberlist.NetTransport
	mu      sync.Mutex
	open    chan struct{} // closed while the gate is open
	blocked int
}

func newGatedTransport(t *testing.T) *gatedTransport {
	t.Helper()
	nt, err := loopbackTransport()
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedTransport{NetTransport: nt, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedTransport) hold() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedTransport) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g *gatedTransport) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}

func (g *gatedTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return g.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (g *gatedTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	g.mu.Lock()
	open := g.open
	g.blocked++
	g.mu.Unlock()
	<-open
	g.mu.Lock()
	g.blocked--
	g.mu.Unlock()
	return g.NetTransport.DialAddressTimeout(a, timeout)
}

var _ memberlist.NodeAwareTransport = (*gatedTransport)(nil)

// TestNoStateExchangeSendsNothingAtJoin checks the benchmarks' switch: members that
// see each other join exchange no state (so what BenchmarkFailureDetectionAtScale
// measures with it is memberlist's own work), while by default each sends its own.
func TestNoStateExchangeSendsNothingAtJoin(t *testing.T) {
	for _, off := range []bool{false, true} {
		var ms [2]*Members
		for i := range ms {
			cfg := testConfig(fmt.Sprintf("n%d", i), testKey)
			cfg.noStateExchange = off
			m, err := Start(cfg, logr.Discard(), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Shutdown() })
			ms[i] = m
		}
		if _, err := ms[1].Join([]string{ms[0].Addr()}); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			testkit.Eventually(t, 5*time.Second, convergeTick, "both members live", testkit.Holds(func() bool { return len(m.Live()) == 2 }, func() string { return fmt.Sprintf("hears %v", m.Live()) }))
		}
		if !off {
			testkit.Eventually(t, 5*time.Second, convergeTick, "states sent at the join", testkit.Holds(func() bool { return ms[0].sent() >= 1 && ms[1].sent() >= 1 },
				func() string {
					return fmt.Sprintf("states sent at the join: %v and %v, want at least one each", ms[0].sent(), ms[1].sent())
				}))
			continue
		}
		time.Sleep(200 * time.Millisecond) // a send would have gone by now
		for i, m := range ms {
			if got := m.sent(); got != 0 {
				t.Errorf("with noStateExchange member %d sent %v states at the join, want none", i, got)
			}
		}
	}
}
