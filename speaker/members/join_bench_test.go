package members

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkJoinStateSends measures what a member joining a formed cluster costs in
// state messages: each iteration starts one more member, joins it through a random
// member, and waits until it holds every member's state and every member holds its
// own. It reports the state messages sent meanwhile by everyone, per member the
// newcomer found (`sends/member`: the TCP connections the join made, the newcomer at
// one end of each), and the time until the states were all exchanged.
//
//	HERALD_ML_NODES=30,100 go test -run '^$' -bench BenchmarkJoinStateSends -benchtime 5x ./speaker/members/
func BenchmarkJoinStateSends(b *testing.B) {
	eachSize(b, joinStateSends)
}

func joinStateSends(b *testing.B, n int, cfg Config) {
	ms := scaleCluster(b, n, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	var perMember []float64
	var exchanged []time.Duration
	for b.Loop() {
		b.StopTimer()
		idleSends(b, ms)
		before := totalSent(ms)
		c := cfg
		c.NodeName = fmt.Sprintf("new%04d", len(ms))
		c.ExpectedMembers = len(ms) + 1
		m, err := Start(c, logr.Discard(), prometheus.NewRegistry())
		if err != nil {
			b.Fatalf("starting %s: %v", c.NodeName, err)
		}
		b.Cleanup(func() { _ = m.Shutdown() })
		b.StartTimer()
		start := time.Now()
		if _, err := m.Join([]string{ms[rng.IntN(len(ms))].Addr()}); err != nil {
			b.Fatalf("%s joining: %v", c.NodeName, err)
		}
		for !statesExchanged(m, ms) {
			if time.Since(start) > time.Minute {
				b.Fatalf("%s: states not exchanged with %d members after a minute", c.NodeName, len(ms))
			}
			time.Sleep(2 * time.Millisecond)
		}
		exchanged = append(exchanged, time.Since(start))
		b.StopTimer()
		found := len(ms)
		ms = append(ms, m)
		idleSends(b, ms)
		perMember = append(perMember, (totalSent(ms)-before)/float64(found))
		b.StartTimer()
	}
	b.ReportMetric(testkit.Quantile(perMember, 0.5), "sends/member")
	b.ReportMetric(quantileMs(exchanged, 0.5), "ms-states-exchanged")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d members: state messages per member found %v; states exchanged after %v", n, perMember, exchanged)
}

// statesExchanged says whether m holds the state of every member of ms and each of
// them holds m's.
func statesExchanged(m *Members, ms []*Members) bool {
	if len(m.Snapshot().States) != len(ms) {
		return false
	}
	for _, p := range ms {
		p.mu.Lock()
		_, ok := p.states[m.name]
		p.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// idleSends waits until no member of ms has a state send due or on its way.
func idleSends(b *testing.B, ms []*Members) {
	b.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		busy := 0
		for _, m := range ms {
			m.outMu.Lock()
			busy += len(m.out)
			m.outMu.Unlock()
		}
		if busy == 0 {
			return
		}
		if time.Now().After(end) {
			b.Fatalf("state sends to %d peers still due after a minute", busy)
		}
	}
}

// totalSent is how many state messages the members of ms sent.
func totalSent(ms []*Members) float64 {
	var sum float64
	for _, m := range ms {
		sum += m.sent()
	}
	return sum
}
