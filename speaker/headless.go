package speaker

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// Headless is a speaker's control loop without its hands: memberlist, the records, the
// quorum rule, the record it publishes and, when it elects, the election; no ARP/NDP,
// proxier, Events, metrics or claims. The scale benchmarks (speaker/scale) run
// hundreds in one process to measure what the control loop costs at scale.
type Headless struct {
	s      *Speaker
	ml     *members.Members
	keeper *records.Keeper
	opts   HeadlessOptions
	stop   context.CancelFunc
	done   chan struct{}
}

// HeadlessOptions are a Headless speaker's parts and pace.
type HeadlessOptions struct {
	Config Config
	// Cache holds the records this speaker reads (records.CacheScope, or every record
	// when Shared) and, when it elects, what an election reads.
	Cache cache.Cache
	// Shared: the caller starts Cache, which several speakers read.
	Shared bool
	// API is the uncached client of the records' reads, writes and watches.
	API client.WithWatch
	// Elect: a pass elects the owners, and every change runs one at once. Otherwise a
	// pass decides the mode and publishes the record only; a membership change runs one
	// at once, other changes at most once every MinGap.
	Elect  bool
	MinGap time.Duration
	// OnPass is called after each pass, on the loop's goroutine.
	OnPass func(PassResult)
	Log    logr.Logger
}

// PassResult is what one headless pass decided.
type PassResult struct {
	Mode quorum.Mode
	Live []string
	// Owners counts the IPs of each owner ("" for none); nil when the pass elected
	// nothing.
	Owners map[string]int
	Took   time.Duration
}

// StartHeadless starts a headless speaker and returns once its informers are synced.
// It joins nobody: Members().Join does.
func StartHeadless(ctx context.Context, o HeadlessOptions) (*Headless, error) {
	cfg := o.Config
	node := cfg.NodeName
	cfg.Members.NodeName = node
	// Never run: no responder, no MAC in the record.
	l2, err := layer2.New(layer2.Config{Schedule: layer2.DefaultSchedule()})
	if err != nil {
		return nil, fmt.Errorf("announcer of %s: %w", node, err)
	}
	s := newSpeaker(cfg, o.Log, o.Cache)
	s.l2 = l2
	h := &Headless{s: s, opts: o, done: make(chan struct{})}
	ctx, h.stop = context.WithCancel(ctx)
	h.keeper = records.New(ctx, records.Options{Self: node, Namespace: cfg.Namespace, Config: cfg.Records,
		Cache: o.Cache, API: o.API, Writer: o.API, Watches: o.API, CacheHoldsRecords: o.Shared,
		PokeElection: s.pokeElection, PeerMACs: s.peers.set, Log: o.Log})
	s.records = h.keeper
	fail := func(err error) (*Headless, error) {
		h.stop()
		if h.ml != nil {
			_ = h.ml.Shutdown()
		}
		return nil, err
	}
	if o.Elect {
		if err := s.watch(ctx, o.Cache); err != nil {
			return fail(err)
		}
	}
	if err := h.keeper.WatchCache(ctx, o.Cache); err != nil {
		return fail(err)
	}
	if h.ml, err = members.Start(cfg.Members, o.Log, nil); err != nil {
		if t := cfg.Members.Transport; t != nil {
			_ = t.Shutdown()
		}
		return fail(fmt.Errorf("memberlist of %s: %w", node, err))
	}
	s.members = h.ml
	h.keeper.SetHeard(h.ml.IsLive)
	h.ml.OnMeta(s.peers.setMeta)
	cacheDone := make(chan struct{})
	if o.Shared {
		close(cacheDone)
	} else {
		go func() { _ = o.Cache.Start(ctx); close(cacheDone) }()
	}
	if !o.Cache.WaitForCacheSync(ctx) {
		return fail(fmt.Errorf("informers of %s did not sync", node))
	}
	recordsDone := make(chan struct{})
	go func() { h.keeper.Run(ctx); close(recordsDone) }()
	go func() {
		h.loop(ctx)
		<-recordsDone
		<-cacheDone
		close(h.done)
	}()
	return h, nil
}

// Node is the node this speaker stands for.
func (h *Headless) Node() string { return h.s.cfg.NodeName }

// Members is this speaker's memberlist.
func (h *Headless) Members() *members.Members { return h.ml }

// Records is this speaker's records.
func (h *Headless) Records() *records.Keeper { return h.keeper }

// Kill stops the speaker as a node's death does: memberlist stops without a Leave, the
// record is no longer renewed (and stays), the informers stop.
func (h *Headless) Kill() {
	h.stop()
	_ = h.ml.Shutdown()
	<-h.done
}

// loop is serve's loop at the pace HeadlessOptions set; every 250 ms while not in
// ModeQuorum, as serve.
func (h *Headless) loop(ctx context.Context) {
	s := h.s
	recheck := time.NewTicker(recheckDegraded)
	defer recheck.Stop()
	every := h.opts.MinGap
	if every <= 0 {
		every = time.Second // a speaker that elects passes on every change: the tick is idle
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last time.Time
	pending := false
	h.pass(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.members.Events():
		case <-s.trigger:
			if !h.opts.Elect && time.Since(last) < h.opts.MinGap {
				pending = true
				continue
			}
		case <-recheck.C:
			if s.decision.verdict.Mode == quorum.ModeQuorum {
				continue
			}
		case <-tick.C:
			if h.opts.Elect || !pending {
				continue
			}
		}
		pending = false
		last = time.Now()
		h.pass(ctx)
	}
}

// pass is runElection without the announcer and the claims: membership, the quorum
// rule, the record, and the election when it elects.
func (h *Headless) pass(ctx context.Context) {
	s := h.s
	start := time.Now()
	live := s.members.Snapshot().Live
	s.liveness.note(live, s.log)
	verdict, recs := s.decide(ctx, live)
	s.decision.verdict = verdict
	var owners map[string]int
	if h.opts.Elect && !verdict.Mode.Silent() {
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
	if h.opts.OnPass != nil {
		h.opts.OnPass(PassResult{Mode: verdict.Mode, Live: live, Owners: owners, Took: time.Since(start)})
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
