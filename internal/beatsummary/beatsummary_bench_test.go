package beatsummary

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// What the summary costs at 1,000 speakers: the controller's pass (sort the
// heartbeats, write the Lease's annotations) and a speaker's read of a new version
// (parse it). Reports the summary's annotation bytes with every speaker fresh, and
// with a tenth stale.
func BenchmarkSummary1000(b *testing.B) {
	now := time.Now()
	beats := make([]Beat, 1000)
	for i := range beats {
		renewed := now.Add(-time.Duration(i%10) * time.Second)
		if i%10 == 0 {
			renewed = now.Add(-time.Hour) // a tenth stale
		}
		beats[i] = Beat{Node: fmt.Sprintf("worker-%04d.rack-%02d.example.net", i, i%40), RenewedAt: renewed, Duration: 30 * time.Second}
	}
	var l coordinationv1.Lease
	b.Run("write", func(b *testing.B) {
		for b.Loop() {
			fresh, stale, _ := Summarize(beats, now)
			Summary{At: now, Duration: Duration, Fresh: fresh, Stale: stale}.Apply(&l)
		}
		b.ReportMetric(float64(len(l.Annotations[FreshAnnotation])+len(l.Annotations[StaleAnnotation])), "annotation-bytes")
	})
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := FromLease(&l); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lookup", func(b *testing.B) {
		s, err := FromLease(&l)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			for i := range beats {
				s.Beat(beats[i].Node)
			}
		}
	})
}
