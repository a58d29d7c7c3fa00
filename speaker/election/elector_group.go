package election

import (
	"cmp"
	"crypto/sha256"
	"slices"
)

// keptCandidates is how many of a group's best candidates an Elector keeps beyond what
// the incumbent rule needs: MaxCandidates to list, and two more so that a death among
// them seldom leaves too few and sends the group to a full ranking.
const keptCandidates = MaxCandidates + 2

// groupState is a group as an Elector keeps it between elections.
type groupState struct {
	group
	suffix    string    // "#key", hashed after a node's name
	services  []service // evaluated (node sets dropped: they depend on the view)
	active    []*service
	best      []rankedNode // the best candidates in rank order, before the incumbent rule
	complete  bool         // best holds every candidate
	decisions []Decision
	at        []int // positions of decisions in Elector.out
	fresh     bool  // to be ranked from scratch in this election
}

// rankedNode is a candidate of a group with what ranks it.
type rankedNode struct {
	name         string
	cover, ready int32
	hash         [sha256.Size]byte
}

func newGroupState(g group) *groupState {
	return &groupState{group: g, suffix: hashSuffix(g.key()), at: make([]int, len(g.ips)), fresh: true}
}

// compareRanked is the order of ranker.rank: more Services fitted, more fitted fully,
// smaller hash, smaller name.
func compareRanked(a, b rankedNode) int {
	switch {
	case a.cover != b.cover:
		return cmp.Compare(b.cover, a.cover)
	case a.ready != b.ready:
		return cmp.Compare(b.ready, a.ready)
	}
	return compareHash(&a.hash, &b.hash, a.name, b.name)
}

// rank ranks g from scratch over r's cluster and decides it.
func (g *groupState) rank(r *ranker) {
	res := r.rankGroup(&g.group)
	for i := range res.services {
		res.services[i].nodes = nil // ranker scratch space
	}
	g.services, g.active = res.services, res.active
	if len(res.ranked) == 0 {
		g.best, g.complete = nil, true
		g.decisions = r.appendNoCandidate(g.decisions[:0], &g.group, res)
		return
	}
	_, stop := standIn(len(res.ranked), func(k int) (int32, int32, string) {
		c := &res.ranked[k]
		return c.cover, c.ready, r.c.names[c.node]
	}, res.incumbent, res.over)
	n := min(max(keptCandidates, stop+1), len(res.ranked))
	g.best = make([]rankedNode, n)
	for k, c := range res.ranked[:n] {
		g.best[k] = rankedNode{name: r.c.names[c.node], cover: c.cover, ready: c.ready, hash: r.hashes[c.node]}
	}
	g.complete = n == len(res.ranked)
	if !g.decide(r.c) {
		panic("election: a group just ranked cannot be decided") // n covers the walk
	}
}

// decide applies the incumbent rule to the kept candidates and writes the Decisions. It
// returns false, having changed nothing, when they are too few to decide.
func (g *groupState) decide(c *cluster) bool {
	inc, over := c.incumbent(&g.group)
	owner, stop := standIn(len(g.best), func(k int) (int32, int32, string) {
		b := &g.best[k]
		return b.cover, b.ready, b.name
	}, inc, over)
	if !g.complete && (stop >= len(g.best) || len(g.best) < MaxCandidates) {
		return false
	}
	if keep := max(keptCandidates, stop+1); len(g.best) > keep {
		g.best, g.complete = g.best[:keep:keep], false
	}
	names := listFirst(min(MaxCandidates, len(g.best)), owner, func(k int) string { return g.best[k].name })
	g.decisions = c.appendDecisions(g.decisions[:0], &g.group, g.services, g.active, names)
	return true
}

// update is what one election changes for the groups an Elector keeps.
type update struct {
	c                 *cluster
	gone              map[string]bool // nodes no longer eligible, or whose selection changed
	joined            []int           // nodes newly eligible, or whose selection changed (in c)
	moved             map[string]bool // gone and joined
	changed           bool            // the eligible nodes or the members' summary changed
	incumbentsChanged map[*groupState]bool
}

// refresh brings a kept group up to date with u. It returns whether the group must be
// ranked from scratch, else whether its Decisions changed.
func (u *update) refresh(g *groupState) (rerank, changed bool) {
	if len(g.active) == 0 {
		return false, false // no active Service: neither nodes nor incumbents matter
	}
	touched := u.incumbentsChanged[g]
	if len(u.gone) > 0 {
		n := len(g.best)
		g.best = slices.DeleteFunc(g.best, func(r rankedNode) bool { return u.gone[r.name] })
		touched = touched || len(g.best) != n
	}
	for _, j := range u.joined {
		touched = u.join(g, j) || touched
	}
	if len(g.best) == 0 {
		// No candidate: the message names the nodes, so it is written again.
		return !g.complete || touched || u.changed, false
	}
	if !touched && len(u.moved) > 0 {
		for _, ip := range g.ips {
			if inc, ok := u.c.incumbents[ip]; ok && u.moved[inc.Node] {
				touched = true
				break
			}
		}
	}
	if !touched {
		return false, false
	}
	if !g.decide(u.c) {
		return true, false
	}
	return false, true
}

// join inserts node j of the cluster among the kept candidates of g if it fits an
// active Service and ranks before the last kept (or they are all the candidates).
func (u *update) join(g *groupState, j int) bool {
	var cover, ready int32
	for _, sv := range g.active {
		switch u.c.fitOn(sv, j) {
		case fitReady:
			cover++
			ready++
		case fitServing:
			cover++
		}
	}
	if cover == 0 {
		return false
	}
	r := rankedNode{name: u.c.names[j], cover: u.c.rankedCover(j, cover), ready: ready, hash: hashWithSuffix(u.c.names[j], g.suffix)}
	at, _ := slices.BinarySearchFunc(g.best, r, compareRanked)
	if at == len(g.best) && !g.complete {
		return false
	}
	g.best = slices.Insert(g.best, at, r)
	return true
}
