package layer2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures an Announcer. Start from DefaultConfig; each flag of the speaker
// maps onto one field.
type Config struct {
	// ExcludeInterfaces matches names of interfaces never answered on; nil means
	// DefaultExcludeInterfaces.
	ExcludeInterfaces *regexp.Regexp
	// Schedule of gratuitous announcements after a takeover (DefaultSchedule). The zero
	// Schedule announces once and never again.
	Schedule Schedule
	// Rescan is how often interfaces are listed again to start and stop responders
	// (default 10 s; 0 means the default).
	Rescan time.Duration
	// Registerer receives the herald_l2_* metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Log receives responder starts and stops, skipped interfaces (on change) and send
	// errors. The zero Logger discards.
	Log logr.Logger
	// OnAnnounce, if set, is called once per takeover (and once more after each
	// address conflict the IP recovers from), after the first burst that sent
	// at least one frame, outside any lock. It may race with a Withdraw of the same IP.
	OnAnnounce func(Announcement)
	// WatchLinks rescans interfaces as soon as the kernel reports a link change
	// (netlink), besides every Rescan.
	WatchLinks bool

	// Address conflicts (see the package documentation and conflict.go).

	// Peer reports whether a MAC is another herald speaker's. Claims from peers are
	// reported to OnSighting and counted but never make this node yield; the speaker's
	// membership settles them. It should cover every interface of the cluster's other
	// nodes: their kernels may answer for a VIP too (kube-proxy in IPVS mode puts every
	// VIP on kube-ipvs0). Nil: every MAC not this node's is foreign, and two speakers
	// that both announce an IP (a split brain) may both yield it until the next
	// ConflictRecheck. It is called on the responders' receive loops, only for claims,
	// and must return quickly.
	Peer func(net.HardwareAddr) bool
	// DefendInterval: a second claim by a foreign device within this time after one
	// was defended makes the node yield the IP (default DefaultDefendInterval, RFC
	// 5227's 10 s; 0 means the default).
	DefendInterval time.Duration
	// ProbeWait is how long a probe round listens for an answer, before the first
	// announcement of a Set with Probe and while yielded (default DefaultProbeWait,
	// 200 ms; 0 means the default).
	ProbeWait time.Duration
	// PeerProbeWait is how long a probe round of WaitForPeers listens for an answer
	// (default DefaultPeerProbeWait, 50 ms; 0 means the default).
	PeerProbeWait time.Duration
	// PeerWaitMax is the longest a Set with WaitForPeers or Probe waits for peers' MACs
	// to stop answering before it takes the IP all the same (default
	// DefaultPeerWaitMax, 10 s; 0 means the default).
	PeerWaitMax time.Duration
	// ConflictRecheckFirst is how long after yielding an IP it is first probed to see
	// whether the foreign device is gone (default DefaultConflictRecheckFirst, 1 s; 0
	// means the default).
	ConflictRecheckFirst time.Duration
	// ConflictRecheck is the longest wait between two probes of a yielded IP: the wait
	// doubles from ConflictRecheckFirst after each answered probe, up to this (default
	// DefaultConflictRecheck, 8 s; 0 means the default).
	ConflictRecheck time.Duration
	// ConflictYieldMax is the longest a yielded IP stays unanswered while a device
	// still answers for it: then the node answers and announces it again, contested,
	// keeping the conflict reported, and does not yield it again until a probe goes
	// unanswered and the conflict clears (default DefaultConflictYieldMax, 10 s; 0
	// means the default).
	ConflictYieldMax time.Duration
	// OnSighting, if set, is called for every claim on an owned IP, from peers (Sighting.Peer)
	// and foreign devices alike, on the receiving responder's loop: it must return
	// quickly.
	OnSighting func(Sighting)
	// OnConflict, if set, is called when the node yields an IP to a foreign device, and
	// again if another foreign MAC claims it while yielded; from the IP's takeover loop,
	// outside any lock. It may race with a Withdraw of the same IP.
	OnConflict func(Conflict)
	// OnConflictCleared, if set, is called when a yielded IP's probe went unanswered
	// and the node answers and announces it again, with Cleared set; from the IP's
	// takeover loop, outside any lock. A Withdraw of a yielded IP ends its conflict
	// without this call.
	OnConflictCleared func(Conflict)

	// ReplyRate is how many ARP replies and neighbour advertisements per second one
	// requester (its MAC) gets on one interface, sustained; ReplyBurst how many at once
	// (defaults DefaultReplyRate and DefaultReplyBurst; 0 means the default). The rest
	// are counted in herald_l2_replies_rate_limited_total.
	ReplyRate  float64
	ReplyBurst int

	// Stalls (see watchdog.go).

	// StallAfter: a heartbeat this much late is a stall of the process; from then on
	// no owned IP is answered or announced until Resume (DefaultConfig:
	// DefaultStallAfter; 0 turns the watchdog off).
	StallAfter time.Duration
	// OnStall, if set, is called with the length of each stall, from the watchdog's
	// goroutine: the caller should hear its peers again, settle who owns what, and
	// call Resume.
	OnStall func(time.Duration)
}

