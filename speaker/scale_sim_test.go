package speaker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// The scale benchmark (scale_bench_test.go) runs many speakers' control loops in one
// process: simSpeaker is one of them. It is a Speaker built from the same parts as
// Run builds (real memberlist on a loopback port, the real records code on its own
// informer of the records, the real quorum rule through Speaker.decide and the record
// it publishes through Speaker.publishRecord), without ARP/NDP, the proxier, Events
// and metrics.
//
// An observer also caches what an election reads (Services, EndpointSlices, Nodes,
// advertisements, pools), and runs the election as runElection does, with the
// incremental Elector, on every change, a record renewal included: what a speaker
// costs at scale. The other speakers (light) keep memberlist and their record as a
// speaker does, but re-decide on a membership change and at most once a second on
// record changes, and elect nothing: hundreds of speakers reading 10,000 Services each
// do not fit in one process on two cores. Claims (the IPs each speaker announces,
// exchanged over memberlist) are not published: elections place by hash alone.
type simSpeaker struct {
	*Speaker
	// ml and keeper are the speaker's memberlist and records by their types, as Run
	// holds them (the Speaker holds them by the interfaces of seams.go).
	ml       *members.Members
	keeper   *records.Keeper
	observer bool
	cache    cache.Cache
	stop     context.CancelFunc
	done     chan struct{}

	// Set by an observer's elections (loop goroutine), read by the benchmark.
	mu        sync.Mutex
	passes    int           // election passes run
	passTime  time.Duration // their total duration
	owners    map[string]int
	watchFor  string    // a node whose death is being timed
	watchAt   time.Time // when it was killed
	detectAt  time.Time // when memberlist dropped it here
	decidedAt time.Time // when an election first left it no IP
	mode      quorum.Mode
	liveCount int
}

// simEnv is what every simulated speaker shares: the API server and the memberlist key.
type simEnv struct {
	cfg       *rest.Config
	api       client.WithWatch // uncached reads, the records' writes and the heartbeats' watches, shared
	namespace string
	key       []byte
	log       logr.Logger
	// shared, when set, is one informer of the records that the light speakers started
	// with shared read instead of their own: the process cannot hold a thousand
	// informers of a thousand records each.
	shared cache.Cache
	// mlSlower multiplies memberlist's probe and gossip periods (HERALD_SCALE_ML_SLOWER;
	// 1: herald's defaults): hundreds of memberlists at herald's pace in one process on
	// a small machine starve each other and declare live members dead.
	mlSlower int
	// mlProbe, when set, is memberlist's probe interval (HERALD_SCALE_ML_PROBE_MS), as
	// --ml-probe-interval sets it; the probe timeout is then at most half of it.
	mlProbe time.Duration
	// nodes is the simulated cluster's size, which each speaker counts for
	// memberlist's automatic suspicion as a speaker in a running cluster would.
	nodes int
	// digestFrom, when not negative, is the speakers' --records-digest-from
	// (HERALD_SCALE_DIGEST_FROM; 0: never read the records digest).
	digestFrom int
	// split, when set, carries every memberlist's traffic, and cuts the cluster in
	// two when switched on (scale_split_test.go).
	split *splitter
}

// newRecordsCache returns a cache of every speaker's record, shared by the light
// speakers beyond HERALD_SCALE_WATCHERS (each of which then reads every record, as
// speakers did before they watched only the records that concern them).
func newRecordsCache(env simEnv) (cache.Cache, error) {
	return cache.New(env.cfg, recordsCacheOptions(env, recordsByObject(env.namespace), false))
}

// recordsByObject selects every record, in herald's namespace (what a speaker's cache
// held before records.CacheScope).
func recordsByObject(namespace string) cache.ByObject {
	return cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      labels.SelectorFromSet(labels.Set{records.Label: "true"}),
	}
}

// recordsCacheOptions are a simulated speaker's cache: leases are the records it
// holds (records.CacheScope, as Run's, unless shared).
func recordsCacheOptions(env simEnv, leases cache.ByObject, observer bool) cache.Options {
	opts := cache.Options{Scheme: scheme.New(), ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: leases,
	}, DefaultTransform: cache.TransformStripManagedFields()}
	if !observer {
		// A light speaker caches the records only; its record then has no owner
		// reference to its Node (the write reads the Node from the cache).
		opts.ReaderFailOnMissingInformer = true
	}
	return opts
}

