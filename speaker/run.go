package speaker

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/handover"
	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/records"
	"herald.dev/herald/speaker/vipstatus"
	"herald.dev/herald/speaker/withhold"
)

// parts are what Run holds by their types for their lifecycles; the loop reaches
// memberlist, the records and the announcer through the interfaces of seams.go.
type parts struct {
	mgr    manager.Manager
	keeper *records.Keeper
	l2     *layer2.Announcer
	ml     *members.Members
}

// Run runs the speaker until ctx ends, then leaves memberlist before it stops
// answering, so that peers take the IPs over at once.
func Run(ctx context.Context, restCfg *rest.Config, cfg Config, log logr.Logger) error {
	s, p, err := assemble(ctx, restCfg, cfg, log)
	if err != nil {
		return err
	}
	cfg = s.cfg

	// The manager (informers, metrics, probes) and the proxier start first and outlive
	// ctx: on a cluster without kube-proxy, the Service IPs the controller needs (to
	// create the memberlist Secret, say) exist only once some proxier programmed them,
	// so the proxier must not wait for memberlist. Its rules stay when the speaker
	// stops, as kube-proxy's do.
	mgr := startStage(ctx, p.mgr.Start)
	defer mgr.stop()
	proxier := startStage(ctx, func(ctx context.Context) error {
		go s.feedProxier(ctx, p.mgr.GetCache())
		return s.proxier.Run(ctx)
	})
	defer proxier.stop()
	// VIPStatus writes stop with the speaker: the next owner writes its own.
	go s.vips.Run(ctx, 2)

	// The previous speaker's forwardings go on; other chains it left go.
	if kept, err := s.handover.Reset(ctx); err != nil {
		log.Error(err, "removing the handover forwarding a previous speaker left")
	} else if len(kept) > 0 {
		log.Info("forwarding the flows of the handovers the previous speaker began", "ips", len(kept))
	}
	go s.handover.Run(ctx)
	if err := s.startMembers(ctx, p); err != nil {
		return err
	}
	// The responders also outlive ctx: on SIGTERM they keep answering until memberlist
	// has been left.
	responders := startStage(ctx, p.l2.Run)
	defer responders.stop()
	go s.withhold.Run(ctx)
	go s.keepClaimsCurrent(ctx)
	recordsStage := startStage(ctx, func(ctx context.Context) error { p.keeper.Run(ctx); return nil })
	defer recordsStage.stop()

	err = s.serve(ctx, p.mgr.GetCache())
	// The loop has ended: the claims are this goroutine's now.
	restart := cfg.RestartHold > 0
	s.saveClaims()

	// Graceful stop: peers learn we left and take over, then we stop answering. Our
	// record goes meanwhile, so that peers stop expecting us (in a two-node cluster the
	// survivor holds without a majority until it sees the record gone); not before the
	// Leave, which would make every failover wait for an API round trip.
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		_ = recordsStage.stop()
		if rerr := p.keeper.Remove(context.WithoutCancel(ctx)); rerr != nil {
			log.Error(rerr, "removing this speaker's record")
		}
	}()
	if lerr := p.ml.Leave(cfg.LeaveTimeout, restart); lerr != nil {
		log.Error(lerr, "leaving memberlist")
	}
	<-removed
	if l2err := responders.stop(); l2err != nil && err == nil {
		err = fmt.Errorf("layer 2: %w", l2err)
	}
	_ = p.ml.Shutdown()
	_ = proxier.stop()
	if merr := mgr.stop(); merr != nil && err == nil {
		err = merr
	}
	log.Info("speaker stopped")
	return err
}

