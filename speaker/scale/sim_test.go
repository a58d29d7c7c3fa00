package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/speaker"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// The scale benchmark (speakers_bench_test.go) runs many speakers' control loops in
// one process: simSpeaker is one of them, a speaker.Headless (real memberlist on a
// loopback port, the real records on their own informer of the records, the real
// quorum rule and record) and what the benchmark reads of its passes.
//
// An observer also caches what an election reads (Services, EndpointSlices, Nodes,
// advertisements, pools), and elects, with the incremental Elector, on every change, a
// record renewal included: what a speaker costs at scale. The other speakers (light)
// keep memberlist and their record as a speaker does, but re-decide on a membership
// change and at most once a second on record changes, and elect nothing: hundreds of
// speakers reading 10,000 Services each do not fit in one process on two cores. Claims
// (the IPs each speaker announces, exchanged over memberlist) are not published:
// elections place by hash alone.
type simSpeaker struct {
	*speaker.Headless
	node     string
	ml       *members.Members
	keeper   *records.Keeper
	observer bool
	cache    cache.Cache

	// Set by the passes (loop goroutine), read by the benchmark.
	mu        sync.Mutex
	passes    int           // an observer's election passes
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
	// two when switched on (splitter_test.go).
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
	cfg := speaker.DefaultConfig()
	cfg.NodeName = node
	cfg.Namespace = env.namespace
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
	if env.split != nil {
		t, err := env.split.transport(node, port)
		if err != nil {
			return nil, fmt.Errorf("memberlist transport of %s: %w", node, err)
		}
		cfg.Members.Transport = t
	}
	sim := &simSpeaker{node: node, observer: observer, cache: c, owners: map[string]int{}}
	h, err := speaker.StartHeadless(ctx, speaker.HeadlessOptions{Config: cfg, Cache: c, Shared: shared,
		API: env.api, Elect: observer, MinGap: time.Second, OnPass: sim.passed, Log: env.log})
	if err != nil {
		return nil, err
	}
	sim.Headless, sim.ml, sim.keeper = h, h.Members(), h.Records()
	return sim, nil
}

// kill stops the speaker as a node's death does (speaker.Headless.Kill).
func (sim *simSpeaker) kill() { sim.Kill() }

// port is the memberlist port, for a restart on the same address.
func (sim *simSpeaker) port() int {
	var p int
	_, _ = fmt.Sscanf(sim.ml.Addr()[len("127.0.0.1:"):], "%d", &p)
	return p
}

// passed notes what a pass decided: the mode and, for an observer, its time, the
// owners, and when a node whose death is timed stopped being live and owning IPs.
func (sim *simSpeaker) passed(r speaker.PassResult) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	sim.mode, sim.liveCount = r.Mode, len(r.Live)
	if !sim.observer {
		return
	}
	sim.passes++
	sim.passTime += r.Took
	if r.Owners != nil {
		sim.owners = r.Owners
	}
	if w := sim.watchFor; w != "" {
		if sim.detectAt.IsZero() && !slices.Contains(r.Live, w) {
			sim.detectAt = time.Now()
		}
		if sim.decidedAt.IsZero() && r.Owners != nil && r.Owners[w] == 0 && r.Owners[""] == 0 {
			sim.decidedAt = time.Now()
		}
	}
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
