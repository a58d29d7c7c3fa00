package speaker

import (
	"maps"
	"net/netip"
	"slices"

	"herald.dev/herald/speaker/election"
)

// Tracker remembers the last election's outcome and turns each new one into what
// this node must do: IPs to take over, owned IPs whose interfaces or Services changed,
// and IPs to give up. It is pure; the speaker applies its plans.
type Tracker struct {
	self string
	// owners is the last decided owner of every IP ("" when nobody announces it).
	owners map[netip.Addr]string
	// owned are the decisions of the IPs this node announces.
	owned map[netip.Addr]election.Decision
}

// NewTracker returns a tracker for the node named self, owning nothing.
func NewTracker(self string) *Tracker {
	return &Tracker{self: self, owners: map[netip.Addr]string{}, owned: map[netip.Addr]election.Decision{}}
}

// Plan is what one election asks of this node.
type Plan struct {
	// Take are the IPs this node starts announcing.
	Take []Takeover
	// Change are owned IPs whose interfaces or Services changed.
	Change []election.Decision
	// Release are the IPs this node stops announcing.
	Release []Release
	// Unowned are the IPs that now have no owner although they had one (or are new):
	// the decisions carry the reason.
	Unowned []election.Decision
}

// Takeover is an IP this node starts announcing, with the owner the previous election
// gave it ("" when nobody, or when this node has just started and knows no past).
type Takeover struct {
	election.Decision
	Previous string
	// Known: this tracker saw the IP before (it may have announced it itself); false
	// for an IP new to it, which nobody may have announced yet.
	Known bool
}

// Release is an IP this node stops announcing, with its new owner ("" when nobody,
// or the IP is gone).
type Release struct {
	IP       netip.Addr
	Services []string
	Next     string
}

// Empty says whether the plan changes nothing this node does.
func (p Plan) Empty() bool {
	return len(p.Take) == 0 && len(p.Change) == 0 && len(p.Release) == 0
}

// Apply records the decisions of a complete election (every IP of every Service) and
// returns the plan. IPs missing from decisions are gone: released if owned. With take
// false (a speaker that may keep its IPs but take none) an IP elected to this node that
// it does not announce yet is left as it was.
func (t *Tracker) Apply(decisions []election.Decision, take bool) Plan {
	var p Plan
	seen := make(map[netip.Addr]bool, len(decisions))
	for _, d := range decisions {
		seen[d.IP] = true
		prev, known := t.owners[d.IP]
		t.owners[d.IP] = d.Owner
		old, owned := t.owned[d.IP]
		switch {
		case d.Owner == t.self && !owned && !take:
			if known {
				t.owners[d.IP] = prev
			} else {
				delete(t.owners, d.IP)
			}
			continue
		case d.Owner == t.self && !owned:
			t.owned[d.IP] = d
			p.Take = append(p.Take, Takeover{Decision: d, Previous: prev, Known: known})
		case d.Owner == t.self:
			t.owned[d.IP] = d
			if !slices.Equal(old.Interfaces, d.Interfaces) || !slices.Equal(old.Services, d.Services) ||
				(old.Interfaces == nil) != (d.Interfaces == nil) {
				p.Change = append(p.Change, d)
			}
		case owned:
			delete(t.owned, d.IP)
			p.Release = append(p.Release, Release{IP: d.IP, Services: old.Services, Next: d.Owner})
		}
		if d.Owner == "" && (!known || prev != "") {
			p.Unowned = append(p.Unowned, d)
		}
	}
	for ip := range t.owners {
		if seen[ip] {
			continue
		}
		delete(t.owners, ip)
		if old, owned := t.owned[ip]; owned {
			delete(t.owned, ip)
			p.Release = append(p.Release, Release{IP: ip, Services: old.Services})
		}
	}
	slices.SortFunc(p.Release, func(a, b Release) int { return a.IP.Compare(b.IP) })
	return p
}

// Owned returns the decision of ip if this node announces it.
func (t *Tracker) Owned(ip netip.Addr) (election.Decision, bool) {
	d, ok := t.owned[ip]
	return d, ok
}

// OwnedIPs returns the IPs this node announces, sorted.
func (t *Tracker) OwnedIPs() []netip.Addr {
	return slices.SortedFunc(maps.Keys(t.owned), netip.Addr.Compare)
}

// Silence releases every IP this node announces, for a speaker that must announce
// nothing (speaker/quorum). Who announces them meanwhile is unknown to it, so it
// forgets their owners, but not that they exist.
func (t *Tracker) Silence() Plan {
	var p Plan
	for ip, d := range t.owned {
		p.Release = append(p.Release, Release{IP: ip, Services: d.Services})
		delete(t.owned, ip)
		t.owners[ip] = "" // who announces it meanwhile is unknown; the IP is not new
	}
	slices.SortFunc(p.Release, func(a, b Release) int { return a.IP.Compare(b.IP) })
	return p
}
