package election

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
)

// MaxCandidates is how many candidates a Decision lists: the owner and the nodes next
// in line. The full ranking is O(nodes) per IP (10 million names at 1,000 nodes and
// 10,000 IPs) and nobody reads past the runner-up (speaker/counters.go); keeping a
// few lets an Elector re-elect after a membership change without ranking every node.
const MaxCandidates = 3

// Elect decides, for every IP held by services, which node announces it (see the package
// doc for the rule). Decisions are sorted by IP, one per distinct IP.
//
// Only the Services passed are considered. To re-elect after one Service changed, pass it
// with every Service holding one of its IPs (and, transitively, theirs): a group must be
// elected whole or its owner may differ from the full election's. An Elector does this
// bookkeeping and re-elects only what a change can move.
func Elect(v View, services []Service) []Decision {
	return electListing(v, services, MaxCandidates)
}

// electListing is Elect with up to listed candidates per Decision (the tests list them
// all to compare with a naive reading of the rule).
func electListing(v View, services []Service, listed int) []Decision {
	r := newRanker(newCluster(v))
	var out []Decision
	for _, g := range groupIPs(services) {
		res := r.rankGroup(&g)
		if len(res.ranked) == 0 {
			out = r.appendNoCandidate(out, &g, res)
			continue
		}
		owner, _ := standIn(len(res.ranked), func(k int) (int32, int32, string) {
			c := &res.ranked[k]
			return c.cover, c.ready, r.c.names[c.node]
		}, res.incumbent, res.over)
		n := min(listed, len(res.ranked))
		names := listFirst(n, owner, func(k int) string { return r.c.names[res.ranked[k].node] })
		out = r.c.appendDecisions(out, &g, res.services, res.active, names)
	}
	slices.SortFunc(out, func(a, b Decision) int { return a.IP.Compare(b.IP) })
	return out
}

