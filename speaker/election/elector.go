package election

import (
	"net/netip"
	"slices"
)

// Elector elects like Elect, and keeps the last inputs and results so that the next
// election redoes only what changed. A membership change re-ranks only the groups whose
// kept best candidates it touches (the node that died among them, or the node that
// joined ranking before their last), a changed Service only its group; a change of the
// Advertisements, or many nodes joining at once, elects everything again. The answers
// are Elect's, whatever the history (elector_test.go).
//
// Per group it keeps the best few candidates in rank order (enough to list
// MaxCandidates and to apply the incumbent rule), not the full ranking: a node's rank
// for a group depends only on that node, the group's Services and its key, so removing
// a node deletes it from the list and adding one inserts it where its hash places it.
// When deaths leave too few to decide, the group is ranked again from scratch.
//
// The zero Elector is ready to use. It is not safe for concurrent use. The Decisions it
// returns share their slices with the ones it keeps: read them, do not modify them.
type Elector struct {
	valid    bool                   // the state below describes the last election
	ads      []string               // fingerprints of the last Advertisements, sorted
	selected map[string]bitset      // eligible node -> the ads (in fingerprint order) selecting it
	excluded clusterSummary         // the live members that are not eligible, for messages
	services map[string]*Service    // the last Services by key, canonical copies
	groupOf  map[string]*groupState // by Service key; absent for a Service without IP
	byIP     map[netip.Addr]*groupState
	groups   map[*groupState]bool
	incs     map[netip.Addr]Incumbent // the last View.Incumbents, copied
	out      []Decision               // the last result, sorted by IP
	last     electionStats
}

// electionStats says how much the last election redid, for tests and benchmarks.
type electionStats struct {
	full   bool // everything elected again
	ranked int  // groups ranked from scratch
}

// clusterSummary is what the no-owner messages say about the members besides the
// eligible nodes.
type clusterSummary struct {
	unknown, unavailable, excluded []string
	live                           int
}

func summarize(c *cluster) clusterSummary {
	return clusterSummary{unknown: c.unknown, unavailable: c.unavailable, excluded: c.excluded, live: c.live}
}

func (a clusterSummary) equal(b clusterSummary) bool {
	return a.live == b.live && slices.Equal(a.unknown, b.unknown) &&
		slices.Equal(a.unavailable, b.unavailable) && slices.Equal(a.excluded, b.excluded)
}

// Elect returns what Elect(v, services) returns.
func (e *Elector) Elect(v View, services []Service) []Decision {
	e.last = electionStats{}
	diff, ok := e.diffServices(services)
	if !ok { // duplicate keys, a caller bug: keyed bookkeeping cannot follow it
		*e = Elector{last: electionStats{full: true}}
		return Elect(v, services)
	}
	prints, ads := canonicalAds(v.Advertisements)
	v.Advertisements = ads // their order does not matter, their positions do
	c := newCluster(v)
	selected := selection(c)
	gone, joined := diffNodes(e.selected, selected)
	if !e.valid || !slices.Equal(prints, e.ads) || len(joined) > len(c.names)/4+1 {
		e.reset()
		e.ads = prints
		e.last.full = true
		diff, _ = e.diffServices(services)
	}
	u := update{
		c:       c,
		gone:    gone,
		joined:  joined,
		moved:   map[string]bool{},
		changed: len(gone)+len(joined) > 0 || !e.excluded.equal(summarize(c)),
	}
	for n := range gone {
		u.moved[n] = true
	}
	for _, j := range joined {
		u.moved[c.names[j]] = true
	}
	fresh, regrouped := e.regroup(diff)
	u.incumbentsChanged = e.updateIncumbents(v.Incumbents)
	var touched []*groupState
	for g := range e.groups {
		if g.fresh {
			continue
		}
		if rerank, changed := u.refresh(g); rerank {
			g.fresh = true
			fresh = append(fresh, g)
		} else if changed {
			touched = append(touched, g)
		}
	}
	r := newRanker(c)
	for _, g := range fresh {
		g.rank(r)
		g.fresh = false
	}
	e.valid, e.selected, e.excluded = true, selected, summarize(c)
	e.last.ranked = len(fresh)
	return e.output(regrouped, append(touched, fresh...))
}

func (e *Elector) reset() {
	*e = Elector{
		last:     e.last,
		services: map[string]*Service{},
		groupOf:  map[string]*groupState{},
		byIP:     map[netip.Addr]*groupState{},
		groups:   map[*groupState]bool{},
		incs:     map[netip.Addr]Incumbent{},
	}
}

