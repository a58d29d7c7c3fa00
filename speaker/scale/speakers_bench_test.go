package scale

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
	"herald.dev/herald/speaker"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// BenchmarkSpeakersAtScale runs many speakers (sim_test.go) against a real
// kube-apiserver and etcd, with $HERALD_SCALE_VIPS LoadBalancer Services holding one IP
// each (10,000), at each count of nodes in $HERALD_SCALE_NODES (100,300,1000). At each
// size it reports the API server's load in steady state and while one node flaps, read
// from the API server's own /metrics and from /proc, the heap per speaker, and how long
// after a node's death the observers' elections gave its IPs to others. It asserts no
// time. `make bench-scale` runs it; it is skipped otherwise (it takes many minutes).
func BenchmarkSpeakersAtScale(b *testing.B) {
	if os.Getenv("HERALD_BENCH_SCALE") == "" {
		b.Skip("set HERALD_BENCH_SCALE=1 (make bench-scale) to run the speakers' scale benchmark")
	}
	sizes := envInts(b, "HERALD_SCALE_NODES", []int{100, 300, 1000})
	vips := envInts(b, "HERALD_SCALE_VIPS", []int{10_000})[0]
	observers := envInts(b, "HERALD_SCALE_OBSERVERS", []int{2})[0]
	flaps := envInts(b, "HERALD_SCALE_FLAPS", []int{3})[0]
	window := time.Duration(envInts(b, "HERALD_SCALE_WINDOW", []int{30})[0]) * time.Second
	watchers := envInts(b, "HERALD_SCALE_WATCHERS", []int{300})[0]
	mlSlower := envInts(b, "HERALD_SCALE_ML_SLOWER", []int{1})[0]
	mlProbe := time.Duration(envInts(b, "HERALD_SCALE_ML_PROBE_MS", []int{0})[0]) * time.Millisecond
	splitFor := time.Duration(envInts(b, "HERALD_SCALE_SPLIT_S", []int{20})[0]) * time.Second
	digestFrom := envInts(b, "HERALD_SCALE_DIGEST_FROM", []int{-1})[0]

	crlog.SetLogger(logr.Discard())
	env := testenv.Start(b)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the speakers share this client: no client-side limit
	api, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	key, err := memberkey.FromSecretData(map[string][]byte{memberkey.DataKey: []byte("scale-benchmark-key-material")})
	if err != nil {
		b.Fatal(err)
	}
	h := &scaleHarness{b: b, ctx: b.Context(), c: env.Client, cfg: env.Config, watchers: watchers, splitFor: splitFor,
		sim: simEnv{cfg: cfg, api: api, namespace: "herald-system", key: key, log: logr.Discard(), mlSlower: mlSlower, mlProbe: mlProbe, digestFrom: digestFrom}}
	if splitFor > 0 {
		// The first half of the nodes on one side, the rest on the other.
		h.sim.split = newSplitter(func(node string) bool {
			i, _ := strconv.Atoi(strings.TrimPrefix(node, "node-")) // nodeName's
			return i >= h.sim.nodes/2
		})
	}
	// herald's controller sums the heartbeats up, as in a cluster: the speakers that do
	// not hear many peers read the summary instead of their heartbeats.
	startSummarizer(b, h.ctx, env, h.sim.namespace)
	// ... and digests their records, which the speakers out of Quorum read instead of
	// every record from --records-digest-from records.
	startDigester(b, h.ctx, env, h.sim.namespace)
	if digestFrom >= 0 {
		progress("the speakers read the records digest from %d records (0: never)", digestFrom)
		b.Logf("--records-digest-from %d (HERALD_SCALE_DIGEST_FROM)", digestFrom)
	}
	if mlProbe > 0 {
		progress("memberlist's probe interval is %v (--ml-probe-interval)", mlProbe)
		b.Logf("memberlist's probe interval is %v (HERALD_SCALE_ML_PROBE_MS, as --ml-probe-interval)", mlProbe)
	}
	if mlSlower > 1 {
		progress("memberlist's probe and gossip periods are %d times herald's", mlSlower)
		b.Logf("memberlist's probe and gossip periods are %d times herald's (HERALD_SCALE_ML_SLOWER)", mlSlower)
	}
	h.pids()
	progress("kube-apiserver pid %d, etcd pid %d", h.apiPID, h.etcdPID)
	start := time.Now()
	progress("creating %d Services with an IP and their EndpointSlices", vips)
	h.createVIPs(vips)
	progress("created in %s", time.Since(start).Round(time.Second))
	b.Logf("%d Services with an IP created in %s", vips, time.Since(start).Round(time.Second))

	var rows []scaleRow
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			h.b = b
			for range b.N {
				r := h.runSize(n, min(observers, n-1), vips, flaps, window)
				rows = append(rows, r)
				r.report(b)
				if os.Getenv("HERALD_SCALE_QUIET") == "" {
					printScaleTable(os.Stderr, []scaleRow{r}) // a later size may not finish
				}
			}
		})
	}
	printScaleTable(os.Stdout, rows)
}

