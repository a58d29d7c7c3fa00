package scale

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// BenchmarkHeartbeatsAtSplit measures what the speakers' liveness costs the API server
// during an even split of $HERALD_SPLIT_NODES speakers (100): every speaker renews its
// heartbeat every 10 s, and each tells the liveness of the other half, which it cannot
// hear, through the real records.Keeper against a real kube-apiserver and etcd. First
// with no controller (each watches the other half's heartbeats by name), then with the
// controller's HeartbeatSummarizer running (each reads the summary). It reports the
// Lease watch events the API server sent per second in each, read from its own
// /metrics over a window of $HERALD_SPLIT_WINDOW_S seconds (30). Only the heartbeats
// are simulated; memberlist, the records and the elections are left out. It asserts
// no time.
func BenchmarkHeartbeatsAtSplit(b *testing.B) {
	n := 100
	if v := envInts(b, "HERALD_SPLIT_NODES", nil); len(v) > 0 {
		n = v[0]
	}
	window := 30 * time.Second
	if v := envInts(b, "HERALD_SPLIT_WINDOW_S", nil); len(v) > 0 {
		window = time.Duration(v[0]) * time.Second
	}
	crlog.SetLogger(logr.Discard())
	env := testenv.Start(b)
	const ns = "herald-system"
	env.CreateNamespace(b, ns)
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%04d", i)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	renewHeartbeats(b, ctx, env.Client, ns, nodes)

	leaseEvents := func() float64 {
		m, err := testenv.APIServerMetrics(env.Config)
		if err != nil {
			b.Fatal(err)
		}
		return m.Sum("apiserver_watch_events_total", func(l map[string]string) bool {
			return l["resource"] == "leases" || l["kind"] == "Lease"
		})
	}
	measure := func(what string, ready func(records.Watching) bool) float64 {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		readers := startSplitReaders(b, rctx, env, ns, nodes)
		deadline := time.Now().Add(5 * time.Minute)
		for !readers.all(ready) {
			if time.Now().After(deadline) {
				b.Fatalf("%s: the readers were not ready after 5 minutes", what)
			}
			time.Sleep(500 * time.Millisecond)
		}
		e0, t0 := leaseEvents(), time.Now()
		time.Sleep(window)
		rate := (leaseEvents() - e0) / time.Since(t0).Seconds()
		b.Logf("%s: %.1f Lease watch events/s over %v, %d speakers split in two halves", what, rate, window, n)
		return rate
	}
	for b.Loop() {
		byName := measure("heartbeats watched by name", func(w records.Watching) bool { return w.Heartbeats == n/2 })

		startSummarizer(b, ctx, env, ns)
		summary := measure("the heartbeat summary", func(w records.Watching) bool { return w.SummaryUsed && w.Heartbeats == 0 })

		b.ReportMetric(byName, "events/s-by-name")
		b.ReportMetric(summary, "events/s-summary")
		// Each heartbeat renewal (N/10 a second) reaches the N/2 speakers of the other side.
		b.ReportMetric(float64(n*n)/20, "N²/20")
	}
}

// renewHeartbeats creates a heartbeat per node and renews each every 10 s, spread
// evenly over the period, until ctx ends.
func renewHeartbeats(b *testing.B, ctx context.Context, c client.Client, ns string, nodes []string) {
	b.Helper()
	leases := make([]*coordinationv1.Lease, len(nodes))
	for i, node := range nodes {
		leases[i] = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: records.HeartbeatName(node), Labels: map[string]string{records.HeartbeatLabel: "true"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(int32(30)),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
		if err := c.Create(ctx, leases[i]); err != nil {
			b.Fatal(err)
		}
	}
	go func() {
		tick := time.NewTicker(10 * time.Second / time.Duration(len(nodes)))
		defer tick.Stop()
		for i := 0; ; i = (i + 1) % len(leases) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			leases[i].Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if err := c.Update(ctx, leases[i]); err != nil && ctx.Err() == nil {
				b.Logf("renewing %s: %v", leases[i].Name, err)
			}
		}
	}()
}

// splitReaders are the speakers' records.Keeper, one per node, each told every
// 250 ms (a degraded speaker's decision pace) that it cannot hear the other half,
// whose records it holds.
type splitReaders struct {
	mu      sync.Mutex
	readers []*records.Keeper
}

func startSplitReaders(b *testing.B, ctx context.Context, env *testenv.Env, ns string, nodes []string) *splitReaders {
	b.Helper()
	r := &splitReaders{}
	half := len(nodes) / 2
	for i := range nodes {
		wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
		if err != nil {
			b.Fatal(err)
		}
		cfg := records.DefaultConfig()
		k := records.New(ctx, records.Options{Self: nodes[i], Namespace: ns, Config: cfg, Watches: wc, CacheHoldsRecords: true, Log: logr.Discard()})
		other := nodes[half:]
		if i >= half {
			other = nodes[:half]
		}
		recs := make([]quorum.Record, len(other))
		for j, node := range other {
			recs[j] = quorum.Record{Node: node, Members: other, Mode: quorum.ModeQuorum, Duration: cfg.Duration}
		}
		r.readers = append(r.readers, k)
		go func() {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				r.mu.Lock()
				k.Live(recs, nil, time.Now())
				r.mu.Unlock()
			}
		}()
	}
	return r
}

// all says whether every reader is ready.
func (r *splitReaders) all(ready func(records.Watching) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.readers {
		if !ready(k.Watching()) {
			return false
		}
	}
	return true
}
