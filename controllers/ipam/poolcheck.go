package ipam

import (
	"fmt"
	"slices"

	"go4.org/netipx"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// checkPools turns pools into states, oldest first, and finds the problems that keep a
// pool from giving out addresses: invalid ranges, a duplicate name, addresses that an
// older pool (or an earlier entry of the same pool) already claims.
func checkPools(pools []Pool) ([]*poolState, []PoolProblem) {
	states := make([]*poolState, 0, len(pools))
	for _, p := range pools {
		states = append(states, newPoolState(p))
	}
	slices.SortStableFunc(states, olderPool)

	seen := map[string]bool{}
	out := states[:0]
	var problems []PoolProblem
	for _, p := range states {
		if seen[p.Name] {
			// Only the oldest of the namesakes is kept: state is looked up by name.
			problems = append(problems, PoolProblem{Pool: p.Name, Reason: heraldv1.ReasonDuplicateName,
				Message: "another IPAddressPool has the same name; only the oldest is used"})
			continue
		}
		seen[p.Name] = true
		out = append(out, p)
	}
	states = out

	for _, p := range states {
		if msg := invalidRanges(p.Ranges); msg != "" {
			p.problem = &PoolProblem{Pool: p.Name, Reason: heraldv1.ReasonInvalidAddresses, Message: msg}
		}
	}
	findOverlaps(states)
	for _, p := range states {
		if p.problem != nil {
			problems = append(problems, *p.problem)
		}
	}
	return states, problems
}

func newPoolState(p Pool) *poolState {
	s := &poolState{Pool: p}
	var byFamily [2][]netipx.IPRange
	for _, r := range p.Ranges {
		if r.IsValid() {
			i := familyIndex(FamilyOf(r.From()))
			byFamily[i] = append(byFamily[i], r)
		}
	}
	for i := range byFamily {
		s.merged[i] = mergeRanges(byFamily[i])
	}
	return s
}

// invalidRanges explains the first range a pool may not hold, or returns "".
// ParseAddresses never yields such ranges; this guards Pools built another way.
func invalidRanges(rs []netipx.IPRange) string {
	for _, r := range rs {
		switch {
		case !r.IsValid():
			return fmt.Sprintf("address range %s is not valid", r)
		case r.From().Zone() != "" || r.To().Zone() != "":
			return fmt.Sprintf("address range %s has a zone", r)
		case r.Overlaps(mappedIPv4) || r.From().Is4In6():
			return fmt.Sprintf("address range %s contains IPv4-mapped IPv6 addresses", rangeString(r))
		}
	}
	return ""
}

// findOverlaps sets an Overlap problem on every pool with a range that an older pool or
// an earlier range of its own also holds. A pool that overlaps an older one is disabled
// even if that older one is disabled too: the outcome must not depend on a third pool.
func findOverlaps(byAge []*poolState) {
	type entry struct {
		r   netipx.IPRange
		age int // index into byAge
	}
	var entries []entry
	for age, p := range byAge {
		if p.problem != nil { // invalid ranges: nothing to compare
			continue
		}
		for _, r := range p.Ranges {
			entries = append(entries, entry{r, age})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.r.From().Compare(b.r.From()) })

	// For each pool, the oldest other pool it collides with, else its own collision.
	type collision struct {
		other      int // age of the older pool, -1 for a collision within the pool
		mine, with netipx.IPRange
	}
	found := map[int]collision{}
	note := func(young int, c collision) {
		prev, ok := found[young]
		if !ok || (c.other >= 0 && (prev.other < 0 || c.other < prev.other)) {
			found[young] = c
		}
	}
	for i := range entries {
		for j := i + 1; j < len(entries) && !entries[i].r.To().Less(entries[j].r.From()); j++ {
			x, y := entries[i], entries[j]
			switch {
			case x.age == y.age:
				note(x.age, collision{other: -1, mine: x.r, with: y.r})
			case x.age < y.age:
				note(y.age, collision{other: x.age, mine: y.r, with: x.r})
			default:
				note(x.age, collision{other: y.age, mine: x.r, with: y.r})
			}
		}
	}
	for age, c := range found {
		p := byAge[age]
		common := overlapOf(c.mine, c.with)
		var msg string
		if c.other < 0 {
			msg = fmt.Sprintf("addresses %s and %s of this pool overlap (%s); the pool gives out no addresses until that is fixed",
				rangeString(c.mine), rangeString(c.with), rangeString(common))
		} else {
			msg = fmt.Sprintf("addresses %s overlap %s of the older pool %q (%s); this pool gives out no addresses until the overlap is removed",
				rangeString(c.mine), rangeString(c.with), byAge[c.other].Name, rangeString(common))
		}
		p.problem = &PoolProblem{Pool: p.Name, Reason: heraldv1.ReasonOverlap, Message: msg}
	}
}

func overlapOf(a, b netipx.IPRange) netipx.IPRange {
	from, to := a.From(), a.To()
	if from.Less(b.From()) {
		from = b.From()
	}
	if b.To().Less(to) {
		to = b.To()
	}
	return netipx.IPRangeFrom(from, to)
}