// ranker holds the per-node scratch space reused from group to group.
type ranker struct {
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
// little: the full hash lives in ranker.hashes and is read only when the first 8 bytes
// tie.
type candidate struct {
	cover, ready int32
	prefix       uint64 // first 8 bytes of the hash, big-endian
	node         int
}

func newRanker(c *cluster) *ranker {
	n := len(c.names)
	return &ranker{
		c:        c,
		cover:    make([]int32, n),
		ready:    make([]int32, n),
		localFit: make([]fit, n),
		hashes:   make([][sha256.Size]byte, n),
		union:    newBitset(n),
	}
}

// ranking is one group ranked: its Services evaluated and its candidates in the order of
// ranks 1 to 3, before the incumbent rule. ranked and the node sets of services are
// scratch space, valid until the next group.
type ranking struct {
	services  []service
	active    []*service
	ranked    []candidate
	incumbent string          // the eligible node the group's IPs name; "" if none
	over      map[string]bool // the nodes the incumbent stands in for
}

// rankGroup evaluates the Services of g and ranks every eligible node that fits one.
func (r *ranker) rankGroup(g *group) ranking {
	res := ranking{services: r.evaluate(g)}
	for i := range res.services {
		if res.services[i].reason == "" {
			res.active = append(res.active, &res.services[i])
		}
	}
	if len(res.active) == 0 {
		return res
	}
	r.union.clear()
	for _, sv := range res.active {
		r.union.or(sv.nodes)
		if sv.Local {
			r.addLocal(sv)
		} else {
			sv.nodes.each(func(i int) { r.add(i, fitReady) })
		}
	}
	res.incumbent, res.over = r.c.incumbent(g)
	res.ranked = r.rank(g.key())
	r.reset()
	return res
}

// appendNoCandidate appends the Decisions of a group nobody may announce.
func (r *ranker) appendNoCandidate(out []Decision, g *group, res ranking) []Decision {
	if len(res.active) == 0 {
		reason, msg := inactiveReason(g, res.services)
		return appendNoOwner(out, g, reason, msg)
	}
	reason, msg := r.c.noCandidate(g, res.active, r.union)
	return appendNoOwner(out, g, reason, msg)
}

// standIn applies the incumbent rule to the first n candidates in rank order (at gives
// the k-th's ranks 1 and 2 and name): the incumbent passes the best candidates it stands
// in for, and stops at the first it does not (or at itself). It returns the position of
// the owner (0 unless the incumbent passes somebody) and where the walk stopped: n when
// it ran past the candidates given, which decides only if they are all of them.
func standIn(n int, at func(k int) (cover, ready int32, name string), incumbent string, over map[string]bool) (owner, stop int) {
	if incumbent == "" || n == 0 {
		return 0, 0
	}
	cover0, ready0, _ := at(0)
	for k := range n {
		cover, ready, name := at(k)
		switch {
		case cover != cover0 || ready != ready0:
			return 0, k
		case name == incumbent:
			return k, k
		case !over[name]:
			return 0, k
		}
	}
	return 0, n
}

// listFirst returns the names of the first n candidates once the owner (at position
// owner in rank order) moved to the front.
func listFirst(n, owner int, name func(k int) string) []string {
	out := make([]string, 0, n)
	out = append(out, name(owner))
	for k := 0; len(out) < n; k++ {
		if k != owner {
			out = append(out, name(k))
		}
	}
	return out
}

// appendDecisions appends a Decision per IP of g, owned by names[0], listing names.
func (c *cluster) appendDecisions(out []Decision, g *group, services []service, active []*service, names []string) []Decision {
	owner := c.index[names[0]]
	ifaces := c.interfaces(active, owner)
	for k, ip := range g.ips {
		d := Decision{IP: ip, Key: g.key(), Owner: names[0], Candidates: names, Interfaces: ifaces}
		if k > 0 { // each Decision owns its slices
			d.Candidates, d.Interfaces = slices.Clone(names), slices.Clone(ifaces)
		}
		for _, p := range g.holders[k] {
			sv := &services[p]
			d.Services = append(d.Services, sv.Key)
			if sv.reason == "" && c.fitOn(sv, owner) == fitNone {
				d.Unserved = append(d.Unserved, sv.Key)
			}
		}
		d.Services, d.Unserved = sortedSet(d.Services), sortedSet(d.Unserved)
		out = append(out, d)
	}
	return out
}

// evaluate derives every Service of g, giving each its own node set from r.nodeSets.
func (r *ranker) evaluate(g *group) []service {
	for len(r.nodeSets) < len(g.services) {
		r.nodeSets = append(r.nodeSets, newBitset(len(r.c.names)))
	}
	out := make([]service, len(g.services))
	for i, s := range g.services {
		r.nodeSets[i].clear()
		out[i] = r.c.evaluate(s, r.nodeSets[i])
	}
	return out
}

func (r *ranker) add(i int, f fit) {
	if r.cover[i] == 0 {
		r.touched = append(r.touched, i)
	}
	r.cover[i]++
	if f == fitReady {
		r.ready[i]++
	}
}

// addLocal adds, once per node, the best fit of the node's endpoints of sv.
func (r *ranker) addLocal(sv *service) {
	for _, ep := range sv.Endpoints {
		i, ok := r.c.index[ep.Node]
		if !ok || !sv.nodes.has(i) {
			continue
		}
		f := endpointFit(ep)
		if f == fitNone {
			continue
		}
		if r.localFit[i] == fitNone {
			r.localSeen = append(r.localSeen, i)
		}
		r.localFit[i] = max(r.localFit[i], f)
	}
	for _, i := range r.localSeen {
		r.add(i, r.localFit[i])
		r.localFit[i] = fitNone
	}
	r.localSeen = r.localSeen[:0]
}

// incumbent returns the eligible node that View.Incumbents names for the IPs of g and
// the nodes it stands in for; "" when none does or the IPs name different nodes.
func (c *cluster) incumbent(g *group) (string, map[string]bool) {
	return incumbentOf(g.ips, c.incumbents, func(n string) bool { _, ok := c.index[n]; return ok })
}

// incumbentOf is cluster.incumbent for any set of eligible nodes.
func incumbentOf(ips []netip.Addr, incumbents map[netip.Addr]Incumbent, eligible func(string) bool) (string, map[string]bool) {
	at := ""
	var over map[string]bool
	for _, ip := range ips {
		inc, ok := incumbents[ip]
		if !ok {
			continue
		}
		if !eligible(inc.Node) || (at != "" && at != inc.Node) {
			return "", nil
		}
		at = inc.Node
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
// smaller NodeHash.
func (r *ranker) rank(key netip.Addr) []candidate {
	suffix := hashSuffix(key)
	ranked := r.ranked[:0]
	for _, i := range r.touched {
		h := &r.hashes[i]
		*h = hashWithSuffix(r.c.names[i], suffix)
		ranked = append(ranked, candidate{cover: r.c.rankedCover(i, r.cover[i]), ready: r.ready[i], prefix: binary.BigEndian.Uint64(h[:8]), node: i})
	}
	slices.SortFunc(ranked, func(a, b candidate) int {
		switch {
		case a.cover != b.cover:
			return cmp.Compare(b.cover, a.cover)
		case a.ready != b.ready:
			return cmp.Compare(b.ready, a.ready)
		case a.prefix != b.prefix:
			return cmp.Compare(a.prefix, b.prefix)
		}
		return compareHash(&r.hashes[a.node], &r.hashes[b.node], r.c.names[a.node], r.c.names[b.node])
	})
	r.ranked = ranked
	return ranked
}

// leavingPenalty takes a leaving node's cover below any node's that is not leaving: it
// ranks after them all, and the incumbent rule, which passes only candidates of equal
// cover, never keeps it ahead of one.
const leavingPenalty = 1 << 24

// rankedCover is the cover node i ranks by when it fits cover active Services.
func (c *cluster) rankedCover(i int, cover int32) int32 {
	if c.leaving[i] {
		return cover - leavingPenalty
	}
	return cover
}

func (r *ranker) reset() {
	for _, i := range r.touched {
		r.cover[i], r.ready[i] = 0, 0
	}
	r.touched = r.touched[:0]
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
