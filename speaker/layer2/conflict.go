package layer2

import (
	"bytes"
	"net"
	"net/netip"
	"time"
)

// Conflict is an owned IP this node has yielded to a foreign device: it neither
// answers nor announces it, while the caller still owns it (see Announcer), until
// Config.ConflictYieldMax has passed; then the node answers it again, contested, and
// the conflict lasts until the device is gone.
type Conflict struct {
	IP        netip.Addr
	Interface string           // where the claim that made the node yield came in
	MAC       net.HardwareAddr // the foreign device, the latest one seen claiming the IP
	At        time.Time        // when the node yielded
	// BeforeAnnounce: the IP was found in use by the probe of a Set with Probe, so this
	// node never announced it.
	BeforeAnnounce bool
	// Contested is when the node took the IP back while the device still answered,
	// after Config.ConflictYieldMax: it answers and defends the IP again but keeps the
	// conflict. Zero while it is yielded.
	Contested time.Time
	// Cleared is when the foreign device stopped answering probes and the node took
	// the IP back; zero while the conflict lasts.
	Cleared time.Time
}

// SetOption changes how Set takes an IP.
type SetOption func(*setOptions)

type setOptions struct {
	probe     bool // RFC 5227 probe before the first announcement
	waitPeers bool // take the IP only once no other speaker answers for it
}

// quiet says whether the IP starts quiet: it is probed before it is answered.
func (o setOptions) quiet() bool { return o.probe || o.waitPeers }

// Probe makes a Set that makes the IP owned check it first (RFC 5227 §2.1, shortened):
// the IP is neither answered nor announced until two probes, ProbeWait/2 apart, have
// gone unanswered for ProbeWait. If a foreign device answers, the node yields the IP
// at once (OnConflict, with BeforeAnnounce) without ever announcing it. If a peer (see
// Config.Peer) answers, the IP stays quiet and is probed again until the peer stops,
// as with WaitForPeers: the peer carries the IP's traffic meanwhile.
//
// Use it for an IP no node announced before (a new Service). It does nothing when the
// IP is owned already.
func Probe() SetOption {
	return func(o *setOptions) { o.probe = true }
}

// WaitForPeers makes a Set that makes the IP owned take it only once no other speaker
// answers for it: the IP stays quiet while probe rounds of PeerProbeWait go out, until
// one is answered by no peer. Use it when the previous owner was lost without leaving:
// a node that died answers nothing and the takeover costs one round; a node cut off
// from memberlist but alive still answers until the speakers' quorum rule silences it,
// and the IP is never answered by two MACs meanwhile. A foreign device answering is an
// address conflict, as with Probe. It does nothing when the IP is owned already.
func WaitForPeers() SetOption {
	return func(o *setOptions) { o.waitPeers = true }
}

// Defaults of the conflict timings.
const (
	// DefaultDefendInterval is RFC 5227's DEFEND_INTERVAL.
	DefaultDefendInterval = 10 * time.Second
	// DefaultProbeWait is how long a probe round listens for an answer. RFC 5227 spends
	// 1 to 2 s before probing and 3 probes 1 to 2 s apart, sized for hosts booting
	// together after a power cut and for slow links; here the question is only whether
	// a live device on the LAN holds the IP, and such a device answers within a few
	// milliseconds (Linux answers ARP in the kernel). 200 ms covers a loaded host and a
	// busy switch while keeping a new Service reachable well within a second.
	DefaultProbeWait = 200 * time.Millisecond
	// DefaultPeerProbeWait is how long a probe round of WaitForPeers listens: it is on
	// the failover path, and the question is only whether a speaker that was alive a
	// second ago still answers (a speaker answers from memory within a millisecond).
	DefaultPeerProbeWait = 50 * time.Millisecond
	// DefaultConflictRecheckFirst is how long after yielding an IP it is first probed
	// again: a device that claimed it once or twice and is gone (or a forger that sent a
	// few frames) costs about this much silence.
	DefaultConflictRecheckFirst = time.Second
	// DefaultConflictRecheck is the longest wait between two probes of a yielded IP: the
	// wait doubles from DefaultConflictRecheckFirst after every answered probe up to
	// this, so the IP is back within this much of the device going away, for two probe
	// frames per wait while the device stays.
	DefaultConflictRecheck = 8 * time.Second
	// DefaultConflictYieldMax is the longest a yielded IP stays unanswered while a
	// device keeps answering for it; then the node answers it again, contested. Yielding
	// spares a real device that holds the address by mistake a gratuitous-ARP war, but a
	// forger answering every probe would otherwise keep the VIP silent for as long as it
	// sends. One DefendInterval matches the RFC's own horizon for "the device insists"
	// and is as long as a failover may already take (DefaultPeerWaitMax).
	DefaultConflictYieldMax = 10 * time.Second
)