// DefaultConfig is the default exclude list, DefaultSchedule, a 10 s rescan, the
// default conflict timings and DefaultStallAfter.
func DefaultConfig() Config {
	return Config{Schedule: DefaultSchedule(), Rescan: 10 * time.Second, WatchLinks: true,
		DefendInterval: DefaultDefendInterval, ProbeWait: DefaultProbeWait, PeerProbeWait: DefaultPeerProbeWait,
		PeerWaitMax: DefaultPeerWaitMax, ConflictRecheckFirst: DefaultConflictRecheckFirst, ConflictRecheck: DefaultConflictRecheck,
		ConflictYieldMax: DefaultConflictYieldMax, ReplyRate: DefaultReplyRate, ReplyBurst: DefaultReplyBurst,
		StallAfter: DefaultStallAfter}
}

// ErrClosed is returned by Set once Run has finished.
var ErrClosed = errors.New("layer2: announcer closed")

// Announcer is the layer-2 side of the speaker: it keeps an ARP responder and an NDP
// responder on every eligible interface, answers for the IPs it is told this node owns,
// and announces them on takeover. The speaker calls Set when the node becomes owner of
// an IP, Withdraw when it stops being owner, and runs Run for the node's lifetime.
//
// It does not fight other devices for an IP: a foreign device that insists on an
// owned IP makes it yield the IP until that device is gone or ConflictYieldMax has
// passed, then answer it again without yielding (the package documentation
// has the rules; Config.Peer, Probe, OnConflict and Conflict are the caller's side).
type Announcer struct {
	cfg     Config
	owners  *Table
	metrics *Metrics
	log     logr.Logger
	clock   clock
	sys     system

	targets  atomic.Pointer[[]target] // read by takeover bursts without a.mu
	watchdog *watchdog
	running  atomic.Bool
	wg       sync.WaitGroup // responder and takeover goroutines

	mu        sync.Mutex
	closed    bool
	scanned   bool
	arp       map[string]*ARPResponder
	ndp       map[string]*NDPResponder
	index     map[string]int    // interface name → ifindex its responders were opened on
	verdicts  map[string]string // interface name → last eligibility logged
	takeovers map[netip.Addr]*takeover
}

// system is how the Announcer reaches the host; tests replace it.
type system struct {
	interfaces func() ([]Facts, error)
	listenARP  func(*net.Interface) (Conn, error)
	listenNDP  func(*net.Interface) (NDPConn, error)
}

var hostSystem = system{interfaces: ReadInterfaces, listenARP: ListenARP, listenNDP: ListenNDP}

// New builds an Announcer and registers its metrics.
func New(cfg Config) (*Announcer, error) {
	return newAnnouncer(cfg, hostSystem, realClock{})
}

