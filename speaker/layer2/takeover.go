package layer2

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Link is an interface frames went out on, with the MAC they carried.
type Link struct {
	Interface string
	MAC       net.HardwareAddr
}

// Announcement reports the first gratuitous frames of a takeover: the IP, the
// interfaces they went out on, and when the first one was handed to the kernel (the
// end of a failover, for herald_l2_failover_seconds).
type Announcement struct {
	IP    netip.Addr
	Links []Link
	At    time.Time
}

// target is one responder as the takeover loop sees it.
type target struct {
	name     string
	mac      net.HardwareAddr
	ipv4     bool // an ARP responder; else NDP
	announce func(netip.Addr) error
	probe    func(netip.Addr) error
}

// claimBacklog is how many foreign claims may wait for a takeover loop; more are
// dropped, as those waiting already decide what the loop does.
const claimBacklog = 16

// takeover is the loop of one owned IP: probing it first if asked, announcing it on
// the Schedule, defending it against foreign claims, and while yielded, probing it
// until the foreign device is gone (conflict.go). It runs from the Set that made the
// IP owned until the Withdraw that ends it; halt guarantees that no frame goes out and
// the IP's quiet state does not change once it returns.
type takeover struct {
	ip        netip.Addr
	probe     bool // probe (RFC 5227) before the first announcement
	waitPeers bool // probe until no peer answers before the first announcement
	// watchPeers: peers' claims reach the loop too (while it probes before announcing).
	watchPeers atomic.Bool
	stop       chan struct{}
	restart    chan struct{} // cap 1: "start the schedule again"
	claims     chan Sighting // foreign claims (and peers' while watchPeers), for the loop
	done       chan struct{} // closed when the loop has returned

	defended time.Time // when a claim was last defended; only the loop uses it

	mu        sync.Mutex // held while frames are written and while the quiet state changes
	stopped   bool
	announced *Announcement // the first burst that sent something
	conflict  *Conflict     // while yielded
}

func newTakeover(ip netip.Addr, o setOptions) *takeover {
	return &takeover{
		ip: ip, probe: o.probe, waitPeers: o.waitPeers,
		stop: make(chan struct{}), restart: make(chan struct{}, 1),
		claims: make(chan Sighting, claimBacklog), done: make(chan struct{}),
	}
}

// halt stops the loop; after it returns no more frames are sent for this takeover and
// its conflict, returned if it was yielded, no longer changes.
func (t *takeover) halt() *Conflict {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		close(t.stop)
	}
	c := t.conflict
	t.conflict = nil
	return c
}

// again restarts the schedule from its first, immediate announcement; while the IP is
// probed or yielded, it probes again at once.
func (t *takeover) again() {
	select {
	case t.restart <- struct{}{}:
	default: // a restart is already pending
	}
}

// claim hands a foreign claim to the loop without blocking the responder.
func (t *takeover) claim(c Sighting) {
	select {
	case t.claims <- c:
	default:
	}
}

type waitResult int

const (
	fired waitResult = iota
	stopped
	restarted
	claimed
)

// phase is what the loop of a takeover is doing.
type phase int

const (
	phaseDone     phase = iota
	phaseProbe          // probing before the first announcement; quiet
	phaseAnnounce       // answering and announcing on the Schedule
	phaseYielded        // quiet, probing with a backoff up to ConflictRecheck
)

// run drives the takeover through its phases until halted.
func (a *Announcer) run(t *takeover) {
	defer close(t.done)
	next := phaseAnnounce
	if t.probe || t.waitPeers {
		next = phaseProbe
	}
	for {
		switch next {
		case phaseProbe:
			next = a.probeFirst(t)
		case phaseAnnounce:
			next = a.announce(t)
		case phaseYielded:
			next = a.yielded(t)
		default:
			return
		}
	}
}

// announce sends the bursts of the schedule. A restart starts the schedule over (new
// interface, changed interface list, Reannounce); a foreign claim is defended or makes
// the announcer yield (defend).
func (a *Announcer) announce(t *takeover) phase {
	s := a.cfg.Schedule
	start := a.clock.Now()
	a.burst(t)
	last := a.clock.Now()
	sent := 0 // repeats sent
	for {
		var deadline time.Time // zero: no more bursts, wait for a restart or claim
		switch {
		case sent < len(s.Repeats):
			deadline = start.Add(s.Repeats[sent])
		case s.Refresh > 0:
			deadline = last.Add(s.Refresh)
		}
		res, c := a.waitUntil(t, deadline)
		switch res {
		case stopped:
			return phaseDone
		case restarted:
			return phaseAnnounce
		case claimed:
			if a.defend(t, c) {
				continue
			}
			if !a.yield(t, c, false) {
				return phaseDone
			}
			return phaseYielded
		}
		a.burst(t)
		last = a.clock.Now()
		if sent < len(s.Repeats) {
			sent++
		}
	}
}

// waitUntil blocks until deadline (forever if it is zero), or until the takeover is
// halted or restarted or a foreign claim arrives, which it returns.
func (a *Announcer) waitUntil(t *takeover, deadline time.Time) (waitResult, Sighting) {
	var fire <-chan time.Time
	if !deadline.IsZero() {
		tm := a.clock.NewTimer(deadline.Sub(a.clock.Now()))
		defer tm.Stop()
		fire = tm.C()
	}
	select {
	case <-t.stop:
		return stopped, Sighting{}
	case <-t.restart:
		return restarted, Sighting{}
	case c := <-t.claims:
		return claimed, c
	case <-fire:
		return fired, Sighting{}
	}
}

// burst announces t.ip on every responder of its family whose interface may announce
// it. The first burst that sends anything is reported to OnAnnounce.
func (a *Announcer) burst(t *takeover) {
	targets := *a.targets.Load()
	t.mu.Lock()
	if t.stopped || !a.watchdog.awake() {
		t.mu.Unlock()
		return
	}
	var links []Link
	var at time.Time
	for _, tg := range targets {
		if tg.ipv4 != t.ip.Is4() || !a.owners.Allowed(t.ip, tg.name) {
			continue
		}
		if err := tg.announce(t.ip); err != nil {
			a.log.Error(err, "gratuitous announcement failed", "ip", t.ip, "interface", tg.name)
			continue
		}
		if at.IsZero() {
			at = a.clock.Now()
		}
		links = append(links, Link{Interface: tg.name, MAC: tg.mac})
	}
	var report *Announcement
	if len(links) > 0 && t.announced == nil {
		report = &Announcement{IP: t.ip, Links: links, At: at}
		t.announced = report
	}
	t.mu.Unlock()
	if report != nil {
		a.log.V(1).Info("announced", "ip", t.ip, "links", links)
		if a.cfg.OnAnnounce != nil {
			a.cfg.OnAnnounce(*report)
		}
	}
}