func envInts(b *testing.B, name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			b.Fatalf("%s=%q: want positive integers separated by commas", name, s)
		}
		out = append(out, v)
	}
	return out
}

type scaleHarness struct {
	b        *testing.B
	ctx      context.Context
	c        client.Client
	cfg      *rest.Config
	sim      simEnv
	nodes    int
	apiPID   int
	etcdPID  int
	speakers []*simSpeaker
	// watchers: the light speakers [0, watchers) have their own informer of the
	// records, the others share one (HERALD_SCALE_WATCHERS).
	watchers   int
	stopShared context.CancelFunc
	// splitFor is how long the even split lasts (HERALD_SCALE_SPLIT_S; 0: none).
	splitFor time.Duration
}

// scaleRow is one size's figures.
type scaleRow struct {
	nodes, observers, vips int
	// failover: per death, the slowest observer; medians over the deaths.
	detect, decided []time.Duration
	steady, flap    loadSample
	// start: the light speakers started at once, until they hear each other.
	start loadSample
	// split: an even split of the memberlists, and heal: from its end until every
	// speaker hears every other again; splitModes the speakers' modes at its end.
	split, heal     loadSample
	splitModes      map[quorum.Mode]int
	heapLight       float64 // MiB per light speaker, as they converge
	heapLightNarrow float64 // the same once none watches every record
	heapObserver    float64 // MiB per observer
	passMs          float64 // an observer's election pass, ms (steady state)
	passesPerS      float64 // an observer's passes per second (steady state)
	settle          time.Duration
	// leaseWatchers: the informers of the records in the process (one per speaker, or
	// fewer with a shared one); the events figures scale lease events to n watchers.
	leaseWatchers int
}

// eventsAt scales the lease watch events of l from the watchers measured to n.
func (r scaleRow) eventsAt(l loadSample) float64 {
	return l.events - l.leaseEvents + l.leaseEvents*float64(r.nodes)/float64(r.leaseWatchers)
}

func (r scaleRow) eventMBAt(l loadSample) float64 {
	if l.events == 0 {
		return 0
	}
	return l.eventMB * r.eventsAt(l) / l.events
}

// loadSample is the API server's load over a window.
type loadSample struct {
	seconds                   float64
	writes, leaseWrites       float64 // per second
	events, leaseEvents       float64 // watch events sent, per second
	eventMB                   float64 // watch event bytes, MB per second
	apiserverCPU, etcdCPU     float64 // cores
	observerPasses, passMsAvg float64
	// recordWrites are the speakers' record writes in the sample, by reason, and
	// recordEvents the watch events of records they received, by watch (counted by
	// the speakers, not per second).
	recordWrites, recordEvents map[string]float64
}

func (r scaleRow) report(b *testing.B) {
	b.ReportMetric(testkit.Quantile(r.detect, 0.5).Seconds(), "s-death-to-detected")
	b.ReportMetric(testkit.Quantile(r.decided, 0.5).Seconds(), "s-death-to-decided")
	b.ReportMetric(r.steady.writes, "writes/s-steady")
	b.ReportMetric(r.steady.events, "watch-events/s-steady")
	b.ReportMetric(r.flap.writes, "writes/s-flap")
	b.ReportMetric(r.flap.events, "watch-events/s-flap")
	b.ReportMetric(r.steady.apiserverCPU, "apiserver-cores-steady")
	b.ReportMetric(r.flap.apiserverCPU, "apiserver-cores-flap")
	b.ReportMetric(r.steady.etcdCPU, "etcd-cores-steady")
	b.ReportMetric(r.heapLight, "MiB-heap/light-speaker")
	b.ReportMetric(r.heapLightNarrow, "MiB-heap/light-speaker-narrow")
	b.ReportMetric(r.heapObserver, "MiB-heap/observer")
	b.ReportMetric(r.passMs, "ms/election-pass")
	b.ReportMetric(r.passesPerS, "election-passes/s")
}

