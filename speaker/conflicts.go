package speaker

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/layer2"
)

// What the speaker does with what it sees on the wire (speaker/layer2 detects it):
// another herald speaker answering for an IP this node announces is a split brain,
// counted and logged for the quorum rule to settle; a device that is no speaker
// answering for it (a host given a pool address by hand) is an address conflict,
// which layer2 settles by yielding and this file reports: a Warning Event IPConflict
// on the Services, the VIPStatus reason, and the metric herald_l2_conflict.

// claimLogEvery bounds the log lines about one IP claimed by a peer.
const claimLogEvery = 10 * time.Second

// responderMACs are this node's responders' MACs, sorted, for its record.
func responderMACs(rs []layer2.ResponderInfo) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.MAC.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sighted is layer2's OnSighting: a peer answering for an IP this node announces is
// evidence of a split brain; a foreign device's claims are layer2's to settle.
func (s *Speaker) sighted(c layer2.Sighting) {
	if !c.Peer {
		return
	}
	s.metrics.peerClaims.WithLabelValues(c.IP.String()).Inc()
	s.sightings.mu.Lock()
	last := s.sightings.loggedAt[c.IP]
	log := c.At.Sub(last) >= claimLogEvery
	if log {
		s.sightings.loggedAt[c.IP] = c.At
	}
	s.sightings.mu.Unlock()
	if log {
		s.log.Info("another speaker answers for an IP this node announces", "ip", c.IP, "mac", c.MAC.String(), "interface", c.Interface, "kind", string(c.Kind))
	}
}

// conflicted is layer2's OnConflict and OnConflictCleared. Its Events are limited per
// IP and reason (conflictEventEvery); the VIPStatus always follows.
func (s *Speaker) conflicted(c layer2.Conflict) {
	defer s.pokeElection() // the VIPStatus follows
	typ, reason := corev1.EventTypeWarning, heraldv1.ReasonIPConflict
	if !c.Cleared.IsZero() {
		typ, reason = corev1.EventTypeNormal, heraldv1.ReasonIPConflictResolved
	}
	ok, held := s.sightings.events.allow(c.IP, reason, time.Now())
	if !ok {
		s.metrics.conflictEventsSuppressed.Inc()
		return
	}
	note := conflictNote(s.cfg.NodeName, c)
	if !c.Cleared.IsZero() {
		note = fmt.Sprintf("%s is no longer claimed by %s: announcing it from %s again", c.IP, c.MAC, s.cfg.NodeName)
	}
	s.reports.event(s.servicesOf(c.IP), typ, reason, note+heldBack(held))
}

// heldBack is the tail of an Event that follows held-back ones.
func heldBack(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d more like this in the last %s were not written as Events)", n, conflictEventEvery)
}

// conflictNote says, for the Event and the VIPStatus, who claims the IP and what
// herald does about it.
func conflictNote(self string, c layer2.Conflict) string {
	what := "stopped answering for it"
	switch {
	case !c.Contested.IsZero():
		what = "answers for it again, contested, as the device kept claiming it past the longest yield"
	case c.BeforeAnnounce:
		what = "found it in use before announcing it and does not announce it"
	}
	return fmt.Sprintf("%s is claimed by %s on %s, a device that is not a herald speaker: %s %s; it checks again periodically and announces the IP once the device is gone. Give the device another address or remove the IP from the pool",
		c.IP, c.MAC, c.Interface, self, what)
}

// servicesOf returns the Services holding ip, if this node announces it.
func (s *Speaker) servicesOf(ip netip.Addr) []string {
	s.announcing.mu.Lock()
	defer s.announcing.mu.Unlock()
	return slices.Clone(s.announcing.services[ip])
}

// conflicts returns the IPs layer2 yielded to foreign devices, among those owned.
func (s *Speaker) conflicts(owned []netip.Addr) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, ip := range owned {
		if c, ok := s.l2.Conflict(ip); ok {
			out[ip] = conflictNote(s.cfg.NodeName, c)
		}
	}
	return out
}
