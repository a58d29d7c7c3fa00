package layer2

import (
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
)

// rescan lists the interfaces and reconciles the responders with them: a responder
// per eligible interface and protocol, none elsewhere. A responder whose interface
// vanished, turned ineligible, or came back with another index or MAC is closed (and
// reopened if still eligible). One interface failing to open does not stop the others;
// it is retried at the next scan. IPs allowed on a newly opened responder are
// announced again at once, so a link that comes back up gets its gratuitous frames.
func (a *Announcer) rescan() {
	facts, err := a.sys.interfaces()
	if err != nil {
		a.log.Error(err, "listing interfaces")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	seen := map[string]bool{}
	var fresh []string // interfaces that got a new responder
	for _, f := range facts {
		seen[f.Name] = true
		e := Eligible(f, a.cfg.ExcludeInterfaces)
		a.noteVerdict(f.Name, e)
		if r := a.arp[f.Name]; r != nil && (!e.ARP || !a.same(f, r.mac)) {
			a.closeARP(f.Name, "interface changed or no longer eligible")
		}
		if r := a.ndp[f.Name]; r != nil && (!e.NDP || !a.same(f, r.mac)) {
			a.closeNDP(f.Name, "interface changed or no longer eligible")
		}
		ifi := f.Interface
		if e.ARP && a.arp[f.Name] == nil && a.openARP(&ifi) {
			fresh = append(fresh, f.Name)
		}
		if e.NDP && a.ndp[f.Name] == nil && a.openNDP(&ifi) {
			fresh = append(fresh, f.Name)
		}
		if a.arp[f.Name] != nil || a.ndp[f.Name] != nil {
			a.index[f.Name] = f.Index
		}
	}
	for name := range a.arp {
		if !seen[name] {
			a.closeARP(name, "interface gone")
		}
	}
	for name := range a.ndp {
		if !seen[name] {
			a.closeNDP(name, "interface gone")
		}
	}
	for name := range a.verdicts {
		if !seen[name] {
			delete(a.verdicts, name)
			delete(a.index, name)
		}
	}
	for _, r := range a.ndp {
		if err := r.Rejoin(); err != nil {
			a.log.Error(err, "rejoining solicited-node groups", "interface", r.name)
		}
	}
	a.publishTargets()
	a.scanned = true
	if len(fresh) > 0 {
		for ip, t := range a.takeovers {
			if slices.ContainsFunc(fresh, func(name string) bool { return a.owners.Allowed(ip, name) }) {
				t.again()
			}
		}
	}
}

// same reports whether the interface is the one the responders were opened on.
func (a *Announcer) same(f Facts, mac net.HardwareAddr) bool {
	return a.index[f.Name] == f.Index && bytes.Equal(f.HardwareAddr, mac)
}

// noteVerdict logs an interface's eligibility when it changes.
func (a *Announcer) noteVerdict(name string, e Eligibility) {
	var v string
	switch {
	case e.ARP && e.NDP:
		v = "arp,ndp"
	case e.ARP:
		v = "arp"
	case e.NDP:
		v = "ndp"
	default:
		v = "skipped: " + e.Reason
	}
	if a.verdicts[name] == v {
		return
	}
	a.verdicts[name] = v
	if strings.HasPrefix(v, "skipped") {
		a.log.Info("interface not used", "interface", name, "reason", e.Reason)
	}
}

func (a *Announcer) openARP(ifi *net.Interface) bool {
	c, err := a.sys.listenARP(ifi)
	if err != nil {
		a.log.Error(err, "opening ARP socket", "interface", ifi.Name)
		return false
	}
	r, err := NewARPResponder(ifi, c, a.owners, a.metrics, a.log, a.responderOptions()...)
	if err != nil {
		c.Close()
		a.log.Error(err, "starting ARP responder", "interface", ifi.Name)
		return false
	}
	a.arp[ifi.Name] = r
	a.serve(r.name, "arp", r, func() bool { return a.arp[r.name] == r }, func() { delete(a.arp, r.name) })
	a.log.Info("responder started", "interface", ifi.Name, "protocol", "arp", "mac", r.mac.String())
	return true
}

func (a *Announcer) openNDP(ifi *net.Interface) bool {
	c, err := a.sys.listenNDP(ifi)
	if err != nil {
		a.log.Error(err, "opening NDP socket", "interface", ifi.Name)
		return false
	}
	r, err := NewNDPResponder(ifi, c, a.owners, a.metrics, a.log, a.responderOptions()...)
	if err != nil {
		c.Close()
		a.log.Error(err, "starting NDP responder", "interface", ifi.Name)
		return false
	}
	a.ndp[ifi.Name] = r
	for _, ip := range a.owners.IPs() {
		if ip.Is6() && a.owners.Allowed(ip, r.name) {
			if err := r.Track(ip, true); err != nil {
				a.log.Error(err, "solicited-node group membership", "ip", ip)
			}
		}
	}
	a.serve(r.name, "ndp", r, func() bool { return a.ndp[r.name] == r }, func() { delete(a.ndp, r.name) })
	a.log.Info("responder started", "interface", ifi.Name, "protocol", "ndp", "mac", r.mac.String())
	return true
}

// responderOptions makes a responder report claims to the announcer, leave out the
// node's own MACs, time claims by the announcer's clock and limit answers as
// configured.
func (a *Announcer) responderOptions() []ResponderOption {
	return []ResponderOption{WithSightingHandler(a.claimed), WithNodeMACs(a.nodeMAC), withClock(a.clock),
		WithReplyLimit(a.cfg.ReplyRate, a.cfg.ReplyBurst)}
}

// serve runs a responder's loop. When the loop ends on its own (socket error, e.g. the
// interface went away), the responder is dropped; the next scan reopens it if the
// interface is still eligible.
func (a *Announcer) serve(name, proto string, r interface {
	Serve() error
	io.Closer
}, current func() bool, forget func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		err := r.Serve()
		a.mu.Lock()
		defer a.mu.Unlock()
		if !current() {
			return // closed by rescan or shutdown
		}
		a.log.Error(err, "responder stopped", "interface", name, "protocol", proto)
		r.Close()
		forget()
		a.publishTargets()
	}()
}

func (a *Announcer) closeARP(name, why string) {
	a.arp[name].Close()
	delete(a.arp, name)
	a.log.Info("responder stopped", "interface", name, "protocol", "arp", "reason", why)
}

func (a *Announcer) closeNDP(name, why string) {
	a.ndp[name].Close()
	delete(a.ndp, name)
	a.log.Info("responder stopped", "interface", name, "protocol", "ndp", "reason", why)
}

// publishTargets gives takeover bursts the current responders, sorted by interface.
// Called with a.mu held.
func (a *Announcer) publishTargets() {
	ts := make([]target, 0, len(a.arp)+len(a.ndp))
	for _, r := range a.arp {
		ts = append(ts, target{name: r.name, mac: r.mac, ipv4: true, announce: r.Announce, probe: r.Probe})
	}
	for _, r := range a.ndp {
		ts = append(ts, target{name: r.name, mac: r.mac, announce: r.Announce, probe: r.Probe})
	}
	slices.SortFunc(ts, func(x, y target) int { return strings.Compare(x.name, y.name) })
	a.targets.Store(&ts)
}