func printScaleTable(w io.Writer, rows []scaleRow) {
	fmt.Fprintln(w, "\nSpeakers at scale (API server's /metrics, /proc; medians over the deaths)")
	fmt.Fprintln(w, "| nodes | VIPs | record watchers | death→detected | death→decided (slowest observer) | writes/s steady | lease writes/s | watch events/s steady | watch MB/s | apiserver cores steady | etcd cores steady | writes/s flap | watch events/s flap | watch MB/s flap | apiserver cores flap | etcd cores flap | heap/light speaker MiB (converging / narrow) | heap/observer MiB | election pass ms | passes/s per observer |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %d | %d | %s (%s) | %s (%s) | %.1f | %.1f | %.0f | %.2f | %.2f | %.2f | %.1f | %.0f | %.2f | %.2f | %.2f | %.2f / %.2f | %.1f | %.1f | %.1f |\n",
			r.nodes, r.vips, r.leaseWatchers, durs(testkit.Quantile(r.detect, 0.5)), durList(r.detect), durs(testkit.Quantile(r.decided, 0.5)), durList(r.decided),
			r.steady.writes, r.steady.leaseWrites, r.steady.events, r.steady.eventMB, r.steady.apiserverCPU, r.steady.etcdCPU,
			r.flap.writes, r.flap.events, r.flap.eventMB, r.flap.apiserverCPU, r.flap.etcdCPU,
			r.heapLight, r.heapLightNarrow, r.heapObserver, r.passMs, r.passesPerS)
	}
	for _, r := range rows {
		s := r.start
		fmt.Fprintf(w, "nodes=%d: %d speakers started at once and heard each other in %.0f s: %.0f writes (%.0f of Leases; records by reason: %s), %.0f watch events (%.0f of Leases; %.0f with an informer of the records per speaker; received by the speakers, by watch: %s), %.0f MB of watch events\n",
			r.nodes, r.nodes-r.observers, s.seconds, s.writes*s.seconds, s.leaseWrites*s.seconds, writesByReason(s.recordWrites), s.events*s.seconds,
			s.leaseEvents*s.seconds, r.eventsAt(s)*s.seconds, byLabel(s.recordEvents, recordEventWatches), r.eventMBAt(s)*s.seconds)
	}
	for _, r := range rows {
		if r.split.seconds == 0 {
			continue
		}
		s, hl := r.split, r.heal
		fmt.Fprintf(w, "nodes=%d: an even split of memberlist for %.0f s (modes at its end: %v): %.0f writes (%.0f of Leases; records by reason: %s), %.0f watch events (%.0f of Leases; %.0f with an informer of the records per speaker; received by the speakers, by watch: %s), %.0f MB; its heal, until every speaker heard every other, %.0f s: %.0f writes (records by reason: %s), %.0f watch events (by watch: %s), %.0f MB\n",
			r.nodes, s.seconds, r.splitModes, s.writes*s.seconds, s.leaseWrites*s.seconds, writesByReason(s.recordWrites), s.events*s.seconds, s.leaseEvents*s.seconds,
			r.eventsAt(s)*s.seconds, byLabel(s.recordEvents, recordEventWatches), r.eventMBAt(s)*s.seconds, hl.seconds, hl.writes*hl.seconds, writesByReason(hl.recordWrites), hl.events*hl.seconds,
			byLabel(hl.recordEvents, recordEventWatches), r.eventMBAt(hl)*hl.seconds)
	}
	for _, r := range rows {
		if r.leaseWatchers != r.nodes {
			fmt.Fprintf(w, "nodes=%d: %d informers of the records instead of %d; at %d, lease events scale with the watchers: %.0f watch events/s (%.1f MB/s) steady, %.0f (%.1f MB/s) during the flap\n",
				r.nodes, r.leaseWatchers, r.nodes, r.nodes, r.eventsAt(r.steady), r.eventMBAt(r.steady), r.eventsAt(r.flap), r.eventMBAt(r.flap))
		}
	}
}

func durs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func durList(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	return strings.Join(out, " ")
}

