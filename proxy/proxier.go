package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/nftdirect"
	"herald.dev/herald/proxy/runner"
)

// Proxier programs this node's iptables or nftables as kube-proxy's iptables or
// nftables mode would, from the Services and EndpointSlices handed to Update. Run owns the sync loop; Update and
// Status may be called from any goroutine.
type Proxier struct {
	cfg      Config
	settings settings
	log      logr.Logger
	metrics  *metrics
	families []*family
	conntrck *runner.Conntrack // nil without the conntrack binary
	nft      *runner.NFT       // nil without the nft binary
	health   *healthServers
	healthz  *healthzServer // nil with --healthz-bind-address off
	now      func() time.Time
	// checked: kube-proxy's canary was looked for (Run's goroutine only).
	checked bool
	// netlink is the nf_tables socket of partial syncs in nftables mode, opened on
	// first use and after an error (Run's goroutine only).
	netlink *nftdirect.Conn

	// wake is poked by Update; pokes coalesce.
	wake chan struct{}

	mu      sync.Mutex
	tracker *tracker
	current *state // latest converted state; nil before the first Update
	// triggers are the change times of EndpointSlices not yet programmed.
	triggers map[model.ServiceName][]time.Time
	// pending holds, per family, when the oldest change it has not programmed arrived
	// (absent: none); lastUpdated, when its last sync succeeded or Run started. They
	// are the proxier's health (proxyhealth.go).
	pending     map[model.Family]time.Time
	lastUpdated map[model.Family]time.Time
	status      Status
}

// Status is the proxier's state for readiness details and logs.
type Status struct {
	Mode Mode
	// Disabled says why the proxier is off ("" while it is on): --proxy=none, or
	// kube-proxy programming this node.
	Disabled string
	// Synced is true once every family applied the Services of an Update.
	Synced bool
	// LastSync is when the last successful sync (all families) ended.
	LastSync time.Time
	// LastError is the last sync error, cleared by a successful sync.
	LastError string
	// MissingFamilies says, one sentence each, which families of the node IPs are not
	// programmed because the host lacks their tools or kernel support (a dual-stack
	// node without ip6tables, say). Empty when every family of the node is programmed.
	MissingFamilies []string
}

// Reasons in herald_proxy_disabled{reason}.
const (
	disabledFlag      = "flag"
	disabledKubeProxy = "kube-proxy"
)

