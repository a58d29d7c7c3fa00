package members

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"herald.dev/herald/internal/testkit"
)

// BenchmarkFailureDetection measures the spread of memberlist's failure detection in a
// small cluster with herald's timings, the lab's size: each iteration a newcomer joins,
// waits a random part of a probe round (so that the crash falls anywhere in the
// survivors' probe cycles), and crashes (Shutdown without Leave); the time until the
// first and until the last survivor declared it dead is recorded. The median says what
// a failover usually waits for, the 90th percentile and the maximum what a promise
// must hold ("no request fails later than ...").
//
// Each iteration makes HERALD_ML_TRIALS crashes (default 40, about a minute and a
// half); HERALD_ML_NODES is the size with the newcomer (default 3); HERALD_ML_PROBE_MS
// and HERALD_ML_SUSPICION_MULT override herald's probe interval and suspicion
// multiplier.
//
//	go test -run '^$' -bench 'BenchmarkFailureDetection$' -benchtime 1x ./speaker/members/
func BenchmarkFailureDetection(b *testing.B) {
	n := envInt(b, "HERALD_ML_NODES", 3, 3)
	trials := envInt(b, "HERALD_ML_TRIALS", 40, 1)
	cfg := withExpected(benchConfig(b), n)
	b.Logf("probe interval %v, probe timeout %v, suspicion mult %d (max mult %d), gossip interval %v",
		cfg.ProbeInterval, cfg.ProbeTimeout, cfg.suspicionMult(), cfg.SuspicionMaxTimeoutMult, cfg.Gossip())
	survivors := scaleCluster(b, n-1, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	round := cfg.ProbeInterval * time.Duration(n) // every member probes each peer once in about n intervals

	// The victim comes back under the same name and address, as a rebooted node does:
	// a new name each time would grow the survivors' lists with dead members (and
	// memberlist's suspicion timeout grows with the list), a new port would be refused
	// as a conflict with the dead member's address. The first victim takes the port
	// memberlist finds free (for both UDP and TCP), and every later one the same.
	c := cfg
	c.NodeName = "victim"
	var first, last []time.Duration
	for b.Loop() {
		for range trials {
			f, l := detectOnce(b, &c, survivors, round, rng)
			first, last = append(first, f), append(last, l)
		}
	}
	b.ReportMetric(quantileMs(first, 0.5), "ms-first-median")
	b.ReportMetric(quantileMs(first, 0.9), "ms-first-p90")
	b.ReportMetric(quantileMs(first, 1), "ms-first-max")
	b.ReportMetric(quantileMs(last, 0.5), "ms-last-median")
	b.ReportMetric(quantileMs(last, 0.9), "ms-last-p90")
	b.ReportMetric(quantileMs(last, 1), "ms-last-max")
	b.ReportMetric(0, "ns/op")
}

// detectOnce starts a member with c, joins it to the survivors, crashes it at a random
// point of a probe round and returns when the first and the last survivor declared it
// dead. Without a port in c, it records the one the member bound.
func detectOnce(b *testing.B, c *Config, survivors []*Members, round time.Duration, rng *rand.Rand) (first, last time.Duration) {
	b.Helper()
	victim, err := Start(*c, logr.Discard(), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	if c.BindPort == 0 {
		ap, err := netip.ParseAddrPort(victim.Addr())
		if err != nil {
			b.Fatal(err)
		}
		c.BindPort = int(ap.Port())
	}
	if _, err := victim.Join([]string{survivors[rng.IntN(len(survivors))].Addr()}); err != nil {
		b.Fatalf("%s joining: %v", c.NodeName, err)
	}
	converge(b, append(slices.Clone(survivors), victim), time.Minute)
	time.Sleep(round + time.Duration(rng.Int64N(int64(round))))
	seen := crashAndWatch(b, victim, c.NodeName, survivors, time.Millisecond)
	return seen[0], seen[len(seen)-1]
}

// crashAndWatch shuts victim (named name) down without a Leave and returns when each
// survivor declared it dead, from the crash, soonest first; survivors are polled every
// poll.
func crashAndWatch(b *testing.B, victim *Members, name string, survivors []*Members, poll time.Duration) []time.Duration {
	b.Helper()
	start := time.Now()
	_ = victim.Shutdown()
	var seen []time.Duration
	pending := slices.Clone(survivors)
	for len(pending) > 0 {
		if time.Since(start) > time.Minute {
			b.Fatalf("%d of %d survivors still hear %s a minute after its crash", len(pending), len(survivors), name)
		}
		pending = slices.DeleteFunc(pending, func(m *Members) bool {
			if m.IsLive(name) {
				return false
			}
			seen = append(seen, time.Since(start))
			return true
		})
		time.Sleep(poll)
	}
	slices.Sort(seen)
	return seen
}

// envInt is the integer in the environment variable name, def when it is unset; a
// value below least fails the benchmark.
func envInt(b *testing.B, name string, def, least int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < least {
		b.Fatalf("%s=%q: want an integer, %d or more", name, s, least)
	}
	return v
}

// benchConfig is the test members' Config with the benchmarks' overrides from the
// environment: HERALD_ML_PROBE_MS (the probe timeout keeps its share of it, half at
// most); HERALD_ML_SUSPICION_MULT and HERALD_ML_GOSSIP_MS (both automatic by default);
// HERALD_ML_TCP_TIMEOUT_MS, for the runs that slow every period (a join's TCP exchange
// waits as long as the slowed cluster needs); HERALD_ML_NO_STATES=1, under which the
// members exchange no states when they see a peer join (memberlist's own detection, at
// sizes one process cannot form with the exchanges).
func benchConfig(b *testing.B) Config {
	cfg := testConfig("", testKey) // loopback, a free port each, the test key
	if ms := envInt(b, "HERALD_ML_PROBE_MS", 0, 10); ms > 0 {
		// The probe timeout keeps its share of the interval: a run that slows every
		// period must slow it too, or a process that answers pings a little late
		// fails its probes, and the indirect probes and suspicions that follow load
		// it more (1,000 members stopped forming so, with 1 s probes and 50 ms timeouts).
		def := cfg.ProbeInterval
		cfg.ProbeInterval = time.Duration(ms) * time.Millisecond
		cfg.ProbeTimeout = min(cfg.ProbeTimeout*cfg.ProbeInterval/def, cfg.ProbeInterval/2)
	}
	cfg.SuspicionMult = envInt(b, "HERALD_ML_SUSPICION_MULT", cfg.SuspicionMult, 0)
	if ms := envInt(b, "HERALD_ML_GOSSIP_MS", 0, 1); ms > 0 {
		cfg.GossipInterval = time.Duration(ms) * time.Millisecond
	}
	if ms := envInt(b, "HERALD_ML_TCP_TIMEOUT_MS", 0, 1); ms > 0 {
		cfg.TCPTimeout = time.Duration(ms) * time.Millisecond
	}
	cfg.noStateExchange = envInt(b, "HERALD_ML_NO_STATES", 0, 0) == 1
	return cfg
}

// withExpected is cfg for a cluster of n members, as a speaker counts them.
func withExpected(cfg Config, n int) Config {
	cfg.ExpectedMembers = n
	return cfg
}

// quantileMs is the q-quantile of ds (nearest rank), in milliseconds.
func quantileMs(ds []time.Duration, q float64) float64 {
	return float64(testkit.Quantile(ds, q).Microseconds()) / 1000
}