// runSize runs n speakers (observers of them observers), measures, and stops them.
func (h *scaleHarness) runSize(n, observers, vips, flaps int, window time.Duration) scaleRow {
	b := h.b
	r := scaleRow{nodes: n, observers: observers, vips: vips}
	h.sim.nodes = n
	h.ensureNodes(n)
	defer h.stopAll()
	r.leaseWatchers = n
	if n > h.watchers {
		h.startShared()
		r.leaseWatchers = h.watchers + 1 + observers // the observers have their own
	}

	// Light speakers first: their heap, once they hear each other.
	base := testkit.HeapInUse()
	progress("nodes=%d: starting %d light speakers", n, n-observers)
	r.start = h.sample(0, func() {
		h.startSpeakers(0, n-observers, false)
		progress("nodes=%d: started, waiting for them to converge", n)
		h.waitConverged(n - observers)
	})
	r.heapLight = testkit.MiB(testkit.HeapInUse()-base) / float64(n-observers)
	// Each still watches every record, 30 s (recordsWideLinger) past its Quorum; then
	// only those that concern it.
	h.waitNarrow()
	r.heapLightNarrow = testkit.MiB(testkit.HeapInUse()-base) / float64(n-observers)
	b.Logf("nodes=%d: heap per light speaker %.2f MiB as they converge, %.2f MiB once none watches every record", n, r.heapLight, r.heapLightNarrow)
	base = testkit.HeapInUse()
	progress("nodes=%d: starting %d observers", n, observers)
	h.startSpeakers(n-observers, n, true)
	settleStart := time.Now()
	h.waitConverged(n)
	progress("nodes=%d: converged, waiting for elections", n)
	h.waitElected(vips)
	progress("nodes=%d: elected, waiting for calm", n)
	r.heapObserver = testkit.MiB(testkit.HeapInUse()-base) / float64(observers)
	h.waitCalm()
	r.settle = time.Since(settleStart)
	b.Logf("nodes=%d: converged and calm after %s; heap %.2f MiB per light speaker, %.1f MiB per observer",
		n, r.settle.Round(time.Second), r.heapLight, r.heapObserver)

	progress("nodes=%d: steady state", n)
	r.steady = h.sample(window, func() {})
	if r.steady.observerPasses > 0 {
		r.passMs = r.steady.passMsAvg
		r.passesPerS = r.steady.observerPasses / r.steady.seconds
	}

	// One node flaps: dies (memberlist stopped without a leave, record no longer
	// renewed), stays dead 10 s, comes back on the same port, and once everyone hears
	// it again stays 10 s; flaps times.
	victim := 1
	progress("nodes=%d: %s flaps %d times", n, nodeName(victim), flaps)
	r.flap = h.sample(0, func() {
		for range flaps {
			killed := time.Now()
			d, dec := h.killAndTime(victim)
			r.detect, r.decided = append(r.detect, d), append(r.decided, dec)
			time.Sleep(time.Until(killed.Add(10 * time.Second)))
			h.restart(victim)
			time.Sleep(10 * time.Second)
		}
	})
	b.Logf("nodes=%d: deaths detected after %s, decided after %s", n, durList(r.detect), durList(r.decided))

	// An even split: the two halves' memberlists cannot reach each other, the API
	// server stays reachable from both; then the heal.
	if h.sim.split != nil && h.splitFor > 0 {
		h.waitCalm()
		progress("nodes=%d: an even split for %s", n, h.splitFor)
		rejoinCtx, stopRejoin := context.WithCancel(h.ctx)
		r.split = h.sample(h.splitFor, func() {
			h.sim.split.on.Store(true)
			go h.rejoin(rejoinCtx)
			go h.trace(rejoinCtx, 2*time.Second)
		})
		r.splitModes = h.modes()
		progress("nodes=%d: the split heals (modes at its end: %v)", n, r.splitModes)
		r.heal = h.sample(0, func() {
			h.sim.split.on.Store(false)
			h.waitConverged(n)
		})
		stopRejoin()
	}
	return r
}

// trace prints, every period until ctx ends, the speakers' modes, their watches of the
// records and the record events they received so far: where a split's events go, and
// when.
func (h *scaleHarness) trace(ctx context.Context, period time.Duration) {
	start, ev0 := time.Now(), h.recordEvents()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ev := h.recordEvents()
		for k, v := range ev0 {
			ev[k] -= v
		}
		progress("  +%s: modes %v, watches %+v, record events received: %s", time.Since(start).Round(time.Second), h.modes(), h.watches(),
			byLabel(ev, recordEventWatches))
	}
}