// assemble builds the speaker and its parts and starts none of them.
func assemble(ctx context.Context, restCfg *rest.Config, cfg Config, log logr.Logger) (*Speaker, *parts, error) {
	exclude, err := cfg.validate()
	if err != nil {
		return nil, nil, err
	}
	cfg.Members.NodeName = cfg.NodeName
	cfg.Metrics.BindAddress = onNodeIP(cfg.Metrics.BindAddress, cfg.Members.BindAddr)
	cfg.ProbeAddr = onNodeIP(cfg.ProbeAddr, cfg.Members.BindAddr)
	metrics, err := cfg.Metrics.Options()
	if err != nil {
		return nil, nil, err
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
		return nil, nil, fmt.Errorf("creating manager: %w", err)
	}
	p := &parts{mgr: mgr}
	s := newSpeaker(cfg, log, mgr.GetCache())
	s.recorder = mgr.GetEventRecorder(reportingController)
	s.nodeEvents = newNodeEvents(mgr.GetClient(), mgr.GetCache(), cfg.NodeName, log)
	s.withhold = withhold.New(withhold.Config{Self: cfg.NodeName, Enabled: cfg.WithholdDeadEndpoints,
		BindAddr: cfg.Members.BindAddr, BindPort: cfg.Members.BindPort}, withhold.Callbacks{
		SetWithheld:    func(nodes map[string]bool) { s.proxier.SetWithheld(nodes) },
		LeftGracefully: func(node string) bool { return s.members.LeftGracefully(node) },
		Event:          s.nodeEvents.on,
		Changed:        s.pokeElection,
	}, log.WithName("withhold"))
	s.reports = newReporter(cfg.NodeName, mgr.GetCache(), s.recorder)
	s.vips = vipstatus.NewPublisher(cfg.NodeName, mgr.GetCache(), mgr.GetClient(), log.WithName("vipstatus"))
	recordsClient, err := client.NewWithWatch(restCfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return nil, nil, fmt.Errorf("records client: %w", err)
	}
	p.keeper = records.New(ctx, records.Options{
		Self: cfg.NodeName, Namespace: cfg.Namespace, Config: cfg.Records,
		Cache: mgr.GetCache(), API: mgr.GetAPIReader(), Writer: mgr.GetClient(), Watches: recordsClient,
		PokeElection: s.pokeElection, PeerMACs: s.peers.set,
		// Called by the records' Run, started once memberlist runs.
		KeysReport: func() string { return memberkey.Report(p.ml.Keys()) },
		Log:        log.WithName("records"),
	})
	s.records = p.keeper
	hc := handover.Config{Node: cfg.NodeName, Drain: cfg.HandoverDrain}
	if cfg.RestartHold > 0 {
		hc.StateDir = cfg.StateDir // the next speaker keeps the VIPs, and their forwarding
	}
	if s.handover, err = handover.NewForwarder(hc, log.WithName("handover"), s.handoverEnded); err != nil {
		log.Info("planned moves will break the connections open through the VIP", "error", err.Error())
	}
	if s.metrics, err = newMetrics(crmetrics.Registry, append(p.keeper.Collectors(), forwardingGauge(s.handover))...); err != nil {
		return nil, nil, err
	}
	if err := checkTokenBinding(ctx, restCfg, cfg.NodeName, s.metrics.tokenBound, log); err != nil {
		return nil, nil, err
	}
	if p.l2, err = layer2.New(layer2.Config{
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
	}); err != nil {
		return nil, nil, fmt.Errorf("layer 2: %w", err)
	}
	s.l2 = p.l2
	if err := s.watch(ctx, mgr.GetCache()); err != nil {
		return nil, nil, err
	}
	if err := s.vips.Watch(ctx, mgr.GetCache()); err != nil {
		return nil, nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, err
	}
	if err := mgr.AddReadyzCheck("speaker", s.readyz); err != nil {
		return nil, nil, err
	}
	if s.proxier, err = newProxier(ctx, mgr.GetAPIReader(), mgr.GetCache(), cfg, log.WithName("proxy")); err != nil {
		return nil, nil, err
	}
	return s, p, nil
}

// startMembers reads the memberlist key, starts memberlist and the key follower, and
// restores the claims the previous speaker of this node left, before any join.
func (s *Speaker) startMembers(ctx context.Context, p *parts) error {
	cfg, log := s.cfg, s.log // the key and the count stay memberlist's
	if err := loadKey(ctx, p.mgr.GetAPIReader(), &cfg, log); err != nil {
		return err
	}
	if err := cfg.Members.Validate(); err != nil {
		return fmt.Errorf("memberlist: %w", err)
	}
	if cfg.Members.SuspicionMult == 0 {
		cfg.Members.ExpectedMembers = s.countSpeakers(ctx, p.keeper)
		log.Info("memberlist's suspicion chosen for the speakers counted", "speakers", cfg.Members.ExpectedMembers,
			"suspicion", cfg.Members.Suspicion(), "gossip", cfg.Members.Gossip())
	}
	ml, err := members.Start(cfg.Members, log.WithName("memberlist"), crmetrics.Registry)
	if err != nil {
		return err
	}
	p.ml, s.members = ml, ml
	log.Info("memberlist started", "node", cfg.NodeName, "addr", ml.Addr())
	p.keeper.SetHeard(ml.IsLive)
	if cfg.KeyReread > 0 {
		keys := newKeyFollower(cfg.Members.ReadKeys, ml.SetKeys, ml.Keys, log.WithName("memberlist-keys"))
		keys.changed = p.keeper.RenewHeartbeat // reported at once, not at the next renewal
		if err := keys.register(crmetrics.Registry); err != nil {
			_ = ml.Shutdown()
			return err
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
		s.saveClaims()        // Load removed them: killed before its first change, this speaker still leaves them
		p.keeper.Restarting() // before its first write: peers started with it wait to hear it
	}
	return nil
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
