package election

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
)

// Elect decides, for every IP held by services, which node announces it (see the package
// doc for the rule). Decisions are sorted by IP, one per distinct IP.
//
// Only the Services passed are considered. To re-elect after one Service changed, pass it
// with every Service holding one of its IPs (and, transitively, theirs): a group must be
// elected whole or its owner may differ from the full election's.
func Elect(v View, services []Service) []Decision {
	e := newElector(newCluster(v))
	var out []Decision
	for _, g := range groupIPs(services) {
		out = e.elect(&g, out)
	}
	slices.SortFunc(out, func(a, b Decision) int { return a.IP.Compare(b.IP) })
	return out
}

// elector holds the per-node scratch space reused from group to group.
type elector struct {
	c            *cluster
	cover, ready []int32 // per node: active Services fitted at all / fully
	touched      []int   // nodes with cover > 0
	localFit     []fit   // per node: best fit of the current Local Service
	localSeen    []int   // nodes with localFit set
	union        bitset  // nodes some active Service's ads select
	nodeSets     []bitset
	ranked       []candidate
	hashes       [][sha256.Size]byte // per node, for the current group
}

// candidate is a node with its rank for the current group. Kept small so sorting moves
// little: the full hash lives in elector.hashes and is read only when the first 8 bytes
// tie.
type candidate struct {
	cover, ready int32
	prefix       uint64 // first 8 bytes of the hash, big-endian
	node         int
}

func newElector(c *cluster) *elector {
	n := len(c.names)
	return &elector{
		c:        c,
		cover:    make([]int32, n),
		ready:    make([]int32, n),
		localFit: make([]fit, n),
		hashes:   make([][sha256.Size]byte, n),
		union:    newBitset(n),
	}
}

// elect decides one group and appends a Decision per IP of it to out.
func (e *elector) elect(g *group, out []Decision) []Decision {
	services := e.evaluate(g)
	var active []*service
	for i := range services {
		if services[i].reason == "" {
			active = append(active, &services[i])
		}
	}
	if len(active) == 0 {
		reason, msg := inactiveReason(g, services)
		return appendNoOwner(out, g, reason, msg)
	}

	e.union.clear()
	for _, sv := range active {
		e.union.or(sv.nodes)
		if sv.Local {
			e.addLocal(sv)
		} else {
			sv.nodes.each(func(i int) { e.add(i, fitReady) })
		}
	}
	inc, over := e.incumbent(g)
	ranked := e.rank(g.key(), inc, over)
	e.reset()
	if len(ranked) == 0 {
		reason, msg := e.c.noCandidate(g, active, e.union)
		return appendNoOwner(out, g, reason, msg)
	}

	owner := ranked[0].node
	names := make([]string, len(ranked))
	for i, r := range ranked {
		names[i] = e.c.names[r.node]
	}
	ifaces := e.c.interfaces(active, owner)
	for k, ip := range g.ips {
		d := Decision{IP: ip, Key: g.key(), Owner: names[0], Candidates: names, Interfaces: ifaces}
		if k > 0 { // each Decision owns its slices
			d.Candidates, d.Interfaces = slices.Clone(names), slices.Clone(ifaces)
		}
		for _, p := range g.holders[k] {
			sv := &services[p]
			d.Services = append(d.Services, sv.Key)
			if sv.reason == "" && e.c.fitOn(sv, owner) == fitNone {
				d.Unserved = append(d.Unserved, sv.Key)
			}
		}
		d.Services, d.Unserved = sortedSet(d.Services), sortedSet(d.Unserved)
		out = append(out, d)
	}
	return out
}

// evaluate derives every Service of g, giving each its own node set from e.nodeSets.
func (e *elector) evaluate(g *group) []service {
	for len(e.nodeSets) < len(g.services) {
		e.nodeSets = append(e.nodeSets, newBitset(len(e.c.names)))
	}
	out := make([]service, len(g.services))
	for i, s := range g.services {
		e.nodeSets[i].clear()
		out[i] = e.c.evaluate(s, e.nodeSets[i])
	}
	return out
}

func (e *elector) add(i int, f fit) {
	if e.cover[i] == 0 {
		e.touched = append(e.touched, i)
	}
	e.cover[i]++
	if f == fitReady {
		e.ready[i]++
	}
}

