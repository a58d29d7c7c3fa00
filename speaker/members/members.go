package members

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// Members is this speaker's membership in the speakers' memberlist cluster.
type Members struct {
	ml     *memberlist.Memberlist
	log    logr.Logger
	reg    prometheus.Registerer
	gauge  prometheus.Gauge
	sends  *prometheus.CounterVec
	events chan struct{}

	mu   sync.Mutex
	live map[string]bool // names of members not dead or left (suspects included)
	// leaving are the members that said they are leaving (leaving.go); left those
	// whose last departure followed such a word.
	leaving, left map[string]bool
	// restarting are the leaving members that said they will be back soon, and kept
	// the states of those that left so (state.go).
	restarting map[string]bool
	kept       map[string]KeptState
	// lost are the last states of the members lost without a goodbye (dead or cut
	// off), until they come back (state.go); lostAt when each was lost, states or not.
	lost   map[string][]byte
	lostAt map[string]time.Time
	// name is this member's; own is its state and states those of its peers (state.go).
	name   string
	own    peerState
	states map[string]peerState
	// sender is ml for the delegates, which memberlist may call before Start has
	// set ml.
	sender atomic.Pointer[memberlist.Memberlist]
	// addr is the advertised address, as memberlist.Create set it.
	addr string
	// noStateExchange is Config's (benchmarks only).
	noStateExchange bool
	// meta is this member's metadata, onMeta who hears the peers' (meta.go).
	meta   []byte
	onMeta func(name string, data []byte)

	// outMu guards out, the sends due to each peer (outbox.go).
	outMu sync.Mutex
	out   map[string]*outgoing

	// keyring is memberlist's own, which it reads for every message; keyMu orders
	// the changes SetKeys makes.
	keyring *memberlist.Keyring
	keyMu   sync.Mutex

	shutdown sync.Once
}

// Start creates the memberlist bound to cfg.BindAddr:cfg.BindPort, encrypted with
// cfg.SecretKey (mandatory: incoming and outgoing gossip must be encrypted) and
// accepting cfg.OtherKeys too (SetKeys changes them while it runs), and
// registers herald_memberlist_members and herald_memberlist_state_sends_total on reg
// (nothing if reg is nil). It does not join anyone: call Join with the discovered
// peers.
func Start(cfg Config, log logr.Logger, reg prometheus.Registerer) (*Members, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("memberlist config: %w", err)
	}
	m := newMembers(cfg, log)
	if reg != nil {
		if err := reg.Register(m.gauge); err != nil {
			return nil, fmt.Errorf("registering herald_memberlist_members: %w", err)
		}
		if err := reg.Register(m.sends); err != nil {
			reg.Unregister(m.gauge)
			return nil, fmt.Errorf("registering herald_memberlist_state_sends_total: %w", err)
		}
		m.reg = reg
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertisePort = cfg.BindPort
	kr, err := newKeyring(cfg)
	if err != nil {
		m.unregister()
		return nil, err
	}
	m.keyring, mc.Keyring = kr, kr
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	// No compression: on a LAN it saves nothing that matters on packets of a few
	// hundred bytes, and memberlist's LZW allocates its tables for every message
	// (most of memberlist's CPU and garbage in a cluster of a hundred members forming).
	mc.EnableCompression = false
	mc.ProbeInterval = cfg.ProbeInterval
	mc.ProbeTimeout = cfg.ProbeTimeout
	mc.SuspicionMult = cfg.suspicionMult()
	mc.SuspicionMaxTimeoutMult = cfg.SuspicionMaxTimeoutMult
	mc.IndirectChecks = cfg.IndirectChecks
	mc.GossipInterval = cfg.Gossip()
	mc.RetransmitMult = cfg.RetransmitMult
	mc.PushPullInterval = cfg.PushPullInterval
	mc.TCPTimeout = cfg.TCPTimeout
	mc.Transport = cfg.Transport
	mc.Events = (*eventDelegate)(m)
	mc.Delegate = (*messageDelegate)(m)
	mc.Logger = newStdLogger(log.WithName("memberlist"))

	ml, err := memberlist.Create(mc)
	if err != nil {
		m.unregister()
		return nil, fmt.Errorf("starting memberlist on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	m.ml = ml
	m.addr = ml.LocalNode().Address() // read once: memberlist rewrites the local node in place when its metadata changes (SetMeta)
	m.sender.Store(ml)
	return m, nil
}

// newMembers is a Members with its maps made, before any socket exists.
func newMembers(cfg Config, log logr.Logger) *Members {
	return &Members{
		log:        log,
		events:     make(chan struct{}, 1),
		live:       map[string]bool{},
		leaving:    map[string]bool{},
		left:       map[string]bool{},
		name:       cfg.NodeName,
		restarting: map[string]bool{},
		kept:       map[string]KeptState{},
		lost:       map[string][]byte{},
		lostAt:     map[string]time.Time{},
		states:     map[string]peerState{},
		out:        map[string]*outgoing{},
		sends:      newSendsCounter(),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_memberlist_members",
			Help: "Members of the speakers' memberlist cluster that this speaker sees alive, itself included.",
		}),
		noStateExchange: cfg.noStateExchange,
	}
}

// Addr is this member's advertised "host:port" (the real port when BindPort was 0).
func (m *Members) Addr() string { return m.addr }

