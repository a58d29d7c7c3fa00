package e2e

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/speaker"
)

// recordWrites reads the speakers' records every 100 ms until until, and then returns,
// by node, when each new version of its record was first seen: the API load a fault
// puts on the API server, as it sees it. Renewals come at most twice a second, so
// polling sees every one.
func (f *fullLab) recordWrites(t *testing.T, until time.Time) func() map[string][]time.Time {
	t.Helper()
	done := make(chan map[string][]time.Time, 1)
	go func() {
		versions, seen := map[string]string{}, map[string][]time.Time{}
		ctx, cancel := context.WithDeadline(context.Background(), until)
		defer cancel()
		for first := true; ctx.Err() == nil; first = false {
			var leases coordinationv1.LeaseList
			if err := f.c.List(ctx, &leases, client.InNamespace(heraldNS), client.HasLabels{speaker.RecordLabel}); err == nil {
				now := time.Now()
				for _, l := range leases.Items {
					if l.Spec.HolderIdentity == nil || versions[l.Name] == l.ResourceVersion {
						continue
					}
					versions[l.Name] = l.ResourceVersion
					if !first {
						seen[*l.Spec.HolderIdentity] = append(seen[*l.Spec.HolderIdentity], now)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		done <- seen
	}()
	return func() map[string][]time.Time { return <-done }
}

// writesIn counts the times in [from, to).
func writesIn(times []time.Time, from, to time.Time) int {
	n := 0
	for _, at := range times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}