// addLocal adds, once per node, the best fit of the node's endpoints of sv.
func (e *elector) addLocal(sv *service) {
	for _, ep := range sv.Endpoints {
		i, ok := e.c.index[ep.Node]
		if !ok || !sv.nodes.has(i) {
			continue
		}
		f := endpointFit(ep)
		if f == fitNone {
			continue
		}
		if e.localFit[i] == fitNone {
			e.localSeen = append(e.localSeen, i)
		}
		e.localFit[i] = max(e.localFit[i], f)
	}
	for _, i := range e.localSeen {
		e.add(i, e.localFit[i])
		e.localFit[i] = fitNone
	}
	e.localSeen = e.localSeen[:0]
}

// incumbent returns the index of the eligible node that View.Incumbents names for the
// IPs of g and the names of the nodes it stands in for; -1 when none does or the IPs
// name different nodes.
func (e *elector) incumbent(g *group) (int, map[string]bool) {
	at := -1
	var over map[string]bool
	for _, ip := range g.ips {
		inc, ok := e.c.incumbents[ip]
		if !ok {
			continue
		}
		i, eligible := e.c.index[inc.Node]
		if !eligible || (at >= 0 && at != i) {
			return -1, nil
		}
		at = i
		if over == nil {
			over = map[string]bool{}
		}
		for _, n := range inc.Over {
			over[n] = true
		}
	}
	return at, over
}

// rank orders the touched nodes: more Services fitted, then more fitted fully, then
// smaller NodeHash; then, among the best (equal on both fits), the incumbent moves
// ahead of the nodes it stands in for.
func (e *elector) rank(key netip.Addr, incumbent int, over map[string]bool) []candidate {
	suffix := hashSuffix(key)
	r := e.ranked[:0]
	for _, i := range e.touched {
		h := &e.hashes[i]
		*h = hashWithSuffix(e.c.names[i], suffix)
		r = append(r, candidate{cover: e.cover[i], ready: e.ready[i], prefix: binary.BigEndian.Uint64(h[:8]), node: i})
	}
	slices.SortFunc(r, func(a, b candidate) int {
		switch {
		case a.cover != b.cover:
			return cmp.Compare(b.cover, a.cover)
		case a.ready != b.ready:
			return cmp.Compare(b.ready, a.ready)
		case a.prefix != b.prefix:
			return cmp.Compare(a.prefix, b.prefix)
		}
		return compareHash(&e.hashes[a.node], &e.hashes[b.node], e.c.names[a.node], e.c.names[b.node])
	})
	e.ranked = r
	if incumbent < 0 || len(r) == 0 {
		return r
	}
	// The incumbent passes the best nodes it stands in for, and stops at the first it
	// does not (or at itself).
	for k := range r {
		c := r[k]
		if c.cover != r[0].cover || c.ready != r[0].ready {
			break
		}
		if c.node == incumbent {
			copy(r[1:k+1], r[:k])
			r[0] = c
			break
		}
		if !over[e.c.names[c.node]] {
			break
		}
	}
	return r
}

func (e *elector) reset() {
	for _, i := range e.touched {
		e.cover[i], e.ready[i] = 0, 0
	}
	e.touched = e.touched[:0]
}

// interfaces is the union of the Interfaces of the ads that cover an active Service and
// select owner; nil (every interface) as soon as one of them names none.
func (c *cluster) interfaces(active []*service, owner int) []string {
	var out []string
	for _, sv := range active {
		for _, a := range sv.ads {
			ad := &c.ads[a]
			if !ad.nodes.has(owner) {
				continue
			}
			if len(ad.Interfaces) == 0 {
				return nil
			}
			out = append(out, ad.Interfaces...)
		}
	}
	return sortedSet(out)
}

func appendNoOwner(out []Decision, g *group, reason Reason, msg string) []Decision {
	for k, ip := range g.ips {
		d := Decision{IP: ip, Key: g.key(), Reason: reason, Message: msg}
		for _, p := range g.holders[k] {
			d.Services = append(d.Services, g.services[p].Key)
		}
		d.Services = sortedSet(d.Services)
		out = append(out, d)
	}
	return out
}

func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