func newAnnouncer(cfg Config, sys system, clk clock) (*Announcer, error) {
	if err := cfg.Schedule.Validate(); err != nil {
		return nil, err
	}
	if cfg.ExcludeInterfaces == nil {
		cfg.ExcludeInterfaces = defaultExclude
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = 10 * time.Second
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"defend interval", &cfg.DefendInterval, DefaultDefendInterval},
		{"probe wait", &cfg.ProbeWait, DefaultProbeWait},
		{"peer probe wait", &cfg.PeerProbeWait, DefaultPeerProbeWait},
		{"longest peer wait", &cfg.PeerWaitMax, DefaultPeerWaitMax},
		{"first conflict recheck", &cfg.ConflictRecheckFirst, DefaultConflictRecheckFirst},
		{"conflict recheck", &cfg.ConflictRecheck, DefaultConflictRecheck},
		{"longest conflict yield", &cfg.ConflictYieldMax, DefaultConflictYieldMax},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("layer2: %s %s is negative", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.ConflictRecheckFirst > cfg.ConflictRecheck {
		return nil, fmt.Errorf("layer2: first conflict recheck %s is longer than the longest %s", cfg.ConflictRecheckFirst, cfg.ConflictRecheck)
	}
	if cfg.StallAfter < 0 {
		return nil, fmt.Errorf("layer2: stall threshold %s is negative", cfg.StallAfter)
	}
	if cfg.ReplyRate < 0 || cfg.ReplyBurst < 0 {
		return nil, fmt.Errorf("layer2: reply rate %v and burst %d must not be negative", cfg.ReplyRate, cfg.ReplyBurst)
	}
	if cfg.ReplyRate == 0 {
		cfg.ReplyRate = DefaultReplyRate
	}
	if cfg.ReplyBurst == 0 {
		cfg.ReplyBurst = DefaultReplyBurst
	}
	m, err := NewMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	a := &Announcer{
		cfg:       cfg,
		owners:    NewTable(),
		metrics:   m,
		log:       cfg.Log,
		clock:     clk,
		sys:       sys,
		arp:       map[string]*ARPResponder{},
		ndp:       map[string]*NDPResponder{},
		index:     map[string]int{},
		verdicts:  map[string]string{},
		takeovers: map[netip.Addr]*takeover{},
	}
	a.targets.Store(&[]target{})
	// Stalls are measured on the real clock whatever clock the schedules use: they are
	// the process's own, not the schedule's.
	a.watchdog = newWatchdog(realClock{}, cfg.StallAfter, a.stalled)
	a.owners.awake = a.watchdog.awake
	return a, nil
}

// stalled is the watchdog's report of a stall.
func (a *Announcer) stalled(gap time.Duration) {
	a.metrics.inc(stalls)
	a.log.Info("this process did not run for a while: answering and announcing nothing until the speaker has heard its peers again", "for", gap)
	if a.cfg.OnStall != nil {
		a.cfg.OnStall(gap)
	}
}

// Resume ends the silence that follows a stall (Config.OnStall): owned IPs are
// answered again, and every one is announced again at once, since nobody may have
// answered for it meanwhile. It does nothing when there was no stall.
func (a *Announcer) Resume() {
	if !a.watchdog.resume() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.takeovers {
		t.again()
	}
}

// Run scans interfaces at once and every Rescan, keeping one responder per eligible
// interface and protocol, until ctx is done; then it stops every responder and
// announcement and returns nil. Run may be called once.
func (a *Announcer) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("layer2: Run called twice")
	}
	go a.watchdog.run(ctx)
	a.rescan()
	tick := time.NewTicker(a.cfg.Rescan)
	defer tick.Stop()
	// Link changes trigger a scan at once; the ticker stays as a backstop.
	linkChanged := make(chan struct{}, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if a.cfg.WatchLinks {
		go func() {
			err := watchLinks(watchCtx, func() {
				select {
				case linkChanged <- struct{}{}:
				default:
				}
			})
			if err != nil {
				a.log.Error(err, "following link changes; interfaces are rescanned periodically only")
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			a.shutdown()
			return nil
		case <-tick.C:
			a.rescan()
		case <-linkChanged:
			a.rescan()
		}
	}
}

// Ready reports whether the first interface scan is done (responders are up on every
// interface that was eligible and could be opened).
func (a *Announcer) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.scanned
}