// rejoin does what each speaker's join loop does (join.go): every --ml-join-interval
// each speaker joins the peers it does not hear, until ctx ends. Each side declared
// the other dead at the split, and memberlist's push/pull only reaches members it
// holds alive: the heal comes through these joins, as in a cluster.
func (h *scaleHarness) rejoin(ctx context.Context) {
	tick := time.NewTicker(speaker.DefaultConfig().JoinInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		addrs := make([]string, len(h.speakers))
		for i, s := range h.speakers {
			addrs[i] = s.ml.Addr()
		}
		for _, s := range h.speakers {
			s.ml.Join(addrs) // only the peers it does not hear; errors expected while split
		}
	}
}

// modes counts the speakers by mode.
func (h *scaleHarness) modes() map[quorum.Mode]int {
	out := map[quorum.Mode]int{}
	for _, s := range h.speakers {
		m, _ := s.state()
		out[m]++
	}
	return out
}

// watches counts, over the speakers, the watches of every record (through the records
// digest among them), of records by name and of heartbeats, and the speakers out of
// Quorum: who can receive the Lease events a sample counts.
type watches struct{ every, digest, narrow, recordsByName, heartbeats, degraded int }

func (h *scaleHarness) watches() watches {
	var w watches
	for _, s := range h.speakers {
		rw := s.keeper.Watching()
		w.every += rw.Every
		w.digest += rw.Digest
		w.narrow += rw.Narrow
		w.recordsByName += rw.ByName
		w.heartbeats += rw.Heartbeats
		if s.keeper.Wanted().Mode != quorum.ModeQuorum {
			w.degraded++
		}
	}
	return w
}

// waitNarrow waits (up to 2 minutes) until no speaker watches every record.
func (h *scaleHarness) waitNarrow() {
	for deadline := time.Now().Add(2 * time.Minute); h.watches().every+h.watches().digest > 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.b.Logf("%d speakers still watch every record after 2 minutes", h.watches().every)
			return
		}
	}
}

// sample measures the API server while f runs, or for window if f returns at once.
func (h *scaleHarness) sample(window time.Duration, f func()) loadSample {
	w0, rw0, re0 := h.watches(), h.recordWrites(), h.recordEvents()
	m0, cpu0 := h.scrape(), h.cpu()
	p0, t0 := h.observerPasses()
	start := time.Now()
	f()
	if rest := window - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	secs := time.Since(start).Seconds()
	m1, cpu1 := h.scrape(), h.cpu()
	p1, t1 := h.observerPasses()
	s := loadSample{
		seconds:      secs,
		writes:       (m1.writes - m0.writes) / secs,
		leaseWrites:  (m1.leaseWrites - m0.leaseWrites) / secs,
		events:       (m1.events - m0.events) / secs,
		leaseEvents:  (m1.leaseEvents - m0.leaseEvents) / secs,
		eventMB:      (m1.eventBytes - m0.eventBytes) / secs / 1e6,
		apiserverCPU: (cpu1[0] - cpu0[0]) / secs,
		etcdCPU:      (cpu1[1] - cpu0[1]) / secs,
		recordWrites: map[string]float64{},
		recordEvents: map[string]float64{},
	}
	for reason, n := range h.recordWrites() {
		if d := n - rw0[reason]; d > 0 {
			s.recordWrites[reason] = d
		}
	}
	for watch, n := range h.recordEvents() {
		if d := n - re0[watch]; d > 0 {
			s.recordEvents[watch] = d
		}
	}
	if obs := h.countObservers(); obs > 0 && p1 > p0 {
		s.observerPasses = float64(p1-p0) / float64(obs)
		s.passMsAvg = float64((t1 - t0).Milliseconds()) / float64(p1-p0)
	}
	h.b.Logf("sample %.0fs: %.1f writes/s (%.1f leases), %.0f watch events/s (%.0f leases, %.2f MB/s), apiserver %.2f cores, etcd %.2f cores",
		secs, s.writes, s.leaseWrites, s.events, s.leaseEvents, s.eventMB, s.apiserverCPU, s.etcdCPU)
	h.b.Logf("sample %.0fs: watches at start %+v, at end %+v; record events received by watch: %s", secs, w0, h.watches(), byLabel(s.recordEvents, recordEventWatches))
	return s
}

