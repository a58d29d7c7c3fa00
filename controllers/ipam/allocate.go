package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Allocate decides the IPs of svc. A Service keeps what it holds as long as that still
// satisfies what it asks for, even if its pool changed, was deleted or no longer
// selects it. It gets a new allocation when it holds nothing, or when it asks for
// something else: other requested IPs, another pool annotation (of a pool that exists:
// one that does not yet leaves it what it holds, with an ErrNoUsablePool error), no longer any of the
// families it holds, or sharing settings that no longer fit the other holders of its
// IP. Then the old IPs are released first, and stay released if the new allocation
// fails.
//
// Result always tells what svc holds after the call, also with an error.
func (a *Allocator) Allocate(svc Service) (Result, error) {
	svc = normalizeService(svc)
	cur := a.allocs[svc.Key]
	if err := validateService(svc); err != nil {
		if cur != nil { // a malformed request is a request for something else
			a.Release(svc.Key)
			return Result{Changed: true}, err
		}
		return Result{}, err
	}
	if cur != nil {
		if res, ok := a.keepExisting(cur, svc, true); ok {
			return res, nil
		}
		// A pool that does not exist is no request the allocator can meet: moving would
		// lose the IP for nothing. It may come later (pools applied after the Services,
		// a pool renamed while switching from MetalLB): keep what it holds until then.
		if svc.Pool != "" && a.pools[svc.Pool] == nil {
			anyPool := svc
			anyPool.Pool = ""
			if res, ok := a.keepExisting(cur, anyPool, false); ok {
				return res, newError(ErrNoUsablePool, "pool %q does not exist; the Service keeps %s until it does", svc.Pool, JoinIPs(res.IPs))
			}
		}
		before := a.Release(svc.Key)
		res, err := a.allocateNew(svc, before)
		res.Changed = !sameAddrSet(before, res.IPs)
		return res, err
	}
	res, err := a.allocateNew(svc, nil)
	res.Changed = len(res.IPs) > 0
	return res, err
}

// keepExisting keeps cur when it still satisfies svc, adjusting it in place: it drops
// IPs of families svc no longer wants, records new sharing keys and ports, and adds the
// missing family of a dual-stack Service from the same pool when it can and grow is
// set. It reports false, without changing anything, when svc needs a new allocation.
func (a *Allocator) keepExisting(cur *allocation, svc Service, grow bool) (Result, bool) {
	if len(svc.RequestedIPs) > 0 && !sameAddrSet(svc.RequestedIPs, cur.ips) {
		return Result{}, false
	}
	if svc.Pool != "" && svc.Pool != cur.pool {
		return Result{}, false
	}
	wanted := wantedFamilies(svc)
	var kept, dropped []netip.Addr
	for _, ip := range cur.ips {
		if slices.Contains(wanted, FamilyOf(ip)) {
			kept = append(kept, ip)
		} else {
			dropped = append(dropped, ip)
		}
	}
	if len(kept) == 0 {
		return Result{}, false
	}
	for _, ip := range kept {
		if canShare(a.ips[ip], svc) != nil {
			return Result{}, false
		}
	}
	var added netip.Addr
	if grow && len(wanted) == 2 && len(kept) == 1 && len(svc.RequestedIPs) == 0 {
		added = a.pickMissingFamily(cur, svc, otherFamily(wanted, FamilyOf(kept[0])))
		if !added.IsValid() && svc.Policy == RequireDualStack {
			return Result{}, false
		}
	}

	before := slices.Clone(cur.ips)
	a.countUsers(cur, -1)
	for _, ip := range dropped {
		a.unholdIP(cur, ip)
	}
	a.rekey(cur, svc, kept)
	if added.IsValid() {
		a.holdIP(cur, added)
		kept = append(kept, added)
	}
	cur.ips = orderByFamily(kept, svc.Families)
	cur.pool = a.resolvePool(cur.pool, cur.ips) // the primary IP may have changed
	a.countUsers(cur, +1)
	return cur.result(!sameAddrSet(before, cur.ips)), true
}

// pickMissingFamily finds an address of family f for a dual-stack Service holding only
// the other family. It only looks in the Service's own pool: a dual-stack Service gets
// both families from one pool.
func (a *Allocator) pickMissingFamily(cur *allocation, svc Service, f Family) netip.Addr {
	p := a.pools[cur.pool]
	if p == nil || usableBy(p, svc) != nil {
		return netip.Addr{}
	}
	ip, err := a.pickOne(p, svc, f)
	if err != nil {
		return netip.Addr{}
	}
	return ip
}

func otherFamily(fs []Family, f Family) Family {
	for _, x := range fs {
		if x != f {
			return x
		}
	}
	return f
}

