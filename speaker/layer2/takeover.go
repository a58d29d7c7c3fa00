package layer2

import (
	"net"
	"net/netip"
	"sync"
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
}

// takeover is the gratuitous-announcement loop of one owned IP. It runs from the Set
// that made the IP owned until the Withdraw that ends it; halt guarantees that no
// frame goes out once it returns.
type takeover struct {
	ip      netip.Addr
	stop    chan struct{}
	restart chan struct{} // cap 1: "start the schedule again"

	mu        sync.Mutex // held while frames are written
	stopped   bool
	announced *Announcement // the first burst that sent something
}

func newTakeover(ip netip.Addr) *takeover {
	return &takeover{ip: ip, stop: make(chan struct{}), restart: make(chan struct{}, 1)}
}

// halt stops the loop; after it returns no more frames are sent for this takeover.
func (t *takeover) halt() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		close(t.stop)
	}
}

// again restarts the schedule from its first, immediate announcement.
func (t *takeover) again() {
	select {
	case t.restart <- struct{}{}:
	default: // a restart is already pending
	}
}

type waitResult int

const (
	fired waitResult = iota
	stopped
	restarted
)

// run sends the bursts of the schedule until halted. A restart starts the schedule
// over (new interface, changed interface list, Reannounce).
func (a *Announcer) run(t *takeover) {
	s := a.cfg.Schedule
	for {
		start := a.clock.Now()
		a.burst(t)
		res := fired
		for _, off := range s.Repeats {
			if res = a.wait(t, start.Add(off).Sub(a.clock.Now())); res != fired {
				break
			}
			a.burst(t)
		}
		for res == fired {
			if s.Refresh <= 0 {
				res = a.wait(t, -1)
				break
			}
			if res = a.wait(t, s.Refresh); res == fired {
				a.burst(t)
			}
		}
		if res == stopped {
			return
		}
	}
}

// wait blocks for d (forever if d < 0), or until the takeover is halted or restarted.
func (a *Announcer) wait(t *takeover, d time.Duration) waitResult {
	var fire <-chan time.Time
	if d >= 0 {
		tm := a.clock.NewTimer(d)
		defer tm.Stop()
		fire = tm.C()
	}
	select {
	case <-t.stop:
		return stopped
	case <-t.restart:
		return restarted
	case <-fire:
		return fired
	}
}

// burst announces t.ip on every responder of its family whose interface may announce
// it. The first burst that sends anything is reported to OnAnnounce.
func (a *Announcer) burst(t *takeover) {
	targets := *a.targets.Load()
	t.mu.Lock()
	if t.stopped {
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