// recordEvents sums the watch events of records the speakers received, by watch
// (herald_speaker_record_events_total).
func (h *scaleHarness) recordEvents() map[string]float64 {
	return h.countsBy("herald_speaker_record_events_total", "watch")
}

// recordWrites sums the speakers' record writes by reason (herald_speaker_record_writes_total).
func (h *scaleHarness) recordWrites() map[string]float64 {
	return h.countsBy("herald_speaker_record_writes_total", "reason")
}

// The label values of herald_speaker_record_events_total and
// herald_speaker_record_writes_total, in the order the reports print them.
var (
	recordEventWatches = []string{"every", "leaving-out", "trouble", "by-name", "digest"}
	writeReasons       = []string{"start", "mode", "view", "macs", "answer"}
)

// countsBy sums the speakers' counter name by the value of label.
func (h *scaleHarness) countsBy(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range h.speakers {
		reg := prometheus.NewRegistry()
		for _, c := range s.keeper.Collectors() {
			reg.MustRegister(c)
		}
		families, err := reg.Gather()
		if err != nil {
			h.b.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label {
						out[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

// writesByReason prints record writes by reason, in a fixed order.
func writesByReason(m map[string]float64) string { return byLabel(m, writeReasons) }

// byLabel prints m's counts in the order of labels.
func byLabel(m map[string]float64, labels []string) string {
	var parts []string
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s %.0f", l, m[l]))
	}
	return strings.Join(parts, ", ")
}

func (h *scaleHarness) countObservers() int {
	n := 0
	for _, s := range h.speakers {
		if s.observer {
			n++
		}
	}
	return n
}

func (h *scaleHarness) observerPasses() (int, time.Duration) {
	var n int
	var t time.Duration
	for _, s := range h.speakers {
		if s.observer {
			p, d := s.passStats()
			n, t = n+p, t+d
		}
	}
	return n, t
}

// killAndTime kills speaker i and returns how long until every observer's memberlist
// dropped it and every observer's election gave all its IPs to others (the slowest
// observer's times; 30 s if it never did).
func (h *scaleHarness) killAndTime(i int) (detect, decided time.Duration) {
	victim := h.speakers[i]
	at := time.Now()
	for _, s := range h.speakers {
		if s.observer {
			s.timeDeath(victim.node, at)
		}
	}
	victim.kill()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		detect, decided = 0, 0
		done := true
		for _, s := range h.speakers {
			if !s.observer {
				continue
			}
			d, dec := s.deathTimes()
			if d == 0 || dec == 0 {
				done = false
			}
			detect, decided = max(detect, d), max(decided, dec)
		}
		if done {
			return detect, decided
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.b.Logf("the death of %s was not decided on every observer within 30s", victim.node)
	return 30 * time.Second, 30 * time.Second
}

// restart starts speaker i again (a new process on the same node: same name and
// port), waits until it and everyone hear each other.
func (h *scaleHarness) restart(i int) {
	old := h.speakers[i]
	port := old.port()
	var err error
	for try := 0; ; try++ { // the port may linger a moment
		var s *simSpeaker
		if s, err = startSim(h.ctx, h.sim, old.node, port, old.observer, old.cache == h.sim.shared); err == nil {
			h.speakers[i] = s
			break
		}
		if try == 50 {
			h.b.Fatalf("restarting %s: %v", old.node, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := h.join(h.speakers[i]); err != nil {
		h.b.Fatal(err)
	}
	h.waitConverged(len(h.speakers))
}

// progress says on stderr where a long run is (b.Logf prints only at the end).
func progress(format string, a ...any) {
	if os.Getenv("HERALD_SCALE_QUIET") == "" {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// startSpeakers starts the speakers of nodes [from, to), 16 at a time, and joins each
// to the first speaker.
func (h *scaleHarness) startSpeakers(from, to int, observer bool) {
	out := make([]*simSpeaker, to-from)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 16)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := startSim(h.ctx, h.sim, nodeName(i), 0, observer, i >= h.watchers)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[i-from] = s
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		h.b.Fatalf("starting speakers: %v", errs[0])
	}
	h.speakers = append(h.speakers, out...)
	for _, s := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// A speaker that cannot join now is measured anyway: memberlist gossip and
			// the others' joins may still bring it in (waitConverged says).
			if err := h.join(s); err != nil {
				progress("%v", err)
			}
		}()
	}
	wg.Wait()
}

// join joins s to the first speaker (the speaker joins every Node's address; one is
// enough on loopback, memberlist gossips the rest).
func (h *scaleHarness) join(s *simSpeaker) error {
	seed := h.speakers[0]
	if s == seed {
		return nil
	}
	for try := 0; ; try++ {
		_, err := s.ml.Join([]string{seed.ml.Addr()})
		if err == nil {
			return nil
		}
		if try == 20 {
			return fmt.Errorf("%s joining: %w", s.node, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitConverged waits until each of the n speakers hears all n and is in ModeQuorum.
func (h *scaleHarness) waitConverged(n int) {
	deadline := time.Now().Add(3 * time.Minute)
	for said := time.Now(); ; {
		bad := ""
		for _, s := range h.speakers[:n] {
			if live := len(s.ml.Live()); live != n {
				bad = fmt.Sprintf("%s hears %d of %d", s.node, live, n)
				break
			}
			if m, _ := s.state(); m != quorum.ModeQuorum {
				bad = fmt.Sprintf("%s is in mode %s", s.node, m)
				break
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			progress("speakers did not converge in 3 minutes, measuring anyway: %s", bad)
			h.b.Logf("speakers did not converge in 3 minutes: %s", bad)
			return
		}
		if time.Since(said) > 10*time.Second {
			progress("waiting for %d speakers to converge: %s", n, bad)
			said = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitElected waits until every observer's last election gave every IP an owner.
func (h *scaleHarness) waitElected(vips int) {
	deadline := time.Now().Add(3 * time.Minute)
	for said := time.Now(); ; {
		ok := true
		for _, s := range h.speakers {
			if !s.observer {
				continue
			}
			s.mu.Lock()
			owned := 0
			for o, c := range s.owners {
				if o != "" {
					owned += c
				}
			}
			s.mu.Unlock()
			if owned != vips {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			progress("the observers did not give every IP an owner in 3 minutes, measuring anyway")
			h.b.Log("the observers did not give every IP an owner in 3 minutes")
			return
		}
		if time.Since(said) > 10*time.Second {
			progress("waiting for the observers to give all %d IPs an owner", vips)
			said = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitCalm waits until every speaker is in Quorum with nobody asking whether it is
// alive and watches no heartbeat (those opened while it heard nobody at its start
// close 30 s after it heard their peers), then one renewal period: the start-up is
// over.
func (h *scaleHarness) waitCalm() {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		troubled := 0
		for _, s := range h.speakers {
			if w := s.keeper.Wanted(); w.Mode != quorum.ModeQuorum || len(w.Askers) > 0 {
				troubled++
			}
			if s.keeper.Watching().Heartbeats > 0 {
				troubled++
			}
		}
		if troubled == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.b.Logf("%d speakers still degraded, asked about or watching heartbeats after 5 minutes", troubled)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(records.DefaultConfig().Renew + time.Second)
}

// startShared starts the informer of the records that the light speakers beyond
// h.watchers share.
func (h *scaleHarness) startShared() {
	c, err := newRecordsCache(h.sim)
	if err != nil {
		h.b.Fatal(err)
	}
	if _, err := c.GetInformer(h.ctx, &coordinationv1.Lease{}); err != nil {
		h.b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		h.b.Fatal("the shared informer of the records did not sync")
	}
	h.sim.shared, h.stopShared = c, cancel
}

// stopAll kills every speaker and deletes the records, for the next size.
func (h *scaleHarness) stopAll() {
	defer func() {
		if h.stopShared != nil {
			h.stopShared()
			h.sim.shared, h.stopShared = nil, nil
		}
	}()
	var wg sync.WaitGroup
	for _, s := range h.speakers {
		wg.Add(1)
		go func() { defer wg.Done(); s.kill() }()
	}
	wg.Wait()
	h.speakers = nil
	for _, label := range []string{records.Label, records.HeartbeatLabel} {
		if err := h.c.DeleteAllOf(context.Background(), &coordinationv1.Lease{}, client.InNamespace(h.sim.namespace),
			client.HasLabels{label}); err != nil {
			h.b.Errorf("deleting the records: %v", err)
		}
	}
}

// createVIPs creates the namespace, a pool, an advertisement and vips LoadBalancer
// Services each holding one IP of the pool in its status, as the controller leaves
// them, and one EndpointSlice each with one ready endpoint.
func (h *scaleHarness) createVIPs(vips int) {
	b, ctx := h.b, h.ctx
	for _, ns := range []string{h.sim.namespace, "scale"} {
		if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	pool := &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: h.sim.namespace},
		Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{"10.200.0.0/16"}}}
	ad := &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: h.sim.namespace}}
	for _, o := range []client.Object{pool, ad} {
		if err := h.c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	h.parallel(vips, func(c client.Client, i int) error {
		s := testkit.LBService("scale", fmt.Sprintf("s%d", i), testkit.WithoutNodePorts())
		s.Annotations = map[string]string{heraldv1.AnnotationAllocatedFromPool: "scale"}
		if err := c.Create(ctx, s); err != nil {
			return err
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("10.200.%d.%d", (i+1)/256, (i+1)%256)}}
		if err := c.Status().Update(ctx, s); err != nil {
			return err
		}
		// One ready endpoint: a Service without any is not announced.
		return c.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: "scale",
				Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.244.%d.%d", (i+1)/256, (i+1)%256)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports: []discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}},
		})
	})
}

// ensureNodes creates the Nodes node-0000 to node-(n-1) that do not exist yet.
func (h *scaleHarness) ensureNodes(n int) {
	if n <= h.nodes {
		return
	}
	from := h.nodes
	h.parallel(n-from, func(c client.Client, i int) error {
		return c.Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(from + i)}})
	})
	h.nodes = n
}

// parallel runs f(i) for i in [0, n) with 48 workers, each with its own client.
func (h *scaleHarness) parallel(n int, f func(client.Client, int) error) {
	if err := testenv.Parallel(h.cfg, 48, n, f); err != nil {
		h.b.Fatal(err)
	}
}

// metricsSample holds the API server's counters.
type metricsSample struct {
	writes, leaseWrites, events, leaseEvents, eventBytes float64
}

// scrape reads the API server's /metrics: apiserver_request_total of the write verbs,
// apiserver_watch_events_total and the sum of apiserver_watch_events_sizes.
func (h *scaleHarness) scrape() metricsSample {
	m, err := testenv.APIServerMetrics(h.cfg)
	if err != nil {
		h.b.Fatal(err)
	}
	lease := func(l map[string]string) bool { return l["resource"] == "leases" || l["kind"] == "Lease" }
	write := func(l map[string]string) bool { return slices.Contains(writeVerbs, l["verb"]) }
	return metricsSample{
		writes:      m.Sum("apiserver_request_total", write),
		leaseWrites: m.Sum("apiserver_request_total", func(l map[string]string) bool { return write(l) && lease(l) }),
		events:      m.Sum("apiserver_watch_events_total", nil),
		leaseEvents: m.Sum("apiserver_watch_events_total", lease),
		eventBytes:  m.Sum("apiserver_watch_events_sizes", nil),
	}
}

var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}

// pids finds kube-apiserver and etcd among this process's children.
func (h *scaleHarness) pids() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		h.b.Fatal(err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != self {
			continue
		}
		switch st.comm {
		case "kube-apiserver":
			h.apiPID = pid
		case "etcd":
			h.etcdPID = pid
		}
	}
	if h.apiPID == 0 || h.etcdPID == 0 {
		h.b.Fatalf("kube-apiserver (pid %d) or etcd (pid %d) not found among this process's children", h.apiPID, h.etcdPID)
	}
}

// cpu returns the CPU seconds kube-apiserver and etcd used so far.
func (h *scaleHarness) cpu() [2]float64 {
	var out [2]float64
	for i, pid := range []int{h.apiPID, h.etcdPID} {
		st, err := readStat(pid)
		if err != nil {
			h.b.Fatal(err)
		}
		out[i] = st.cpu
	}
	return out
}

type procStat struct {
	comm string
	ppid int
	cpu  float64 // utime + stime, seconds
}

// readStat reads /proc/<pid>/stat (fields: pid (comm) state ppid ... utime stime at
// 14 and 15, in clock ticks of 1/100 s on Linux).
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, fmt.Errorf("reading the CPU time of pid %d: %w", pid, err)
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return procStat{comm: s[open+1 : closing], ppid: ppid, cpu: (ut + st) / 100}, nil
}