// New checks cfg and finds the iptables (or nft) binaries of the node's families. With --proxy
// none it returns a Proxier that does nothing but say so.
func New(cfg Config) (*Proxier, error) {
	s, err := cfg.parse(true)
	if err != nil {
		return nil, fmt.Errorf("proxier config: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	p := &Proxier{
		cfg: cfg, settings: s, log: cfg.Log, metrics: m, now: time.Now,
		wake:     make(chan struct{}, 1),
		tracker:  newTracker(),
		triggers: map[model.ServiceName][]time.Time{},
		pending:  map[model.Family]time.Time{}, lastUpdated: map[model.Family]time.Time{},
		status: Status{Mode: cfg.Mode},
	}
	if cfg.Mode == ModeNone {
		p.disable(disabledFlag, "--proxy=none: the service proxy is off")
		return p, nil
	}
	ts := toolset{mode: cfg.Mode, backend: cfg.Backend}
	host, err := probeHost(ts, cfg.InNetNS)
	if err != nil {
		return nil, fmt.Errorf("proxier: %w", err)
	}
	plan, err := planFamilies(cfg.NodeIPs, ts, host)
	if err != nil {
		return nil, fmt.Errorf("proxier: %w", err)
	}
	for _, f := range plan.program {
		fam, err := p.newFamily(f, host)
		if err != nil {
			return nil, fmt.Errorf("proxier: %w", err)
		}
		p.families = append(p.families, fam)
		m.families.WithLabelValues(f.String()).Set(1)
	}
	msg, kv := plan.summary()
	p.log.Info(msg, kv...)
	for _, f := range plan.degraded {
		p.status.MissingFamilies = append(p.status.MissingFamilies,
			fmt.Sprintf("the node has an %s address but its Services get no %s rules: %s", f, f, plan.skipped[f]))
	}
	if p.conntrck, err = runner.NewConntrack(cfg.InNetNS); err != nil {
		p.log.Info("stale UDP flows will not be deleted after endpoint changes", "reason", err.Error())
	}
	if p.nft, err = runner.NewNFT(cfg.InNetNS); err != nil {
		p.log.Info("cannot tell whether kube-proxy runs here in nftables mode", "reason", err.Error())
	}
	p.health = newHealthServers(cfg.InNetNS, p.log.WithName("healthcheck"), p.healthy)
	if s.healthzAddr != "" {
		p.healthz = newHealthzServer(s.healthzAddr, cfg.InNetNS, p.log.WithName("healthz"), p.healthzMux())
	}
	return p, nil
}

// Update hands over the current Services and EndpointSlices of every namespace, as the
// informer cache holds them; the objects are read, never changed. Only what changed
// since the previous call is converted, and a sync is requested when anything did.
// Syncing starts with the first call, which must therefore come after the caches
// synced. Update never waits for iptables.
func (p *Proxier) Update(services []*corev1.Service, slices []*discoveryv1.EndpointSlice) {
	if p.disabled() {
		return
	}
	now := p.now()
	p.mu.Lock()
	st, ch := p.tracker.update(now, services, slices)
	if !ch.any {
		p.mu.Unlock()
		return
	}
	p.current = st
	if len(p.tracker.withheld) > 0 {
		p.noteWithheld()
	}
	for name, ts := range ch.triggers {
		p.triggers[name] = append(p.triggers[name], ts...)
	}
	for _, f := range p.families {
		if _, ok := p.pending[f.family]; !ok {
			p.pending[f.family] = now
		}
	}
	p.mu.Unlock()
	for _, pr := range ch.problems {
		p.log.Info("skipping what the proxier cannot express", "problem", pr.Error())
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// SetWithheld withholds the endpoints on the nodes of the map, until the next call,
// from every Service this node proxies: they get no new connection (as if not ready).
// For a node whose value is true (unreachable) the flows this node had DNATed to them
// are cleared after the sync too, so that clients of a dead node's pods see a reset at
// once instead of a hang. The speaker calls it with the nodes it knows dead
// (speaker/deadnodes), long before the API server marks them not ready.
func (p *Proxier) SetWithheld(nodes map[string]bool) {
	if p.disabled() {
		return
	}
	now := p.now()
	p.mu.Lock()
	same := maps.Equal(p.tracker.withheld, nodes)
	st, changed := p.tracker.setWithheld(nodes)
	if changed {
		p.current = st
		for _, f := range p.families {
			if _, ok := p.pending[f.family]; !ok {
				p.pending[f.family] = now
			}
		}
	}
	if !same {
		p.noteWithheld()
	}
	p.mu.Unlock()
	if !changed {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// noteWithheld exports herald_proxy_endpoints_withheld for the tracker's withheld
// nodes. Called with p.mu held after the tracker changed.
func (p *Proxier) noteWithheld() {
	counts := p.tracker.withheldCounts()
	p.metrics.withheld.Reset()
	for n, c := range counts {
		p.metrics.withheld.WithLabelValues(n).Set(float64(c))
	}
}

// Status returns the proxier's state.
func (p *Proxier) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// healthy is serviceProxyHealthy of the health check servers, kube-proxy's rule: on,
// and no change waiting for its sync longer than HealthTimeout.
func (p *Proxier) healthy() bool {
	return !p.disabled() && p.proxyHealth().Healthy
}

// proxyHealth is the proxier's health now (assessHealth).
func (p *Proxier) proxyHealth() proxyHealth {
	p.mu.Lock()
	times := make(map[model.Family]familyTimes, len(p.lastUpdated))
	for f, t := range p.lastUpdated {
		times[f] = familyTimes{lastUpdated: t, pendingSince: p.pending[f]}
	}
	p.mu.Unlock()
	return assessHealth(p.now(), p.cfg.HealthTimeout, times)
}

// disable turns the proxier off for good and says so once.
func (p *Proxier) disable(reason, msg string) {
	p.mu.Lock()
	p.status.Disabled = msg
	p.mu.Unlock()
	p.metrics.disabled.WithLabelValues(reason).Set(1)
	p.metrics.families.Reset()
	for _, f := range []model.Family{model.IPv4, model.IPv6} {
		p.metrics.families.WithLabelValues(f.String()).Set(0)
	}
	p.log.Info("service proxy disabled: "+msg, "reason", reason)
	if reason == disabledKubeProxy {
		p.removeNFTTables()
	}
	if p.health != nil {
		p.health.closeAll()
	}
	if p.healthz != nil {
		p.healthz.close() // the port is kube-proxy's where kube-proxy runs
	}
}

func (p *Proxier) disabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status.Disabled != ""
}

// syncBurst syncs may run back to back after a quiet spell (kube-proxy's burstSyncs).
const syncBurst = 2

// Run syncs until ctx ends: the first sync (full) after the first Update, then one per
// MinSyncPeriod on average while changes come (two back to back after a quiet spell),
// a full one after an error (retried with backoff), when a canary disappears, and
// every SyncPeriod. Before writing anything it
// looks for kube-proxy (its canary chain, its nftables tables); if that is found, at
// start or later, the proxier turns off and Run just waits. Run returns nil when ctx ends (its signature fits
// controller-runtime's manager.RunnableFunc).
func (p *Proxier) Run(ctx context.Context) error {
	if p.disabled() {
		<-ctx.Done()
		return nil
	}
	defer p.health.closeAll()
	defer p.closeNetlink()
	if err := p.checkKubeProxy(ctx); err != nil && !errors.Is(err, errDisabled) {
		p.log.Error(err, "cannot tell whether kube-proxy programs this node; asking again before the first sync")
	}
	// Healthy from the start, so that a proxier whose syncs never succeed still
	// reports when it began (kube-proxy's SyncLoop does the same).
	p.mu.Lock()
	for _, f := range p.families {
		p.lastUpdated[f.family] = p.now()
	}
	p.mu.Unlock()
	if p.healthz != nil && !p.disabled() {
		go p.healthz.run()
		defer p.healthz.close()
	}

	sched := schedule{minInterval: p.cfg.MinSyncPeriod, burst: syncBurst}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	canary := time.NewTicker(p.cfg.CanaryPeriod)
	defer canary.Stop()
	failures := 0
	for !p.disabled() {
		if wait, ok := sched.next(p.now()); ok {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
			sched.request(p.now())
			continue
		case <-canary.C:
			if p.checkCanaries(ctx) {
				sched.request(p.now())
			}
			continue
		case <-timer.C:
		}
		if wait, ok := sched.next(p.now()); !ok || wait > 0 {
			continue // the timer fired for an older due time
		}
		start := p.now()
		sched.start(start)
		err := p.syncAll(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errNoState), errors.Is(err, errDisabled):
			// Nothing to program before the first Update (it will poke), or nothing
			// to program ever.
		case err != nil:
			failures++
			delay := retryDelay(failures, p.cfg.MinSyncPeriod)
			p.log.Error(err, "sync failed; retrying with a full sync", "in", delay.String())
			sched.request(start.Add(delay))
		default:
			failures = 0
		}
		// The periodic full resync: ask for a sync when the oldest full sync expires.
		if next, ok := p.nextFullSync(); ok {
			sched.request(next)
		}
	}
	<-ctx.Done()
	return nil
}

// errDisabled: the proxier turned off.
var errDisabled = errors.New("service proxy disabled")

// checkKubeProxy looks for kube-proxy (its canary chain, its nftables tables) until
// one look succeeded, and turns the proxier off if it is there. It returns errDisabled
// when off.
func (p *Proxier) checkKubeProxy(ctx context.Context) error {
	if p.disabled() {
		return errDisabled
	}
	if p.checked {
		return nil
	}
	why, err := p.kubeProxyPresent(ctx)
	if err != nil {
		return fmt.Errorf("looking for kube-proxy: %w", err)
	}
	p.checked = true
	if why != "" {
		p.disable(disabledKubeProxy, why)
		return errDisabled
	}
	return nil
}

// nodeAddrs are the local addresses NodePorts and health checks answer on when
// --nodeport-addresses restricts them; nil means all.
func (p *Proxier) nodeAddrs() ([]netip.Addr, error) {
	if len(p.settings.nodePortAddresses) == 0 {
		return nil, nil
	}
	all, err := runner.InterfaceAddrs(p.cfg.InNetNS)
	if err != nil {
		return nil, err
	}
	out := []netip.Addr{}
	for _, a := range all {
		for _, pfx := range p.settings.nodePortAddresses {
			if pfx.Contains(a) {
				out = append(out, a)
				break
			}
		}
	}
	return out, nil
}
