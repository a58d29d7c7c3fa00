package members

import (
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkFailureDetectionAtScale measures memberlist's failure detection with
// herald's timings and encryption in clusters of many members, all in this process on
// loopback: the time from a member's crash (Shutdown without Leave) until the first,
// the median and the last survivor has declared it dead. The first is what a failover
// waits for when the dead node's next-in-line hears first; the last bounds it.
//
// HERALD_ML_NODES lists the sizes (default 30; "100,300,1000" for docs/scale.md);
// HERALD_ML_PROBE_MS and HERALD_ML_SUSPICION_MULT override herald's timings
// (benchConfig). Each iteration kills one more member of the
// same cluster. It also reports the cores the idle cluster uses (past 2 on this
// machine, the members starve and the timings say more about the machine than about
// memberlist) and how many live members were declared dead during the trials.
func BenchmarkFailureDetectionAtScale(b *testing.B) {
	eachSize(b, detectAtScale)
}

// eachSize runs run as a sub-benchmark for each cluster size of HERALD_ML_NODES
// (default 30), with benchConfig's Config.
func eachSize(b *testing.B, run func(b *testing.B, n int, cfg Config)) {
	sizes := envList(b, "HERALD_ML_NODES", "30", 3)
	cfg := benchConfig(b)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) { run(b, n, cfg) })
	}
}

func detectAtScale(b *testing.B, n int, cfg Config) {
	b.Logf("probe interval %v, probe timeout %v, suspicion mult %d, gossip interval %v",
		cfg.ProbeInterval, cfg.ProbeTimeout, withExpected(cfg, n).suspicionMult(), withExpected(cfg, n).Gossip())
	built := time.Now()
	alive := scaleCluster(b, n, cfg)
	b.Logf("%d members joined and converged in %v", n, time.Since(built).Round(time.Millisecond))
	// The joins' news is still being gossiped: settle before measuring.
	time.Sleep(settleFor)
	idle := coresUsed(5 * time.Second)
	b.Logf("the idle cluster uses %.2f cores, %v after it converged", idle, settleFor)

	var first, median, last []time.Duration
	falseDeaths := 0
	for b.Loop() {
		b.StopTimer()
		if len(alive) < 3 {
			b.Fatalf("only %d members left: ask for fewer iterations", len(alive))
		}
		victim := alive[len(alive)-1]
		alive = alive[:len(alive)-1]
		b.StartTimer()
		seen := crashAndWatch(b, victim, victim.name, alive, 2*time.Millisecond)
		b.StopTimer()
		first, median, last = append(first, seen[0]), append(median, seen[len(seen)/2]), append(last, seen[len(seen)-1])
		// A live member some survivor lost meanwhile was declared dead falsely (a
		// starving process); wait until every survivor hears every other again.
		for _, m := range alive {
			if len(m.Live()) < len(alive) {
				falseDeaths++
			}
		}
		converge(b, alive, time.Minute)
		b.StartTimer()
	}
	b.ReportMetric(quantileMs(first, 0.5), "ms-first-detect")
	b.ReportMetric(quantileMs(median, 0.5), "ms-median-detect")
	b.ReportMetric(quantileMs(last, 0.5), "ms-last-detect")
	b.ReportMetric(idle, "cores-idle")
	b.ReportMetric(float64(falseDeaths), "survivors-with-false-deaths")
	b.ReportMetric(0, "ns/op")
	b.Logf("first %v, median %v, last %v", first, median, last)
}

// settleFor is how long a converged cluster is left alone before the trials.
const settleFor = 20 * time.Second

// scaleCluster starts n members with cfg (testConfig's, named node0000 on), joins
// each through a random member already in and waits until every one hears all.
func scaleCluster(b *testing.B, n int, cfg Config) []*Members {
	return scaleClusterWith(b, n, cfg, nil)
}

// scaleClusterWith is scaleCluster with configure (when not nil) called on each
// member's Config before it starts.
func scaleClusterWith(b *testing.B, n int, cfg Config, configure func(i int, c *Config)) []*Members {
	b.Helper()
	ms := make([]*Members, n)
	for i := range ms {
		c := cfg
		c.NodeName = fmt.Sprintf("node%04d", i)
		c.ExpectedMembers = n // as a speaker counts its peers' heartbeats
		if configure != nil {
			configure(i, &c)
		}
		m, err := Start(c, logr.Discard(), prometheus.NewRegistry())
		if err != nil {
			b.Fatalf("starting member %d of %d: %v", i, n, err)
		}
		b.Cleanup(func() { _ = m.Shutdown() })
		ms[i] = m
	}
	// Each joins through a random member already in, as nodes joining through every
	// Node's address do: one seed for all serves every push/pull and starves. A join
	// costs every member a state exchange with the newcomer (4 TCP connections to or
	// from it per member), so the joins are paced with the size (HERALD_ML_JOIN_PACE_MS
	// per member already in, default 2): all at once, a single process of 300 members
	// starves and joins time out, or runs out of file descriptors.
	rng := rand.New(rand.NewPCG(1, 2))
	pace := time.Duration(envInt(b, "HERALD_ML_JOIN_PACE_MS", 2, 1)) * time.Millisecond
	for i := 1; i < n; i++ {
		time.Sleep(time.Duration(i) * pace)
		var err error
		for try := 0; try < 3; try++ {
			if _, err = ms[i].Join([]string{ms[rng.IntN(i)].Addr()}); err == nil {
				break
			}
		}
		if err != nil {
			b.Fatalf("member %d of %d joining, 3 tries: %v", i, n, err)
		}
		if (i+1)%100 == 0 {
			fmt.Fprintf(os.Stderr, "%s: %d of %d members joined\n", time.Now().Format(time.TimeOnly), i+1, n) // progress: b.Logf prints only at the end
		}
	}
	converge(b, ms, 5*time.Minute)
	return ms
}

// converge waits until every member of ms hears exactly ms.
func converge(b *testing.B, ms []*Members, deadline time.Duration) {
	b.Helper()
	end := time.Now().Add(deadline)
	for _, m := range ms {
		for len(m.Live()) != len(ms) {
			if time.Now().After(end) {
				b.Fatalf("after %v a member hears %d of %d members", deadline, len(m.Live()), len(ms))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// coresUsed is the CPU this process uses over d, in cores.
func coresUsed(d time.Duration) float64 {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, t0 := cpu(), time.Now()
	time.Sleep(d)
	return float64(cpu()-c0) / float64(time.Since(t0))
}
