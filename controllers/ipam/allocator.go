package ipam

import (
	"net/netip"
	"slices"
	"strings"
)

// Allocator decides which Service holds which IP. It is pure bookkeeping in memory: the
// durable record is Service.status, replayed with Restore at start.
//
// An Allocator is not safe for concurrent use: the reconciler serialises calls with its
// own mutex.
type Allocator struct {
	pools    map[string]*poolState
	byAge    []*poolState // oldest first
	pinned   []*poolState // pools with a serviceAllocation, in preference order
	unpinned []*poolState // pools without serviceAllocation, by name
	givers   rangeIndex   // ranges of enabled pools: which pool gives out an address

	allocs  map[string]*allocation // by Service key
	ips     map[netip.Addr]*ipState
	sharing shareIndex     // IPs held with a sharing key, to pack sharing Services onto
	users   map[string]int // pool name -> Services using it
	freeSeq uint64         // orders recycled addresses
	// conflicts are the addresses devices on the network claim (SetConflicts), in a
	// pool or not: those free in an enabled pool are withheld in its free set.
	conflicts map[netip.Addr]bool
	// reserved are the addresses no pool gives out (SetReserved).
	reserved reservedSet
}

// allocation is what one Service holds.
type allocation struct {
	key        string
	sharingKey string
	backendKey string
	ports      []Port
	ips        []netip.Addr // primary family first
	pool       string       // "" when no current pool contains the IPs
}

// New returns an Allocator without pools or allocations.
func New() *Allocator {
	return &Allocator{
		pools:     map[string]*poolState{},
		allocs:    map[string]*allocation{},
		ips:       map[netip.Addr]*ipState{},
		sharing:   shareIndex{},
		users:     map[string]int{},
		conflicts: map[netip.Addr]bool{},
		reserved:  newReservedSet(nil),
	}
}

// Release frees what the Service key held and returns the IPs it held. An IP that
// another sharing Service still holds stays in use; the others go to the back of their
// pool's recycled queue.
func (a *Allocator) Release(key string) []netip.Addr {
	al := a.allocs[key]
	if al == nil {
		return nil
	}
	a.countUsers(al, -1)
	for _, ip := range al.ips {
		a.unholdIP(al, ip)
	}
	delete(a.allocs, key)
	return slices.Clone(al.ips)
}

// Stats returns the counts of one pool. Assigned counts IPs in use that the pool
// counts, an IP shared by several Services once, whether or not a device claims it too.
// Conflict counts the free addresses withheld because a device on the network claims
// them (SetConflicts). Available is what the pool can still give out: capacity (without
// .0/.255 when avoidBuggyIPs) minus assigned and conflict. A pool that gives out nothing
// (overlapping, invalid or terminating) has neither available nor conflict addresses.
func (a *Allocator) Stats(pool string) PoolStats {
	p := a.pools[pool]
	if p == nil {
		return PoolStats{}
	}
	st := PoolStats{AssignedIPv4: p.inUse[0], AssignedIPv6: p.inUse[1]}
	if p.givesAddresses() {
		st.AvailableIPv4, st.ConflictIPv4 = p.available(IPv4), p.withheld(IPv4)
		st.AvailableIPv6, st.ConflictIPv6 = p.available(IPv6), p.withheld(IPv6)
	}
	return st
}

func (p *poolState) available(f Family) int64 {
	i := familyIndex(f)
	return p.capacity[i].subSat(u128From(uint64(p.counted[i]))).subSat(u128From(uint64(p.withheld(f)))).int64Sat()
}

// withheld counts the free addresses of family f set aside for a conflict.
func (p *poolState) withheld(f Family) int64 {
	if s := p.free[familyIndex(f)]; s != nil {
		return int64(len(s.withheld))
	}
	return 0
}

// Users returns how many Services use the pool: their allocation is recorded in it or
// one of their IPs is counted in it. The reconciler keeps the pool's finalizer while
// this is above 0.
func (a *Allocator) Users(pool string) int {
	return a.users[pool]
}

// record creates the allocation of svc holding ips (which the caller checked).
func (a *Allocator) record(svc Service, ips []netip.Addr, pool string) *allocation {
	al := &allocation{
		key:        svc.Key,
		sharingKey: svc.SharingKey,
		backendKey: svc.BackendKey,
		ports:      slices.Clone(svc.Ports),
		ips:        orderByFamily(slices.Clone(ips), svc.Families),
	}
	for _, ip := range al.ips {
		a.holdIP(al, ip)
	}
	al.pool = a.resolvePool(pool, al.ips)
	a.allocs[al.key] = al
	a.countUsers(al, +1)
	return al
}