// startSim starts the speaker of node on port (0: any free port) and returns once its
// informers are synced; it joins nobody (join). A light speaker with shared reads the
// records from env.shared.
func startSim(ctx context.Context, env simEnv, node string, port int, observer, shared bool) (*simSpeaker, error) {
	cfg := DefaultConfig()
	cfg.NodeName = node
	cfg.Namespace = env.namespace
	cfg.Members.NodeName = node
	cfg.Members.BindAddr = "127.0.0.1"
	cfg.Members.BindPort = port
	cfg.Members.SecretKey = env.key
	cfg.Members.ExpectedMembers = env.nodes
	if env.digestFrom >= 0 {
		cfg.Records.DigestFrom = env.digestFrom
	}
	if env.mlProbe > 0 {
		cfg.Members.ProbeInterval = env.mlProbe
		cfg.Members.ProbeTimeout = min(cfg.Members.ProbeTimeout, env.mlProbe/2)
	}
	if k := time.Duration(env.mlSlower); k > 1 {
		cfg.Members.ProbeInterval *= k
		cfg.Members.ProbeTimeout *= k
		cfg.Members.GossipInterval = cfg.Members.Gossip() * k
	}

	shared = shared && !observer && env.shared != nil
	c := env.shared
	if !shared {
		var err error
		if c, err = cache.New(env.cfg, recordsCacheOptions(env, records.CacheScope(env.namespace, node), observer)); err != nil {
			return nil, fmt.Errorf("cache of %s: %w", node, err)
		}
	}
	l2, err := layer2.New(layer2.Config{Schedule: layer2.DefaultSchedule()}) // never run: no responder, no MAC
	if err != nil {
		return nil, fmt.Errorf("announcer of %s: %w", node, err)
	}
	s := &Speaker{
		cfg: cfg, log: env.log, cache: c, l2: l2,
		trigger: make(chan struct{}, 1), proxyPoke: make(chan struct{}, 1),
		live: map[string]bool{}, since: map[string]time.Time{}, lostAt: map[string]time.Time{},
	}
	sim := &simSpeaker{Speaker: s, observer: observer, cache: c, done: make(chan struct{}), owners: map[string]int{}}
	ctx, sim.stop = context.WithCancel(ctx)
	sim.keeper = records.New(ctx, records.Options{Self: node, Namespace: env.namespace, Config: cfg.Records,
		Cache: c, API: env.api, Writer: env.api, Watches: env.api, CacheHoldsRecords: shared,
		PokeElection: s.pokeElection, PeerMACs: s.peers.set, Log: env.log})
	s.records = sim.keeper

	if observer {
		if err := s.watch(ctx, c); err != nil {
			return nil, err
		}
	}
	if err := sim.keeper.WatchCache(ctx, c); err != nil {
		return nil, err
	}
	if env.split != nil {
		t, err := env.split.transport(node, port)
		if err != nil {
			sim.stop()
			return nil, fmt.Errorf("memberlist transport of %s: %w", node, err)
		}
		cfg.Members.Transport = t
	}
	if sim.ml, err = members.Start(cfg.Members, env.log, nil); err != nil {
		if t := cfg.Members.Transport; t != nil {
			_ = t.Shutdown()
		}
		return nil, fmt.Errorf("memberlist of %s: %w", node, err)
	}
	s.members = sim.ml
	sim.keeper.SetHeard(sim.ml.IsLive) // as Run does
	sim.ml.OnMeta(s.peers.setMeta)
	cacheDone := make(chan struct{})
	if shared {
		close(cacheDone) // started by whoever made it
	} else {
		go func() { _ = c.Start(ctx); close(cacheDone) }()
	}
	if !c.WaitForCacheSync(ctx) {
		sim.stop()
		_ = sim.ml.Shutdown()
		return nil, fmt.Errorf("informers of %s did not sync", node)
	}
	recordsDone := make(chan struct{})
	go func() { sim.keeper.Run(ctx); close(recordsDone) }()
	go func() {
		sim.loop(ctx)
		<-recordsDone
		<-cacheDone
		close(sim.done)
	}()
	return sim, nil
}

