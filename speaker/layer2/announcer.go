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
	// OnAnnounce, if set, is called once per takeover, after the first burst that sent
	// at least one frame, outside any lock. It may race with a Withdraw of the same IP.
	OnAnnounce func(Announcement)
	// WatchLinks rescans interfaces as soon as the kernel reports a link change
	// (netlink), besides every Rescan.
	WatchLinks bool
}

// DefaultConfig is the default exclude list, DefaultSchedule and a 10 s rescan.
func DefaultConfig() Config {
	return Config{Schedule: DefaultSchedule(), Rescan: 10 * time.Second, WatchLinks: true}
}

// ErrClosed is returned by Set once Run has finished.
var ErrClosed = errors.New("layer2: announcer closed")

// Announcer is the layer-2 side of the speaker: it keeps an ARP responder and an NDP
// responder on every eligible interface, answers for the IPs it is told this node owns,
// and announces them on takeover. The speaker calls Set when the node becomes owner of
// an IP, Withdraw when it stops being owner, and runs Run for the node's lifetime.
type Announcer struct {
	cfg     Config
	owners  *Table
	metrics *Metrics
	log     logr.Logger
	clock   clock
	sys     system

	targets atomic.Pointer[[]target] // read by takeover bursts without a.mu
	running atomic.Bool
	wg      sync.WaitGroup // responder and takeover goroutines

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
	return a, nil
}

// Run scans interfaces at once and every Rescan, keeping one responder per eligible
// interface and protocol, until ctx is done; then it stops every responder and
// announcement and returns nil. Run may be called once.
func (a *Announcer) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("layer2: Run called twice")
	}
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
// owned before, it is announced at once and on the Schedule; if its interfaces
// changed, the schedule starts over. Setting what is already set does nothing, so the
// speaker may call Set on every reconcile.
func (a *Announcer) Set(key string, ip netip.Addr, interfaces []string) error {
	ip = normalize(ip)
	if !ip.IsValid() {
		return fmt.Errorf("layer2: invalid IP %v", ip)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	switch a.owners.Set(key, ip, interfaces) {
	case Added:
		a.trackGroups(ip)
		t := newTakeover(ip)
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
// for from the next packet on, no gratuitous frame for it goes out once Withdraw
// returns, and its solicited-node group is left.
func (a *Announcer) Withdraw(key string, ip netip.Addr) {
	ip = normalize(ip)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch a.owners.Withdraw(key, ip) {
	case Removed:
		if t := a.takeovers[ip]; t != nil {
			t.halt()
			delete(a.takeovers, ip)
		}
		a.trackGroups(ip)
	case Updated:
		a.trackGroups(ip)
	}
}

// Reannounce starts ip's schedule over (at once, then the repeats), for example after
// a network partition healed. It does nothing for an IP not owned.
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
		t.halt()
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