// DefaultPeerWaitMax is the longest a takeover waits for peers' MACs to stop answering
// for the IP. A speaker cut off from the others goes silent within a few seconds by
// the quorum rule, so a MAC still answering past this is a dead node's in a forger's
// frames, or a speaker the quorum rule cannot reach: either way not one to leave a VIP
// unanswered for.
const DefaultPeerWaitMax = 10 * time.Second

// peerWaitOver says whether a takeover that peers have made wait since since has
// waited long enough at now.
func peerWaitOver(since, now time.Time, limit time.Duration) bool {
	return !since.IsZero() && now.Sub(since) >= limit
}

// recheckAfter is the wait before the probe round that follows n answered ones (n from
// 0) of a yielded IP: first, doubled n times, at most limit.
func recheckAfter(n int, first, limit time.Duration) time.Duration {
	d := first
	for range n {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// probeFirst is the phase of a Set with Probe or WaitForPeers: the IP is quiet until
// a probe round goes unanswered. A foreign device answering makes the node yield; a
// peer answering makes it wait for the rest of the round and probe again.
func (a *Announcer) probeFirst(t *takeover) phase {
	wait := a.cfg.PeerProbeWait
	if t.probe {
		wait = a.cfg.ProbeWait
	}
	t.watchPeers.Store(true)
	defer t.watchPeers.Store(false)
	var deferredAt time.Time // when a peer first answered; zero while none has
	for {
		start := a.clock.Now()
		res, c := a.probeRound(t, wait)
		// A peer answered: sit out the rest of the round (and its further answers),
		// then probe again.
		peerAnswered := false
		for res == claimed && c.Peer {
			peerAnswered = true
			if deferredAt.IsZero() {
				deferredAt = start
				a.metrics.inc(takeoversDeferred)
				a.log.Info("another speaker still answers for the IP; taking it once it stops", "ip", t.ip, "mac", c.MAC.String(), "interface", c.Interface)
			}
			res, c = a.waitUntil(t, start.Add(wait))
		}
		switch {
		case res == stopped:
			return phaseDone
		case res == claimed: // a foreign device
			if !a.yield(t, c, true) {
				return phaseDone
			}
			return phaseYielded
		case peerAnswered && peerWaitOver(deferredAt, a.clock.Now(), a.cfg.PeerWaitMax):
			a.metrics.inc(peerWaitsExpired)
			a.log.Info("a speaker's MAC still answers for the IP after the longest wait; taking it", "ip", t.ip, "waited", a.clock.Now().Sub(deferredAt))
		case peerAnswered || res == restarted:
			continue
		}
		break
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return phaseDone
	}
	a.owners.setQuiet(t.ip, false)
	return phaseAnnounce
}

// conflictState is how the loop of an owned IP stands towards foreign claims.
type conflictState int

const (
	answering    conflictState = iota // no conflict: answered and announced
	quietYielded                      // yielded: neither answered nor announced
	contested                         // taken back after ConflictYieldMax; the conflict lasts
)

// claimAction is what the loop does with a foreign claim.
type claimAction int

const (
	ignoreClaim claimAction = iota
	defendClaim             // announce the IP once
	yieldClaim              // go quiet and report the conflict
)

// onClaim decides what a foreign claim at at does to an IP in state s whose last
// defence was at defended (zero: none). A yielded IP only follows the device. Else a
// claim more than interval after the last defence is defended; a sooner one makes an
// answering IP yield (RFC 5227 §2.4) and is ignored on a contested one, which never
// yields again nor defends more than once per interval: no gratuitous-ARP war.
func onClaim(s conflictState, defended, at time.Time, interval time.Duration) claimAction {
	recent := !defended.IsZero() && at.Sub(defended) < interval
	switch {
	case s == quietYielded:
		return ignoreClaim
	case !recent:
		return defendClaim
	case s == contested:
		return ignoreClaim
	default:
		return yieldClaim
	}
}

// defend applies RFC 5227 §2.4 to a foreign claim on an IP being announced. The first
// claim, or one more than DefendInterval after the last defended one, is defended with
// one announcement, and the IP is kept. A second claim within DefendInterval means the
// device insists: defend returns false and the announcer yields rather than start a
// gratuitous-ARP war in which clients flip between the two MACs.
//
// The defence is followed by one probe. Many devices never announce an address nor
// defend it (Linux by default), but every one that holds it answers a probe, and that
// answer is the second claim; a device that claimed the IP once and is gone leaves the
// probe unanswered and the IP stays with this node.
func (a *Announcer) defend(t *takeover, c Sighting) bool {
	if onClaim(answering, t.defended, c.At, a.cfg.DefendInterval) == yieldClaim {
		return false
	}
	t.defended = c.At
	a.log.V(1).Info("defending the IP against a foreign claim", "ip", t.ip, "interface", c.Interface, "mac", c.MAC.String(), "kind", c.Kind)
	a.burst(t)
	a.probe(t)
	return true
}

// yield makes the IP quiet and reports the conflict. It returns false if the takeover
// was halted meanwhile.
func (a *Announcer) yield(t *takeover, c Sighting, beforeAnnounce bool) bool {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	a.owners.setQuiet(t.ip, true)
	t.announced = nil // the first burst after the conflict is reported again
	conf := Conflict{IP: t.ip, Interface: c.Interface, MAC: c.MAC, At: a.clock.Now(), BeforeAnnounce: beforeAnnounce}
	t.conflict = &conf
	a.metrics.setConflict(t.ip, c.MAC)
	t.mu.Unlock()
	a.log.Info("address conflict: another device holds the IP; not answering for it", "ip", t.ip,
		"interface", c.Interface, "mac", c.MAC.String(), "kind", c.Kind, "beforeAnnounce", beforeAnnounce)
	if a.cfg.OnConflict != nil {
		a.cfg.OnConflict(conf)
	}
	return true
}

// yielded is the phase of a yielded IP: a probe round after ConflictRecheckFirst,
// then after doubling waits up to ConflictRecheck (or at once on a restart); silence
// clears the conflict and the schedule starts over. ConflictYieldMax after yielding,
// the IP is taken back, contested (takeBack), and probed on the same schedule.
func (a *Announcer) yielded(t *takeover) phase {
	state := quietYielded
	takeBackAt := a.clock.Now().Add(a.cfg.ConflictYieldMax)
	answered := 0
	next := a.clock.Now().Add(recheckAfter(answered, a.cfg.ConflictRecheckFirst, a.cfg.ConflictRecheck))
	for {
		deadline := next
		if state == quietYielded && takeBackAt.Before(deadline) {
			deadline = takeBackAt
		}
		res, c := a.waitUntil(t, deadline)
		switch res {
		case stopped:
			return phaseDone
		case claimed:
			a.inConflict(t, c, state)
			continue
		case fired:
			if state == quietYielded && !a.clock.Now().Before(takeBackAt) {
				if !a.takeBack(t) {
					return phaseDone
				}
				state = contested
				continue
			}
		case restarted:
			if state == contested {
				a.burst(t) // the interfaces changed: announce on them
			}
		}
		res, c = a.probeRound(t, a.cfg.ProbeWait)
		switch res {
		case stopped:
			return phaseDone
		case claimed:
			a.inConflict(t, c, state)
			answered++
			next = a.clock.Now().Add(recheckAfter(answered, a.cfg.ConflictRecheckFirst, a.cfg.ConflictRecheck))
			continue
		}
		if !a.clear(t) {
			return phaseDone
		}
		return phaseAnnounce
	}
}

// inConflict handles a foreign claim on a yielded or contested IP: it follows the
// device, and defends a contested IP as onClaim says.
func (a *Announcer) inConflict(t *takeover, c Sighting, s conflictState) {
	if onClaim(s, t.defended, c.At, a.cfg.DefendInterval) == defendClaim {
		t.defended = c.At
		a.log.V(1).Info("defending a contested IP against a foreign claim", "ip", t.ip, "interface", c.Interface, "mac", c.MAC.String(), "kind", c.Kind)
		a.burst(t)
	}
	a.stillClaimed(t, c)
}

// takeBack answers and announces a yielded IP again while the conflict lasts: it has
// been quiet for ConflictYieldMax and a device still answers for it, which may be a
// forger keeping it silent. It returns false if the takeover was halted meanwhile.
func (a *Announcer) takeBack(t *takeover) bool {
	now := a.clock.Now()
	t.mu.Lock()
	if t.stopped || t.conflict == nil {
		t.mu.Unlock()
		return false
	}
	a.owners.setQuiet(t.ip, false)
	t.conflict.Contested = now
	mac := t.conflict.MAC
	t.mu.Unlock()
	a.metrics.inc(conflictTakebacks)
	a.log.Info("address conflict: a device still answers for the IP after the longest yield; answering for it again, contested", "ip", t.ip, "mac", mac.String(), "yieldMax", a.cfg.ConflictYieldMax)
	t.defended = now // the takeback burst is this DefendInterval's defence
	a.burst(t)
	return true
}

// stillClaimed follows the foreign device of a conflict: a claim from another MAC
// moves the gauge and is reported as a new conflict.
func (a *Announcer) stillClaimed(t *takeover, c Sighting) {
	t.mu.Lock()
	if t.stopped || t.conflict == nil || bytes.Equal(t.conflict.MAC, c.MAC) {
		t.mu.Unlock()
		return
	}
	a.metrics.clearConflict(t.ip, t.conflict.MAC)
	a.metrics.setConflict(t.ip, c.MAC)
	t.conflict.MAC, t.conflict.Interface = c.MAC, c.Interface
	conf := *t.conflict
	t.mu.Unlock()
	a.log.Info("address conflict: another device claims the IP", "ip", t.ip, "interface", c.Interface, "mac", c.MAC.String(), "kind", c.Kind)
	if a.cfg.OnConflict != nil {
		a.cfg.OnConflict(conf)
	}
}

// clear ends a conflict: the IP is answered again and the conflict reported cleared.
// It returns false if the takeover was halted meanwhile.
func (a *Announcer) clear(t *takeover) bool {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	conf := *t.conflict
	conf.Cleared = a.clock.Now()
	t.conflict = nil
	t.defended = time.Time{}
	a.metrics.clearConflict(t.ip, conf.MAC)
	a.owners.setQuiet(t.ip, false)
	t.mu.Unlock()
	a.log.Info("address conflict cleared: no device answers for the IP; answering again", "ip", t.ip, "mac", conf.MAC.String())
	if a.cfg.OnConflictCleared != nil {
		a.cfg.OnConflictCleared(conf)
	}
	return true
}

// probeRound probes t.ip on every interface it may be announced on, twice, wait/2
// apart so that one lost frame does not hide a device, and listens until wait after
// the first. It returns the first claim heard (peers' only while t.watchPeers), stopped,
// or fired when none was heard. A restart (the interfaces changed) starts the round
// over.
func (a *Announcer) probeRound(t *takeover, wait time.Duration) (waitResult, Sighting) {
	for {
		start := a.clock.Now()
		a.probe(t)
		res, c := a.waitUntil(t, start.Add(wait/2))
		if res == fired {
			a.probe(t)
			res, c = a.waitUntil(t, start.Add(wait))
		}
		if res != restarted {
			return res, c
		}
	}
}

// probe sends one probe for t.ip on every responder of its family whose interface may
// announce it.
func (a *Announcer) probe(t *takeover) {
	targets := *a.targets.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	for _, tg := range targets {
		if tg.ipv4 != t.ip.Is4() || !a.owners.Allowed(t.ip, tg.name) {
			continue
		}
		if err := tg.probe(t.ip); err != nil {
			a.log.Error(err, "probe failed", "ip", t.ip, "interface", tg.name)
		}
	}
}

// claimed receives the claims of every responder: it tells peers from foreign devices,
// hands foreign claims to the IP's takeover loop and reports every claim to OnSighting.
func (a *Announcer) claimed(c Sighting) {
	c.Peer = a.cfg.Peer != nil && a.cfg.Peer(c.MAC)
	a.log.V(1).Info("claim", "ip", c.IP, "interface", c.Interface, "mac", c.MAC.String(), "kind", c.Kind, "peer", c.Peer)
	a.mu.Lock()
	t := a.takeovers[c.IP]
	a.mu.Unlock()
	if c.Peer && t != nil && t.watchPeers.Load() {
		// A peer answering while this node probes, quiet, before taking the IP: the
		// wait WaitForPeers is for, not two nodes answering (no OnSighting, which the
		// speaker counts as a split brain).
		t.claim(c)
		return
	}
	if t != nil && !c.Peer {
		t.claim(c)
	}
	if a.cfg.OnSighting != nil {
		a.cfg.OnSighting(c)
	}
}

// nodeMAC reports whether mac is one of this node's responders' MACs.
func (a *Announcer) nodeMAC(mac net.HardwareAddr) bool {
	for _, tg := range *a.targets.Load() {
		if bytes.Equal(tg.mac, mac) {
			return true
		}
	}
	return false
}

// halt stops t and removes the gauge of its conflict, if any.
func (a *Announcer) halt(t *takeover) {
	if c := t.halt(); c != nil {
		a.metrics.clearConflict(t.ip, c.MAC)
	}
}