// serviceDiff is how the Services of an election differ from the last ones.
type serviceDiff struct {
	seen  map[string]bool      // the keys of the new Services
	known int                  // how many of them the last Services had
	again []Service            // canonical copies of the new and changed Services
	dirty map[*groupState]bool // the groups holding one of them, or an IP of one
}

// diffServices compares services with the last ones, changing nothing; false when two
// of them have the same key.
func (e *Elector) diffServices(services []Service) (serviceDiff, bool) {
	d := serviceDiff{seen: make(map[string]bool, len(services)), dirty: map[*groupState]bool{}}
	for i := range services {
		s := &services[i]
		if d.seen[s.Key] {
			return d, false
		}
		d.seen[s.Key] = true
		old, ok := e.services[s.Key]
		if ok {
			d.known++
		}
		if ok && sameService(old, s) {
			continue
		}
		cp := canonicalService(s)
		d.again = append(d.again, cp)
		if g := e.groupOf[s.Key]; g != nil {
			d.dirty[g] = true
		}
		for _, ip := range cp.IPs {
			if g := e.byIP[ip]; g != nil {
				d.dirty[g] = true
			}
		}
	}
	return d, true
}

// regroup takes in the new Services: the groups holding a Service that changed, came or
// went, or an IP of one, are replaced by new groups of their Services; it returns the
// new groups, to be ranked, and whether any group was replaced or dropped.
func (e *Elector) regroup(d serviceDiff) ([]*groupState, bool) {
	seen, again, dirty := d.seen, d.again, d.dirty
	if d.known < len(e.services) { // some are gone
		for key := range e.services {
			if !seen[key] {
				if g := e.groupOf[key]; g != nil {
					dirty[g] = true
				}
				delete(e.services, key)
				delete(e.groupOf, key)
			}
		}
	}
	if len(again) == 0 && len(dirty) == 0 {
		return nil, false
	}
	changed := make(map[string]bool, len(again))
	for _, s := range again {
		changed[s.Key] = true
	}
	for g := range dirty {
		for _, s := range g.group.services {
			if !changed[s.Key] && seen[s.Key] {
				again = append(again, *s)
			}
		}
		for _, ip := range g.ips {
			delete(e.byIP, ip)
		}
		delete(e.groups, g)
	}
	for i := range again {
		s := &again[i]
		e.services[s.Key] = s
		delete(e.groupOf, s.Key)
	}
	var fresh []*groupState
	for _, g := range groupIPs(again) {
		gs := newGroupState(g)
		for _, s := range g.services {
			e.groupOf[s.Key] = gs
		}
		for _, ip := range g.ips {
			e.byIP[ip] = gs
		}
		e.groups[gs] = true
		fresh = append(fresh, gs)
	}
	return fresh, true
}

// updateIncumbents takes in the new incumbents and returns the groups holding an IP
// whose incumbent changed.
func (e *Elector) updateIncumbents(next map[netip.Addr]Incumbent) map[*groupState]bool {
	out := map[*groupState]bool{}
	mark := func(ip netip.Addr) {
		if g := e.byIP[ip]; g != nil {
			out[g] = true
		}
	}
	for ip, inc := range next {
		if old, ok := e.incs[ip]; !ok || !sameIncumbent(old, inc) {
			e.incs[ip] = Incumbent{Node: inc.Node, Over: slices.Clone(inc.Over)}
			mark(ip)
		}
	}
	for ip := range e.incs {
		if _, ok := next[ip]; !ok {
			delete(e.incs, ip)
			mark(ip)
		}
	}
	return out
}

// output writes the Decisions of the groups given into the last result, or sorts all
// again when groups were replaced, and returns a copy.
func (e *Elector) output(relayout bool, changed []*groupState) []Decision {
	if relayout {
		type placed struct {
			g *groupState
			k int
		}
		all := make([]placed, 0, len(e.byIP))
		for g := range e.groups {
			for k := range g.decisions {
				all = append(all, placed{g, k})
			}
		}
		slices.SortFunc(all, func(a, b placed) int { return a.g.decisions[a.k].IP.Compare(b.g.decisions[b.k].IP) })
		e.out = make([]Decision, len(all))
		for i, p := range all {
			p.g.at[p.k] = i
		}
		changed = changed[:0]
		for g := range e.groups {
			changed = append(changed, g)
		}
	}
	for _, g := range changed {
		for k, d := range g.decisions {
			e.out[g.at[k]] = d
		}
	}
	if len(e.out) == 0 {
		return nil // as Elect
	}
	return slices.Clone(e.out)
}
