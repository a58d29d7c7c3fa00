package speaker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/proxy"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
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
	// stall carries layer 2's stall reports to the loop, stallSynced the end of the
	// sync with the peers that follows; stallState is the loop's (stall.go).
	stall       chan time.Duration
	stallSynced chan int
	stallState  stallState
	// proxyPoke asks the proxier's feeder for an Update; pokes coalesce.
	proxyPoke chan struct{}
	synced    atomic.Bool
	joined    atomic.Bool

	// elector remembers the last election so the next redoes only what changed
	// (loop goroutine only).
	elector election.Elector

	// Only the loop goroutine touches live, since, lostAt, counted, qstate and verdict.
	live   map[string]bool
	since  map[string]time.Time // when each live member last became live
	lostAt map[string]time.Time
	// counted are the IPs whose leader-change counter this node exports.
	counted map[netip.Addr]bool
	// qstate and verdict are the quorum rule's memory and its last decision;
	// decideAgainAt the last Verdict.DecideAgainAt a timer was set for.
	qstate        quorum.State
	verdict       quorum.Verdict
	decideAgainAt time.Time
	// bindIface is the interface memberlist's address is on ("" when unknown), and
	// bindLookup when it was last looked up.
	bindIface  string
	bindLookup time.Time

	mu sync.Mutex
	// takeovers are takeovers whose first gratuitous frame has not gone out yet.
	takeovers map[string]pendingTakeover
	// ownedServices are the Services of each IP this node announces.
	ownedServices map[netip.Addr][]string

	// withhold keeps the endpoints of nodes the speakers know down out of the
	// proxier's rules, and probes the hosts of vanished and restarting speakers.
	withhold *withhold.Withholder
	// book holds this speaker's claims and what it knows of its peers' (loop
	// goroutine only).
	book *claims.Book
	// servedOnce: an election ran that was not silent (until then, a silent speaker
	// keeps publishing the claims it restored); restartWake is when the time kept for
	// a restarting peer next ends (restart.go).
	servedOnce  bool
	restartWake time.Time

	// peers are the other speakers' MACs (from their records): their claims on the
	// wire are a split brain, not an address conflict.
	peers      peerMACs
	claimLog   sync.Mutex
	claimLogAt map[netip.Addr]time.Time
	// conflictEvents limits the address conflict Events per IP.
	conflictEvents *eventLimit
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