// rekey records svc's current sharing key, backend key and ports on the IPs it keeps.
// canShare has been checked, so keys only change where svc is the sole holder.
func (a *Allocator) rekey(cur *allocation, svc Service, kept []netip.Addr) {
	for _, ip := range kept {
		st := a.ips[ip]
		a.sharing.remove(st)
		removePorts(st, cur.key)
		st.sharingKey, st.backendKey = svc.SharingKey, svc.BackendKey
		a.addPorts(st, svc.Key, svc.Ports)
		a.sharing.add(st)
	}
	cur.sharingKey, cur.backendKey, cur.ports = svc.SharingKey, svc.BackendKey, slices.Clone(svc.Ports)
}

// allocateNew allocates for a Service holding nothing; held is what it released just
// before.
func (a *Allocator) allocateNew(svc Service, held []netip.Addr) (Result, error) {
	switch {
	case len(svc.RequestedIPs) > 0:
		return a.assignRequested(svc, held)
	case svc.Pool != "":
		p := a.pools[svc.Pool]
		if p == nil {
			return Result{}, newError(ErrNoUsablePool, "pool %q does not exist", svc.Pool)
		}
		if err := usableBy(p, svc); err != nil {
			return Result{}, err
		}
		return a.allocateFrom([]*poolState{p}, svc)
	default:
		cands := a.autoCandidates(svc)
		if len(cands) == 0 {
			return Result{}, newError(ErrNoUsablePool, "no IP address pool with autoAssign may be used for this Service")
		}
		return a.allocateFrom(cands, svc)
	}
}

// assignRequested gives svc exactly the IPs it requests, all from one pool it may use.
// An IP in conflict is refused unless svc held it (held): a Service that asks for one
// more IP keeps the one it has.
func (a *Allocator) assignRequested(svc Service, held []netip.Addr) (Result, error) {
	var pool *poolState
	for _, ip := range svc.RequestedIPs {
		p := a.givers.lookup(ip)
		if p == nil {
			// Why a pool the Service may use gives out nothing is worth telling;
			// of other pools, not even that they exist.
			if home := a.homeOf(ip); home != nil && selects(home.Allocation, svc) {
				return Result{}, newError(ErrNoUsablePool, "requested IP %s is not in any pool the Service may use (%s)", ip, usableBy(home, svc))
			}
			return Result{}, notAvailableError(ErrNoUsablePool, ip)
		}
		if !selects(p.Allocation, svc) {
			return Result{}, notAvailableError(ErrNoUsablePool, ip)
		}
		if err := usableBy(p, svc); err != nil {
			return Result{}, newError(ErrNoUsablePool, "requested IP %s is not in any pool the Service may use (%s)", ip, err)
		}
		if svc.Pool != "" && svc.Pool != p.Name {
			return Result{}, newError(ErrNoUsablePool, "requested IP %s is in pool %q, not in the requested pool %q", ip, p.Name, svc.Pool)
		}
		if why := a.reserved.why(ip); why != "" && !slices.Contains(held, ip) {
			return Result{}, newError(ErrNoUsablePool, "requested IP %s is reserved: %s", ip, why)
		}
		if p.AvoidBuggyIPs && isBuggy(ip) {
			return Result{}, newError(ErrNoUsablePool, "requested IP %s ends in .0 or .255, which pool %q avoids (avoidBuggyIPs)", ip, p.Name)
		}
		if pool != nil && pool != p {
			return Result{}, newError(ErrNoUsablePool, "requested IPs %s are in different pools (%q and %q); both must come from one pool",
				JoinIPs(svc.RequestedIPs), pool.Name, p.Name)
		}
		pool = p
		if st := a.ips[ip]; st != nil {
			if err := canShare(st, svc); err != nil {
				return Result{}, err
			}
		}
		if a.conflicts[ip] && !slices.Contains(held, ip) {
			return Result{}, conflictError(ip)
		}
	}
	return a.record(svc, svc.RequestedIPs, pool.Name).result(false), nil
}

// allocateFrom takes svc's families from the first candidate pool that has them all.
// PreferDualStack falls back to the primary family alone, then to the other one.
func (a *Allocator) allocateFrom(cands []*poolState, svc Service) (Result, error) {
	wanted := wantedFamilies(svc)
	passes := [][]Family{wanted}
	if svc.Policy == PreferDualStack && len(wanted) == 2 {
		passes = append(passes, wanted[:1], wanted[1:])
	}
	// The failures worth telling the user: the full request, or for PreferDualStack
	// the primary family alone.
	reported := min(1, len(passes)-1)
	var report failures
	for i, fams := range passes {
		var fails failures
		for _, p := range cands {
			ips, err := a.pick(p, svc, fams)
			if err == nil {
				return a.record(svc, ips, p.Name).result(false), nil
			}
			fails.add(err)
		}
		if i == reported {
			report = fails
		}
	}
	return Result{}, report.err(len(passes[reported]) == 2)
}