// Join contacts the given peers ("ip" or "ip:port"; DefaultBindPort when no port)
// that are neither this member nor already live (PeersToJoin) and returns how many
// were reached. Calling it again with the same peers is cheap and harmless. The
// error lists the peers that could not be reached; it may come with n > 0.
func (m *Members) Join(addrs []string) (int, error) {
	var live []string
	for _, n := range m.ml.Members() {
		live = append(live, n.Address())
	}
	peers := PeersToJoin(addrs, live, m.Addr())
	if len(peers) == 0 {
		return 0, nil
	}
	n, err := m.ml.Join(peers)
	if err != nil {
		err = fmt.Errorf("joining memberlist peers %v: %w", peers, err)
	}
	return n, err
}

// Sync exchanges full state (memberlist's push/pull) with each of addrs ("ip:port")
// and with every member it knows, all at once, and returns how many answered, once all
// have or timeout has passed. A member that did not run for a while uses it to learn
// at once what its peers decided meanwhile (that it was declared dead, which it then
// refutes, and their states) instead of waiting for gossip.
func (m *Members) Sync(addrs []string, timeout time.Duration) int {
	self := m.Addr()
	seen := map[string]bool{self: true}
	var targets []string
	for _, a := range addrs {
		if !seen[a] {
			seen[a] = true
			targets = append(targets, a)
		}
	}
	for _, n := range m.ml.Members() {
		if a := n.Address(); !seen[a] {
			seen[a] = true
			targets = append(targets, a)
		}
	}
	answered := make(chan bool, len(targets))
	for _, a := range targets {
		go func() {
			n, err := m.ml.Join([]string{a})
			answered <- err == nil && n == 1
		}()
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	reached := 0
	for range targets {
		select {
		case ok := <-answered:
			if ok {
				reached++
			}
		case <-deadline.C:
			return reached
		}
	}
	return reached
}

// Live returns the sorted names of the members not declared dead or left, this one
// included. A suspected member stays live until its suspicion times out, so one lost
// probe does not move VIPs.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveLocked()
}

// IsLive says whether the named member is live (as Live would list it), without
// building the list.
func (m *Members) IsLive(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[name]
}

func (m *Members) liveLocked() []string {
	out := make([]string, 0, len(m.live))
	for n := range m.live {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Events receives a value after membership changes (a member joined, left, died or
// updated). Notifications coalesce: one pending value stands for any number of
// changes, so the receiver re-reads Live. memberlist is never blocked by a slow
// receiver. The channel is never closed.
func (m *Members) Events() <-chan struct{} { return m.events }

// Leave tells the peers this member is leaving, announces its departure and waits
// for it to be gossiped, so that peers drop it at once instead of after failure
// detection; all of it within timeout. With restart, the peers are told it will be
// back soon and keep its state meanwhile (Kept). Call it on SIGTERM before withdrawing
// announcements, then Shutdown.
func (m *Members) Leave(timeout time.Duration, restart bool) error {
	deadline := time.Now().Add(timeout)
	m.sayLeaving(timeout, restart)
	if err := m.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("leaving memberlist: %w", err)
	}
	return nil
}

// Shutdown stops memberlist (without Leave, peers detect it as failed) and
// unregisters the gauge. Further calls do nothing.
func (m *Members) Shutdown() error {
	var err error
	m.shutdown.Do(func() {
		err = m.ml.Shutdown()
		m.unregister()
	})
	if err != nil {
		return fmt.Errorf("stopping memberlist: %w", err)
	}
	return nil
}

func (m *Members) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.gauge)
		m.reg.Unregister(m.sends)
	}
}

// eventDelegate is memberlist's EventDelegate. memberlist calls it with its node lock
// held, so it only touches our own state and never blocks.
type eventDelegate Members

func (d *eventDelegate) set(name string, live bool) {
	m := (*Members)(d)
	m.mu.Lock()
	if live {
		m.live[name] = true
		delete(m.left, name)
		delete(m.kept, name)
		delete(m.lost, name)
		delete(m.lostAt, name)
	} else {
		delete(m.live, name)
		m.left[name] = m.leaving[name]
		if m.leaving[name] && m.restarting[name] {
			m.kept[name] = KeptState{Data: m.states[name].data, Since: time.Now()}
		}
		if st, ok := m.states[name]; ok && !m.leaving[name] {
			m.lost[name] = st.data
		} else {
			delete(m.lost, name)
		}
		if m.leaving[name] {
			delete(m.lostAt, name)
		} else {
			m.lostAt[name] = time.Now()
		}
		delete(m.leaving, name)
		delete(m.restarting, name)
		delete(m.states, name) // a member that comes back starts afresh
	}
	m.gauge.Set(float64(len(m.live)))
	m.mu.Unlock()
	m.notify()
}

// notify wakes the receiver of Events; notifications coalesce.
func (m *Members) notify() {
	select {
	case m.events <- struct{}{}:
	default:
	}
}

// NotifyJoin marks the member live and, for a peer, exchanges states with it.
func (d *eventDelegate) NotifyJoin(n *memberlist.Node) {
	d.set(n.Name, true)
	m := (*Members)(d)
	m.peerMeta(n)
	if n.Name == m.name || m.noStateExchange {
		return
	}
	m.send(n, true)
}

func (d *eventDelegate) NotifyLeave(n *memberlist.Node) { d.set(n.Name, false) }
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) {
	d.set(n.Name, true)
	(*Members)(d).peerMeta(n)
}

var _ memberlist.EventDelegate = (*eventDelegate)(nil)