// kill stops the speaker as a node's death does: memberlist stops without a leave,
// the record is no longer renewed (and stays), the informers stop.
func (sim *simSpeaker) kill() {
	sim.stop()
	_ = sim.ml.Shutdown()
	<-sim.done
}

// port is the memberlist port, for a restart on the same address.
func (sim *simSpeaker) port() int {
	var p int
	_, _ = fmt.Sscanf(sim.ml.Addr()[len("127.0.0.1:"):], "%d", &p)
	return p
}

// loop is Speaker.serve's loop: an observer runs a pass on every poke and membership
// change; a light speaker on a membership change at once, on record changes at most
// once a second. Both re-decide every 250 ms while degraded.
func (sim *simSpeaker) loop(ctx context.Context) {
	recheck := time.NewTicker(recheckDegraded)
	defer recheck.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last time.Time
	pending := false
	sim.pass(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sim.members.Events():
		case <-sim.trigger:
			if !sim.observer && time.Since(last) < time.Second {
				pending = true
				continue
			}
		case <-recheck.C:
			if sim.verdict.Mode == quorum.ModeQuorum {
				continue
			}
		case <-tick.C:
			if sim.observer || !pending {
				continue
			}
		}
		pending = false
		last = time.Now()
		sim.pass(ctx)
	}
}

// pass is runElection without announcements: membership, the quorum rule, the record,
// and for an observer the election.
func (sim *simSpeaker) pass(ctx context.Context) {
	s := sim.Speaker
	start := time.Now()
	live := s.members.Snapshot().Live
	s.noteMembership(live)
	verdict, recs := s.decide(ctx, live)
	s.verdict = verdict
	var owners map[string]int
	if sim.observer && !verdict.Mode.Silent() {
		in, err := s.inputs(ctx)
		if err != nil {
			s.log.Error(err, "reading the cache for an election")
			return
		}
		in.Members = verdict.Electors
		view, services, _ := BuildView(in)
		owners = countOwners(s.elector.Elect(view, services))
	}
	s.publishRecord(verdict, live, recs)
	took := time.Since(start)

	sim.mu.Lock()
	defer sim.mu.Unlock()
	sim.mode, sim.liveCount = verdict.Mode, len(live)
	if !sim.observer {
		return
	}
	sim.passes++
	sim.passTime += took
	if owners != nil {
		sim.owners = owners
	}
	if w := sim.watchFor; w != "" {
		if sim.detectAt.IsZero() && !s.live[w] {
			sim.detectAt = time.Now()
		}
		if sim.decidedAt.IsZero() && owners != nil && owners[w] == 0 && owners[""] == 0 {
			sim.decidedAt = time.Now()
		}
	}
}

// countOwners counts the IPs of each owner ("" for none).
func countOwners(ds []election.Decision) map[string]int {
	out := map[string]int{}
	for _, d := range ds {
		out[d.Owner]++
	}
	return out
}

// timeDeath starts timing the death of node, killed at.
func (sim *simSpeaker) timeDeath(node string, at time.Time) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	sim.watchFor, sim.watchAt, sim.detectAt, sim.decidedAt = node, at, time.Time{}, time.Time{}
}

// deathTimes returns how long after the kill memberlist dropped the node here and an
// election here gave its IPs to others; zero while not yet.
func (sim *simSpeaker) deathTimes() (detect, decided time.Duration) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if !sim.detectAt.IsZero() {
		detect = sim.detectAt.Sub(sim.watchAt)
	}
	if !sim.decidedAt.IsZero() {
		decided = sim.decidedAt.Sub(sim.watchAt)
	}
	return detect, decided
}

func (sim *simSpeaker) state() (quorum.Mode, int) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return sim.mode, sim.liveCount
}

func (sim *simSpeaker) ownersOf(node string) int {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return sim.owners[node]
}

func (sim *simSpeaker) passStats() (int, time.Duration) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return sim.passes, sim.passTime
}