// pick chooses, without taking them, one address per family from p.
func (a *Allocator) pick(p *poolState, svc Service, fams []Family) ([]netip.Addr, error) {
	ips := make([]netip.Addr, 0, len(fams))
	for _, f := range fams {
		ip, err := a.pickOne(p, svc, f)
		if err != nil {
			return nil, err
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// pickOne chooses an address of family f from p: an IP that compatible Services
// already share, else the lowest never-used address, else the least recently freed.
// Addresses in conflict are never chosen.
func (a *Allocator) pickOne(p *poolState, svc Service, f Family) (netip.Addr, error) {
	i := familyIndex(f)
	if !p.hasFamily(f) {
		return netip.Addr{}, &familyMissingError{pool: p.Name, family: f}
	}
	if ip, ok := a.sharing.candidate(p, svc, f, a.conflicts); ok {
		return ip, nil
	}
	if ip, ok := p.free[i].next(); ok {
		return ip, nil
	}
	return netip.Addr{}, &poolExhaustedError{pool: p.Name, family: f, inUse: p.counted[i], capacity: p.capacity[i].int64Sat(),
		conflicts: p.free[i].withheldAddrs()}
}

type poolExhaustedError struct {
	pool            string
	family          Family
	inUse, capacity int64
	// conflicts are the pool's free addresses of family, all claimed by devices.
	conflicts []netip.Addr
}

func (e *poolExhaustedError) Error() string {
	return fmt.Sprintf("no available IPs in pool %q (%s)", e.pool, e.usage())
}

// conflictsListed bounds the addresses an error names: the count says the rest.
const conflictsListed = 4

func (e *poolExhaustedError) usage() string {
	s := fmt.Sprintf("%s: %d of %d in use", e.family, e.inUse, e.capacity)
	switch n := len(e.conflicts); {
	case n == 1:
		s += fmt.Sprintf("; the free address %s is in conflict with a device on the network", e.conflicts[0])
	case n > conflictsListed:
		s += fmt.Sprintf("; the %d free addresses (%s, ...) are in conflict with devices on the network", n, JoinIPs(e.conflicts[:conflictsListed]))
	case n > 1:
		s += fmt.Sprintf("; the %d free addresses (%s) are in conflict with devices on the network", n, JoinIPs(e.conflicts))
	}
	return s
}
func (e *poolExhaustedError) Unwrap() error { return ErrNoAvailableIPs }

type familyMissingError struct {
	pool   string
	family Family
}

func (e *familyMissingError) Error() string {
	return fmt.Sprintf("pool %q has no %s addresses", e.pool, e.family)
}
func (e *familyMissingError) Unwrap() error { return ErrNoUsablePool }

// failures collects why each candidate pool could not serve a Service.
type failures struct {
	exhausted []*poolExhaustedError
	missing   []*familyMissingError
}

func (f *failures) add(err error) {
	switch e := err.(type) {
	case *poolExhaustedError:
		f.exhausted = append(f.exhausted, e)
	case *familyMissingError:
		f.missing = append(f.missing, e)
	}
}

// err tells the user why no pool served the Service. Exhaustion wins: it is the
// failure that releasing IPs can fix.
func (f *failures) err(bothFamilies bool) error {
	switch {
	case len(f.exhausted) == 1:
		return f.exhausted[0]
	case len(f.exhausted) > 1:
		parts := make([]string, len(f.exhausted))
		for i, e := range f.exhausted {
			parts[i] = fmt.Sprintf("%q (%s)", e.pool, e.usage())
		}
		return newError(ErrNoAvailableIPs, "no available IPs in pools %s", strings.Join(parts, ", "))
	case bothFamilies && len(f.missing) == 1:
		return newError(ErrNoUsablePool, "RequireDualStack needs a pool with both IPv4 and IPv6 addresses; %s", f.missing[0])
	case bothFamilies:
		return newError(ErrNoUsablePool, "RequireDualStack needs a pool with both IPv4 and IPv6 addresses")
	case len(f.missing) == 1:
		return f.missing[0]
	case len(f.missing) > 1:
		return newError(ErrNoUsablePool, "no pool the Service may use has %s addresses", f.missing[0].family)
	}
	return newError(ErrNoUsablePool, "no pool the Service may use")
}