// holdIP adds al to the holders of ip, taking ip from its free set if it was free.
func (a *Allocator) holdIP(al *allocation, ip netip.Addr) {
	st := a.ips[ip]
	if st == nil {
		st = &ipState{addr: ip, sharingKey: al.sharingKey, backendKey: al.backendKey}
		if p := a.givers.lookup(ip); p != nil {
			p.free[familyIndex(FamilyOf(ip))].take(ip)
		}
		st.home = a.homeOf(ip)
		a.countIP(st, +1)
		a.ips[ip] = st
	}
	a.sharing.remove(st) // the ports change
	st.holders = append(st.holders, al)
	a.addPorts(st, al.key, al.ports)
	a.sharing.add(st)
}

// unholdIP removes al from the holders of ip; the last holder frees it.
func (a *Allocator) unholdIP(al *allocation, ip netip.Addr) {
	st := a.ips[ip]
	if st == nil {
		return
	}
	a.sharing.remove(st)
	st.holders = slices.DeleteFunc(st.holders, func(h *allocation) bool { return h == al })
	removePorts(st, al.key)
	if len(st.holders) > 0 {
		a.sharing.add(st)
		return
	}
	delete(a.ips, ip)
	a.countIP(st, -1)
	if p := a.givers.lookup(ip); p != nil && p.countsInCapacity(ip) {
		if a.conflicts[ip] {
			p.free[familyIndex(FamilyOf(ip))].addWithheld(ip)
			return
		}
		a.freeSeq++
		p.free[familyIndex(FamilyOf(ip))].recycle(ip, a.freeSeq)
	}
}

func (a *Allocator) addPorts(st *ipState, key string, ports []Port) {
	if len(ports) > 0 && st.ports == nil {
		st.ports = make(map[Port]string, len(ports))
	}
	for _, p := range ports {
		st.ports[p] = key
	}
}

func removePorts(st *ipState, key string) {
	for p, user := range st.ports {
		if user == key {
			delete(st.ports, p)
		}
	}
}

// homeOf returns the pool that counts ip (see homeIn).
func (a *Allocator) homeOf(ip netip.Addr) *poolState { return homeIn(a.givers, a.byAge, ip) }

func (a *Allocator) countIP(st *ipState, delta int64) {
	p := st.home
	if p == nil {
		return
	}
	i := familyIndex(FamilyOf(st.addr))
	p.inUse[i] += delta
	if p.countsInCapacity(st.addr) {
		p.counted[i] += delta
	}
}

// resolvePool names the pool of an allocation: the recorded one if it still contains
// all the IPs, else the pool counting the primary IP, else "".
func (a *Allocator) resolvePool(recorded string, ips []netip.Addr) string {
	if p := a.pools[recorded]; p != nil && !slices.ContainsFunc(ips, func(ip netip.Addr) bool { return !p.contains(ip) }) {
		return recorded
	}
	if len(ips) > 0 {
		if st := a.ips[ips[0]]; st != nil && st.home != nil {
			return st.home.Name
		}
	}
	return ""
}

// countUsers adds delta to every pool al uses: its recorded pool and the pools
// counting its IPs.
func (a *Allocator) countUsers(al *allocation, delta int) {
	var seen [3]string
	n := 0
	add := func(name string) {
		if name == "" || slices.Contains(seen[:n], name) {
			return
		}
		seen[n] = name
		n++
		a.users[name] += delta
		if a.users[name] == 0 {
			delete(a.users, name)
		}
	}
	add(al.pool)
	for _, ip := range al.ips {
		if st := a.ips[ip]; st != nil && st.home != nil {
			add(st.home.Name)
		}
	}
}

func (al *allocation) result(changed bool) Result {
	return Result{IPs: slices.Clone(al.ips), Pool: al.pool, Changed: changed}
}

// Holding is one Service's allocation as the allocator records it.
type Holding struct {
	Key  string // namespace/name
	Pool string // "" when no current pool contains the IPs
	IPs  []netip.Addr
}

// Holdings lists every Service's allocation, by key.
func (a *Allocator) Holdings() []Holding {
	out := make([]Holding, 0, len(a.allocs))
	for _, al := range a.allocs {
		out = append(out, Holding{Key: al.key, Pool: al.pool, IPs: slices.Clone(al.ips)})
	}
	slices.SortFunc(out, func(x, y Holding) int { return strings.Compare(x.Key, y.Key) })
	return out
}
