package e2e

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/speaker"
)

// recordWrites watches the speakers' records from now until until, and then returns,
// by node, when each write of its record reached the watch: the API load a fault puts
// on the API server, as it sees it.
func (f *fullLab) recordWrites(t *testing.T, until time.Time) func() map[string][]time.Time {
	t.Helper()
	wc, err := client.NewWithWatch(f.CP.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatalf("watch client: %v", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	w, err := wc.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(heraldNS), client.HasLabels{speaker.RecordLabel})
	if err != nil {
		cancel()
		t.Fatalf("watching the speakers' records: %v", err)
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
				// The watch starts with an ADDED event per existing record: not a write.
				if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type == watch.Modified && l.Spec.HolderIdentity != nil {
					seen[*l.Spec.HolderIdentity] = append(seen[*l.Spec.HolderIdentity], time.Now())
				}
			}
		}
	}()
	return func() map[string][]time.Time { return <-done }
}