// Run runs the speaker until ctx ends, then leaves memberlist before it stops
// answering, so that peers take the IPs over at once.
func Run(ctx context.Context, restCfg *rest.Config, cfg Config, log logr.Logger) error {
	exclude, err := cfg.validate()
	if err != nil {
		return err
	}
	cfg.Members.NodeName = cfg.NodeName

	cfg.Metrics.BindAddress = onNodeIP(cfg.Metrics.BindAddress, cfg.Members.BindAddr)
	cfg.ProbeAddr = onNodeIP(cfg.ProbeAddr, cfg.Members.BindAddr)
	metrics, err := cfg.Metrics.Options()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metrics,
		HealthProbeBindAddress: cfg.ProbeAddr,
		Logger:                 log,
		Cache: cache.Options{
			ByObject: map[client.Object]cache.ByObject{
				&heraldv1.IPAddressPool{}:   {Namespaces: map[string]cache.Config{cfg.Namespace: {}}},
				&heraldv1.L2Advertisement{}: {Namespaces: map[string]cache.Config{cfg.Namespace: {}}},
				&coordinationv1.Lease{}:     records.CacheScope(cfg.Namespace, cfg.NodeName),
			},
			// Nothing reads managedFields; a Node's are kilobytes, a record's grow
			// with its writers.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	s := &Speaker{
		cfg:            cfg,
		log:            log,
		cache:          mgr.GetCache(),
		recorder:       mgr.GetEventRecorder(reportingController),
		nodeEvents:     newNodeEvents(mgr.GetClient(), cfg.NodeName, log),
		tracker:        NewTracker(cfg.NodeName),
		trigger:        make(chan struct{}, 1),
		stall:          make(chan time.Duration, 1),
		stallSynced:    make(chan int),
		proxyPoke:      make(chan struct{}, 1),
		live:           map[string]bool{},
		since:          map[string]time.Time{},
		lostAt:         map[string]time.Time{},
		counted:        map[netip.Addr]bool{},
		takeovers:      map[string]pendingTakeover{},
		ownedServices:  map[netip.Addr][]string{},
		claimLogAt:     map[netip.Addr]time.Time{},
		conflictEvents: newEventLimit(conflictEventEvery),
	}
	s.withhold = withhold.New(withhold.Config{Self: cfg.NodeName, Enabled: cfg.WithholdDeadEndpoints,
		BindAddr: cfg.Members.BindAddr, BindPort: cfg.Members.BindPort}, withhold.Callbacks{
		SetWithheld:    func(nodes map[string]bool) { s.proxier.SetWithheld(nodes) },
		LeftGracefully: func(node string) bool { return s.members.LeftGracefully(node) },
		Event:          s.eventOn,
		Changed:        s.pokeElection,
	}, log.WithName("withhold"))
	s.book = claims.NewBook(cfg.NodeName, cfg.Quorum.JoinWait, func(b []byte) { s.members.Publish(b) }, s.pokeElection, log.WithName("claims"))
	s.reports = newReporter(cfg.NodeName, mgr.GetCache(), s.recorder)
	s.vips = vipstatus.NewPublisher(cfg.NodeName, mgr.GetCache(), mgr.GetClient(), log.WithName("vipstatus"))
	recordsClient, err := client.NewWithWatch(restCfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return fmt.Errorf("records client: %w", err)
	}
	// Run holds memberlist, the records and the announcer by their types for their
	// lifecycles; the loop reaches them through the interfaces of seams.go.
	var ml *members.Members
	keeper := records.New(ctx, records.Options{
		Self: cfg.NodeName, Namespace: cfg.Namespace, Config: cfg.Records,
		Cache: mgr.GetCache(), API: mgr.GetAPIReader(), Writer: mgr.GetClient(), Watches: recordsClient,
		PokeElection: s.pokeElection, PeerMACs: s.peers.set,
		// Called by the records' Run, started once memberlist runs.
		KeysReport: func() string { return memberkey.Report(ml.Keys()) },
		Log:        log.WithName("records"),
	})
	s.records = keeper
	if s.metrics, err = newMetrics(crmetrics.Registry, keeper.Collectors()...); err != nil {
		return err
	}
	if err := checkTokenBinding(ctx, restCfg, cfg.NodeName, s.metrics.tokenBound, log); err != nil {
		return err
	}
	l2cfg := layer2.Config{
		ExcludeInterfaces: exclude,
		Schedule:          cfg.Schedule,
		Rescan:            cfg.Rescan,
		Registerer:        crmetrics.Registry,
		Log:               log.WithName("layer2"),
		OnAnnounce:        s.announced,
		WatchLinks:        true,
		Peer:              func(mac net.HardwareAddr) bool { return s.peers.has(cfg.NodeName, mac) },
		OnSighting:        s.sighted,
		OnConflict:        s.conflicted,
		OnConflictCleared: s.conflicted,
		DefendInterval:    layer2.DefaultDefendInterval,
		ProbeWait:         layer2.DefaultProbeWait,
		ReplyRate:         cfg.ReplyRate,
		ReplyBurst:        cfg.ReplyBurst,
		StallAfter:        cfg.StallAfter,
		OnStall:           s.onStall,
	}
	l2, err := layer2.New(l2cfg)
	if err != nil {
		return fmt.Errorf("layer 2: %w", err)
	}
	s.l2 = l2
	if err := s.watch(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := s.vips.Watch(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("speaker", s.readyz); err != nil {
		return err
	}
	if s.proxier, err = newProxier(ctx, mgr.GetAPIReader(), mgr.GetCache(), cfg, log.WithName("proxy")); err != nil {
		return err
	}

	// The manager (informers, metrics, probes) and the proxier start first and outlive
	// ctx: on a cluster without kube-proxy, the Service IPs the controller needs (to
	// create the memberlist Secret, say) exist only once some proxier programmed them,
	// so the proxier must not wait for memberlist. Its rules stay when the speaker
	// stops, as kube-proxy's do.
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	proxyDone := make(chan error, 1)
	go func() { proxyDone <- s.proxier.Run(mgrCtx) }()
	go s.feedProxier(mgrCtx, mgr.GetCache())
	// VIPStatus writes stop with the speaker: the next owner writes its own.
	go s.vips.Run(ctx, 2)
	stopEarly := func(err error) error {
		stopMgr()
		<-proxyDone
		<-mgrDone
		return err
	}

	if err := loadKey(ctx, mgr.GetAPIReader(), &cfg, log); err != nil {
		return stopEarly(err)
	}
	if err := cfg.Members.Validate(); err != nil {
		return stopEarly(fmt.Errorf("memberlist: %w", err))
	}
	if cfg.Members.SuspicionMult == 0 {
		cfg.Members.ExpectedMembers = s.countSpeakers(ctx, keeper)
		log.Info("memberlist's suspicion chosen for the speakers counted", "speakers", cfg.Members.ExpectedMembers,
			"suspicion", cfg.Members.Suspicion(), "gossip", cfg.Members.Gossip())
	}
	if ml, err = members.Start(cfg.Members, log.WithName("memberlist"), crmetrics.Registry); err != nil {
		return stopEarly(err)
	}
	s.members = ml
	log.Info("memberlist started", "node", cfg.NodeName, "addr", ml.Addr())
	keeper.SetHeard(ml.IsLive)
	if cfg.KeyReread > 0 {
		keys := newKeyFollower(cfg.Members.ReadKeys, ml.SetKeys, ml.Keys, log.WithName("memberlist-keys"))
		keys.changed = keeper.RenewHeartbeat // reported at once, not at the next renewal
		if err := keys.register(crmetrics.Registry); err != nil {
			_ = ml.Shutdown()
			return stopEarly(err)
		}
		go keys.run(ctx, cfg.KeyReread)
	}
	ml.OnMeta(s.peers.setMeta)
	// The claims of the speaker this one replaces go out before the join: the peers
	// holding its IPs see them as this node's as soon as it is back.
	if restored, err := claims.Load(cfg.StateDir, cfg.NodeName, cfg.RestartHold, time.Now()); err != nil {
		log.Error(err, "reading the claims the previous speaker left")
	} else if len(restored) > 0 {
		log.Info("taking back the IPs the previous speaker of this node announced", "ips", len(restored))
		s.book.Restore(restored)
	}

	// The responders also outlive ctx: on SIGTERM they keep answering until memberlist
	// has been left.
	l2Ctx, stopL2 := context.WithCancel(context.WithoutCancel(ctx))
	defer stopL2()
	l2Done := make(chan error, 1)
	go func() { l2Done <- l2.Run(l2Ctx) }()

	go s.withhold.Run(ctx)

	recordsCtx, stopRecords := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecords()
	recordsDone := make(chan struct{})
	go func() { keeper.Run(recordsCtx); close(recordsDone) }()

	err = s.serve(ctx, mgr.GetCache())
	// The loop has ended: the claims are this goroutine's now.
	restart := cfg.RestartHold > 0
	if restart {
		if serr := claims.Save(cfg.StateDir, cfg.NodeName, s.book.Own()); serr != nil {
			log.Error(serr, "keeping this speaker's IPs for the next one")
		}
	}

	// Graceful stop: peers learn we left and take over, then we stop answering. Our
	// record goes meanwhile, so that peers stop expecting us (in a two-node cluster the
	// survivor holds without a majority until it sees the record gone); not before the
	// Leave, which would make every failover wait for an API round trip.
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		stopRecords()
		<-recordsDone
		if rerr := keeper.Remove(context.WithoutCancel(ctx)); rerr != nil {
			log.Error(rerr, "removing this speaker's record")
		}
	}()
	if lerr := ml.Leave(cfg.LeaveTimeout, restart); lerr != nil {
		log.Error(lerr, "leaving memberlist")
	}
	<-removed
	stopL2()
	if l2err := <-l2Done; l2err != nil && err == nil {
		err = fmt.Errorf("layer 2: %w", l2err)
	}
	_ = ml.Shutdown()
	stopMgr()
	<-proxyDone
	if merr := <-mgrDone; merr != nil && err == nil {
		err = merr
	}
	log.Info("speaker stopped")
	return err
}

// countSpeakers is how many speakers the cluster holds (records.Keeper.CountSpeakers),
// this one alone when they cannot be counted.
func (s *Speaker) countSpeakers(ctx context.Context, keeper *records.Keeper) int {
	n, err := keeper.CountSpeakers(ctx)
	if err != nil {
		s.log.Error(err, "counting the speakers for memberlist's suspicion timeout; counting this one alone")
	}
	return n
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
		case gap := <-s.stall:
			s.stalled(ctx, gap)
		case reached := <-s.stallSynced:
			s.resumeAfterStall(ctx, reached)
		case <-recheck.C:
			// Hold ends with time, and a failed read of the records is retried; a
			// link losing its carrier is noticed here too.
			if s.verdict.Mode != quorum.ModeQuorum || s.linkDown() {
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