// Set records that owner key (a Service, say) makes this node announce ip, on the
// named interfaces or, if none are named, on every eligible one. If the IP was not
// owned before, it is announced at once and on the Schedule (with Probe, once a probe
// found no other device holding it); if its interfaces changed, the schedule starts
// over. Setting what is already set does nothing, so the speaker may call Set on every
// reconcile.
func (a *Announcer) Set(key string, ip netip.Addr, interfaces []string, opts ...SetOption) error {
	ip = normalize(ip)
	if !ip.IsValid() {
		return fmt.Errorf("layer2: invalid IP %v", ip)
	}
	var o setOptions
	for _, opt := range opts {
		opt(&o)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	switch a.owners.set(key, ip, interfaces, o.quiet()) {
	case Added:
		a.trackGroups(ip)
		t := newTakeover(ip, o)
		a.takeovers[ip] = t
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.run(t)
		}()
	case Updated:
		a.trackGroups(ip)
		a.takeovers[ip].again()
	}
	return nil
}

// Withdraw ends key's hold on ip. When no owner is left, the IP is no longer answered
// for from the next packet on, no gratuitous frame or probe for it goes out once
// Withdraw returns, its solicited-node group is left, and a conflict on it ends (its
// herald_l2_conflict series goes, without OnConflictCleared).
func (a *Announcer) Withdraw(key string, ip netip.Addr) {
	ip = normalize(ip)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch a.owners.Withdraw(key, ip) {
	case Removed:
		if t := a.takeovers[ip]; t != nil {
			a.halt(t)
			delete(a.takeovers, ip)
		}
		a.trackGroups(ip)
	case Updated:
		a.trackGroups(ip)
	}
}

// Reannounce starts ip's schedule over (at once, then the repeats), for example after
// a network partition healed. For an IP yielded to a foreign device it probes at once
// instead, and takes the IP back if nobody answers. It does nothing for an IP not owned.
func (a *Announcer) Reannounce(ip netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.takeovers[normalize(ip)]; t != nil {
		t.again()
	}
}

// Announced returns the first announcement of the current takeover of ip, if any
// frame went out yet.
func (a *Announcer) Announced(ip netip.Addr) (Announcement, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.takeovers[normalize(ip)]
	if t == nil {
		return Announcement{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.announced == nil {
		return Announcement{}, false
	}
	return *t.announced, true
}

// Conflict returns the conflict of ip if this node owns it and has yielded it to a
// foreign device.
func (a *Announcer) Conflict(ip netip.Addr) (Conflict, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.takeovers[normalize(ip)]
	if t == nil {
		return Conflict{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conflict == nil {
		return Conflict{}, false
	}
	c := *t.conflict
	c.MAC = slices.Clone(c.MAC)
	return c, true
}

// ResponderInfo describes one running responder.
type ResponderInfo struct {
	Interface string
	Protocol  string // "arp" or "ndp"
	MAC       net.HardwareAddr
}

// Responders lists the running responders, sorted by interface then protocol.
func (a *Announcer) Responders() []ResponderInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []ResponderInfo
	for name, r := range a.arp {
		out = append(out, ResponderInfo{Interface: name, Protocol: "arp", MAC: r.mac})
	}
	for name, r := range a.ndp {
		out = append(out, ResponderInfo{Interface: name, Protocol: "ndp", MAC: r.mac})
	}
	slices.SortFunc(out, func(x, y ResponderInfo) int {
		return strings.Compare(x.Interface+"/"+x.Protocol, y.Interface+"/"+y.Protocol)
	})
	return out
}

// trackGroups brings every NDP responder's membership for ip in line with the table.
// Called with a.mu held.
func (a *Announcer) trackGroups(ip netip.Addr) {
	if !ip.Is6() {
		return
	}
	for name, r := range a.ndp {
		if err := r.Track(ip, a.owners.Allowed(ip, name)); err != nil {
			a.log.Error(err, "solicited-node group membership", "ip", ip)
		}
	}
}

// shutdown stops every takeover and responder and waits for their goroutines.
func (a *Announcer) shutdown() {
	a.mu.Lock()
	a.closed = true
	for ip, t := range a.takeovers {
		a.halt(t)
		delete(a.takeovers, ip)
	}
	for name, r := range a.arp {
		r.Close()
		delete(a.arp, name)
	}
	for name, r := range a.ndp {
		r.Close()
		delete(a.ndp, name)
	}
	a.publishTargets()
	a.mu.Unlock()
	a.wg.Wait()
}
