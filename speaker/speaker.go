package speaker

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/proxy"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/handover"
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
	// handover forwards the flows of IPs taken from live peers to them for a while.
	handover *handover.Forwarder
}

// pendingTakeover is what the announcement of a takeover needs to report it.
type pendingTakeover struct {
	Takeover
	lostAt   time.Time // when the previous owner left memberlist; zero if it did not
	restored bool      // the node's own before its speaker restarted: no move
	// unconfirmed: the IP waits for its previous owner, lost without a goodbye or live
	// and giving it up (a planned move), to stop answering (layer2.WaitForPeers). It is
	// claimed only once it goes out: a loss may be a rumour, and a claim would make the
	// owner, alive all along, give the IP up to this node (publishClaims).
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
	s.handover, _ = handover.NewForwarder(handover.Config{Node: cfg.NodeName}, log, s.handoverEnded) // off; assemble sets the real one
	s.book = claims.NewBook(cfg.NodeName, cfg.Quorum.JoinWait, func(b []byte) { s.members.Publish(b) }, s.pokeElection, log.WithName("claims"))
	return s
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

// pokeElection asks the loop for an election.
func (s *Speaker) pokeElection() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// decision is the quorum rule's memory and its last verdict; againAt is the last
// Verdict.DecideAgainAt a timer was set for.
type decision struct {
	state   quorum.State
	verdict quorum.Verdict
	againAt time.Time
}

// announcing is what the announcer's callbacks (other goroutines) read of the
// loop's decisions.
type announcing struct {
	mu sync.Mutex
	// takeovers are takeovers whose first gratuitous frame has not gone out yet.
	takeovers map[string]pendingTakeover
	// services are the Services of each IP this node announces.
	services map[netip.Addr][]string
}

// sightings bounds the log lines about peers answering for this node's IPs, and the
// address conflict Events per IP (layer2's goroutines).
type sightings struct {
	mu       sync.Mutex
	loggedAt map[netip.Addr]time.Time
	events   *eventLimit
}

// bindLink is the interface memberlist's address is on ("" when unknown), and when it
// was last looked up.
type bindLink struct {
	iface    string
	lookedUp time.Time
}

// stallState carries layer 2's stall reports to the loop and the end of the sync with
// the peers that follows, and is the loop's memory of the stalls it is recovering from.
type stallState struct {
	reports chan time.Duration
	synced  chan int
	syncing bool          // a sync with the peers runs
	again   bool          // another stall came during it: sync again before resuming
	longest time.Duration // the longest stall since the last resume
}
