package speaker

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/proxy"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/vipstatus"
	"herald.dev/herald/speaker/withhold"
)

// +kubebuilder:rbac:groups="",resources=services;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=herald.dev,resources=ipaddresspools;l2advertisements,verbs=get;list;watch,namespace=herald-system
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=herald-system,resourceNames=herald-memberlist

// The HTTPS metrics endpoint (--metrics-secure, internal/metricsserve) asks the API
// server who a scraper is and whether it may get /metrics:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Speaker is `herald speaker`: it keeps memberlist membership, elects the owner of
// every LoadBalancer IP on each change, and makes this node answer ARP/NDP for the
// IPs it owns.
type Speaker struct {
	cfg      Config
	log      logr.Logger
	cache    client.Reader
	members  gossip
	l2       announcer
	recorder events.EventRecorder
	// nodeEvents writes the Events on withheld and restored nodes.
	nodeEvents nodeEvents
	metrics    *metrics
	tracker    *Tracker
	reports    *reporter
	vips       *vipstatus.Publisher
	records    recordKeeper
	proxier    *proxy.Proxier

	trigger chan struct{}
	// proxyPoke asks the proxier's feeder for an Update; pokes coalesce.
	proxyPoke chan struct{}
	synced    atomic.Bool
	joined    atomic.Bool

	// The loop goroutine's memory between passes.
	liveness liveness
	decision decision
	stalls   stallState
	bind     bindLink
	// elector remembers the last election so the next redoes only what changed.
	elector election.Elector
	// counted are the IPs whose leader-change counter this node exports.
	counted map[netip.Addr]bool
	// book holds this speaker's claims and what it knows of its peers'.
	book *claims.Book
	// servedOnce: an election ran that was not silent (until then, a silent speaker
	// keeps publishing the claims it restored); restartWake is when the time kept for
	// a restarting peer next ends (restart.go).
	servedOnce  bool
	restartWake time.Time

	// What the announcer's callbacks read of the loop's decisions (apply.go).
	announcing announcing
	// withhold keeps the endpoints of nodes the speakers know down out of the
	// proxier's rules, and probes the hosts of vanished and restarting speakers.
	withhold *withhold.Withholder
	// peers are the other speakers' MACs (from their records): their claims on the
	// wire are a split brain, not an address conflict.
	peers     peerMACs
	sightings sightings
}

// pendingTakeover is what the announcement of a takeover needs to report it.
type pendingTakeover struct {
	Takeover
	lostAt   time.Time // when the previous owner left memberlist; zero if it did not
	restored bool      // the node's own before its speaker restarted: no move
	// unconfirmed: the IP waits for its previous owner, lost without a goodbye, to stop
	// answering (layer2.WaitForPeers). It is claimed only once it goes out: the loss
	// may be a rumour, and a claim would make the owner, alive all along, give the IP
	// up to this node (publishClaims).
	unconfirmed bool
}

// newSpeaker is a speaker with its loop's memory made; its parts are set by Run
// (assemble) or StartHeadless.
func newSpeaker(cfg Config, log logr.Logger, c client.Reader) *Speaker {
	s := &Speaker{
		cfg:        cfg,
		log:        log,
		cache:      c,
		tracker:    NewTracker(cfg.NodeName),
		trigger:    make(chan struct{}, 1),
		proxyPoke:  make(chan struct{}, 1),
		liveness:   liveness{live: map[string]bool{}, since: map[string]time.Time{}, lostAt: map[string]time.Time{}},
		stalls:     stallState{reports: make(chan time.Duration, 1), synced: make(chan int)},
		counted:    map[netip.Addr]bool{},
		announcing: announcing{takeovers: map[string]pendingTakeover{}, services: map[netip.Addr][]string{}},
		sightings:  sightings{loggedAt: map[netip.Addr]time.Time{}, events: newEventLimit(conflictEventEvery)},
	}
	s.book = claims.NewBook(cfg.NodeName, cfg.Quorum.JoinWait, func(b []byte) { s.members.Publish(b) }, s.pokeElection, log.WithName("claims"))
	return s
}

// serve waits for the informers, joins the other speakers, then re-elects on every
// change until ctx ends.
func (s *Speaker) serve(ctx context.Context, c cache.Cache) error {
	if !c.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	s.synced.Store(true)
	// Join before the first election: alone, this node would elect itself for every IP.
	s.join(ctx)
	s.joined.Store(true)
	s.poke()

	joinTick := time.NewTicker(s.cfg.JoinInterval)
	defer joinTick.Stop()
	recheck := time.NewTicker(recheckDegraded)
	defer recheck.Stop()
	joinDone := make(chan struct{}, 1)
	joinDone <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.trigger:
			s.runElection(ctx)
		case <-s.members.Events():
			s.runElection(ctx)
		case gap := <-s.stalls.reports:
			s.stalled(ctx, gap)
		case reached := <-s.stalls.synced:
			s.resumeAfterStall(ctx, reached)
		case <-recheck.C:
			// Hold ends with time, and a failed read of the records is retried; a
			// link losing its carrier is noticed here too.
			if s.decision.verdict.Mode != quorum.ModeQuorum || s.linkDown() {
				s.runElection(ctx)
			}
		case <-joinTick.C:
			// Joins to unreachable peers block up to the TCP timeout: never in the loop.
			select {
			case <-joinDone:
				go func() { s.join(ctx); joinDone <- struct{}{} }()
			default:
			}
		}
	}
}

func (s *Speaker) readyz(*http.Request) error {
	switch {
	case !s.synced.Load():
		return fmt.Errorf("Services, Nodes and advertisements not loaded yet")
	case !s.joined.Load():
		return fmt.Errorf("memberlist not joined yet")
	case !s.l2.Ready():
		return fmt.Errorf("ARP/NDP responders not up yet")
	}
	// A proxier turned off (--proxy=none, or kube-proxy runs here) does not hold
	// readiness back; one that is on must have programmed the Services once.
	if st := s.proxier.Status(); st.Disabled == "" && !st.Synced {
		if st.LastError != "" {
			return fmt.Errorf("service proxy not synced yet: %s", st.LastError)
		}
		return fmt.Errorf("service proxy not synced yet")
	}
	return nil
}

// poke asks the loop for an election and the proxier's feeder for an Update; pokes
// coalesce.
func (s *Speaker) poke() {
	s.pokeElection()
	s.pokeProxier()
}

// pokeProxier asks the proxier's feeder for an Update.
func (s *Speaker) pokeProxier() {
	select {
	case s.proxyPoke <- struct{}{}:
	default:
	}
}

// electionSees says whether a Node update changes what the election reads of it
// (nodeView: its labels and NetworkUnavailable). A kubelet's status updates do not:
// at 1,000 nodes they would run an election every few hundred milliseconds.
func electionSees(old, cur any) bool {
	o, ok1 := old.(*corev1.Node)
	c, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(nodeView(o), nodeView(c))
}

// pokeElection asks the loop for an election.
func (s *Speaker) pokeElection() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// watch makes every change of an object the election reads poke the loop.
func (s *Speaker) watch(ctx context.Context, c cache.Cache) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	for _, obj := range []client.Object{
		&corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Node{},
		&heraldv1.L2Advertisement{}, &heraldv1.IPAddressPool{},
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		h := h
		if _, ok := obj.(*corev1.Node); ok {
			h.UpdateFunc = func(old, cur any) {
				if electionSees(old, cur) {
					s.poke()
				} else {
					s.pokeProxier()
				}
			}
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	return nil
}
