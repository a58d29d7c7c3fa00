package e2e

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/speaker/records"
)

// recordWrites watches the speakers' records from now until until, and then returns,
// by node, when each write of its record reached the watch: the API load a fault puts
// on the API server, as it sees it.
func (f *fullLab) recordWrites(t *testing.T, until time.Time) func() map[string][]time.Time {
	t.Helper()
	return f.leaseWrites(t, records.Label, until)
}

// leaseWrites watches the Leases labelled label in herald's namespace from now until
// until, and then returns, by holder, when each write reached the watch.
func (f *fullLab) leaseWrites(t *testing.T, label string, until time.Time) func() map[string][]time.Time {
	t.Helper()
	wc, err := client.NewWithWatch(f.CP.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatalf("watch client: %v", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	w, err := wc.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(heraldNS), client.HasLabels{label})
	if err != nil {
		cancel()
		t.Fatalf("watching the Leases labelled %s: %v", label, err)
	}
	done := make(chan map[string][]time.Time, 1)
	go func() {
		defer cancel()
		defer w.Stop()
		seen := map[string][]time.Time{}
		for {
			select {
			case <-ctx.Done():
				done <- seen
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					done <- seen
					return
				}
				// The watch starts with an ADDED event per existing Lease: not a write.
				if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type == watch.Modified && l.Spec.HolderIdentity != nil {
					seen[*l.Spec.HolderIdentity] = append(seen[*l.Spec.HolderIdentity], time.Now())
				}
			}
		}
	}()
	return func() map[string][]time.Time { return <-done }
}

// TestLabRecordsQuiet: while every speaker hears every other, the speakers' records do
// not change and only their heartbeats renew, which nobody watches: the API server
// sends the speakers no event a second (before, every renewal of every record went to
// every speaker).
func TestLabRecordsQuiet(t *testing.T) {
	f := fullLabFor(t)
	f.expectOwners(t, f.vips, "before watching the records")
	f.waitAllInQuorum(t)

	const window = 25 * time.Second // two and a half heartbeat periods
	start := time.Now()
	recs := f.recordWrites(t, start.Add(window))
	beats := f.leaseWrites(t, records.HeartbeatLabel, start.Add(window))
	events0 := f.leaseWatchEvents(t)
	time.Sleep(window)
	events := f.leaseWatchEvents(t) - events0
	rw, bw := recs(), beats()
	t.Logf("FIGURE Lease watch events sent by the API server in %s of steady state: %.0f (%.1f/s; the lab agents' node Leases and their watchers included)",
		window, events, events/window.Seconds())
	for _, n := range f.nodes {
		t.Logf("FIGURE %s in %s of steady state: %d record writes, %d heartbeat renewals", n, window, len(rw[n]), len(bw[n]))
		if len(rw[n]) > 0 {
			t.Errorf("%s wrote its record %d times in %s while every speaker heard every other; a record changes only with what it says", n, len(rw[n]), window)
		}
		if len(bw[n]) < 2 {
			t.Errorf("%s renewed its heartbeat %d times in %s; want one every 10 s", n, len(bw[n]), window)
		}
	}
}

// leaseWatchEvents reads apiserver_watch_events_total for Leases from the lab's API
// server.
func (f *fullLab) leaseWatchEvents(t *testing.T) float64 {
	t.Helper()
	m, err := testenv.APIServerMetrics(f.CP.Config)
	if err != nil {
		t.Fatal(err)
	}
	return m.Sum("apiserver_watch_events_total", func(l map[string]string) bool {
		return l["resource"] == "leases" || l["kind"] == "Lease"
	})
}
