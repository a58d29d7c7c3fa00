package election

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"herald.dev/herald/internal/testkit"
)

// BenchmarkElector compares, at 100, 300 and 1,000 nodes with 10,000 IPs (one Service
// each), the full election (Elect, and an Elector's first election) with an Elector's
// re-election after one member dies and after it joins again: the failover path. Each
// reports the heap an Elector keeps (MB-kept) besides time and allocations.
func BenchmarkElector(b *testing.B) {
	for _, nodes := range []int{100, 300, 1_000} {
		v, svcs := benchNodes(nodes, 10_000)
		b.Run(fmt.Sprintf("nodes=%d/Elect", nodes), func(b *testing.B) {
			for b.Loop() {
				Elect(v, svcs)
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/first", nodes), func(b *testing.B) {
			for b.Loop() {
				var e Elector
				e.Elect(v, svcs)
			}
			b.ReportMetric(keptMB(v, svcs), "MB-kept")
		})
		b.Run(fmt.Sprintf("nodes=%d/death", nodes), func(b *testing.B) {
			benchMembership(b, v, svcs, true)
		})
		b.Run(fmt.Sprintf("nodes=%d/join", nodes), func(b *testing.B) {
			benchMembership(b, v, svcs, false)
		})
	}
}

// benchMembership times one re-election after a member dies (death) or after it comes
// back (join); the election that undoes the change is not timed. The member changes
// from one iteration to the next.
func benchMembership(b *testing.B, v View, svcs []Service, death bool) {
	var e Elector
	e.Elect(v, svcs)
	ranked, i := 0, 0
	for b.Loop() {
		gone := v.Members[i*7%len(v.Members)]
		i++
		without := v
		without.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m string) bool { return m == gone })
		before, after := v, without
		if !death {
			before, after = without, v
		}
		b.StopTimer()
		e.Elect(before, svcs)
		b.StartTimer()
		e.Elect(after, svcs)
		if e.last.full {
			b.Fatal("a membership change elected everything again")
		}
		ranked += e.last.ranked
	}
	b.ReportMetric(float64(ranked)/float64(i), "groups-ranked/op")
}

// keptMB is how much heap an Elector holds after electing v and svcs.
func keptMB(v View, svcs []Service) float64 {
	before := testkit.HeapInUse()
	e := new(Elector)
	e.Elect(v, svcs)
	kept := testkit.HeapInUse() - before
	runtime.KeepAlive(e)
	return testkit.MiB(kept)
}
