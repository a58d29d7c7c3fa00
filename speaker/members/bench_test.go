package members

import (
	"slices"
	"sort"
	"testing"
	"time"
)

// BenchmarkFailureDetection measures, with the default timings on loopback, the time
// from a member's crash (Shutdown without Leave) until both survivors of a
// three-member cluster have declared it dead. It reports the median over the
// iterations as ms-to-detect (run with -benchtime=5x for five trials).
func BenchmarkFailureDetection(b *testing.B) {
	var trials []time.Duration
	for b.Loop() {
		b.StopTimer()
		ms := cluster(b, 3)
		b.StartTimer()
		t0 := time.Now()
		_ = ms[2].Shutdown()
		want := []string{ms[0].name, ms[1].name}
		eventually(b, 20*time.Second, func() bool {
			return slices.Equal(ms[0].Live(), want) && slices.Equal(ms[1].Live(), want)
		}, func() string { return "killed member still live" })
		trials = append(trials, time.Since(t0))
		b.StopTimer()
		_ = ms[0].Shutdown()
		_ = ms[1].Shutdown()
		b.StartTimer()
	}
	sort.Slice(trials, func(i, j int) bool { return trials[i] < trials[j] })
	med := trials[len(trials)/2]
	b.ReportMetric(float64(med.Microseconds())/1000, "ms-to-detect")
	b.ReportMetric(float64(trials[len(trials)-1].Microseconds())/1000, "max-ms-to-detect")
	b.ReportMetric(0, "ns/op")
	b.Logf("detection times: %v", trials)
}
