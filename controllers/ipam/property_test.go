package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go4.org/netipx"
)

// TestRandomOperations runs random sequences of Allocate, Release, Restore, SetPools
// and SetConflicts on a small address space and checks after every call:
//   - the allocator's own invariants (checkInvariants);
//   - that a model of who holds what, built only from the returned values, matches;
//   - that a freshly taken address is the lowest never-used one of its pool and family,
//     else the least recently freed one (tracked by the model), never one in conflict;
//   - that no Service gets an address in conflict it did not hold.
func TestRandomOperations(t *testing.T) {
	seeds, ops := 300, 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newModel(t, uint64(seed))
			for i := 0; i < ops; i++ {
				m.step(i)
			}
		})
	}
}

type model struct {
	t   *testing.T
	rnd *rand.Rand
	a   *Allocator

	pools   []Pool
	enabled map[string]bool
	held    map[string][]netip.Addr // Service key -> IPs, from returned values only
	// recycled is the model's queue of freed addresses, least recently freed first.
	recycled []netip.Addr
	// conflicts are the addresses last given to SetConflicts.
	conflicts map[netip.Addr]bool
	log       []string
}

func newModel(t *testing.T, seed uint64) *model {
	m := &model{t: t, rnd: rand.New(rand.NewPCG(seed, 1)), a: New(), held: map[string][]netip.Addr{}, conflicts: map[netip.Addr]bool{}}
	m.setPools()
	return m
}

// The address space: IPv4 around a /24 boundary (buggy addresses) and a few IPv6.
var (
	v4Base = netip.MustParseAddr("10.0.0.240")
	v6Base = netip.MustParseAddr("fc00::f0")
)

func (m *model) addr(f Family) netip.Addr {
	a := v4Base
	if f == IPv6 {
		a = v6Base
	}
	for range m.rnd.IntN(32) {
		a = a.Next()
	}
	return a
}

func (m *model) randomRange(f Family) netipx.IPRange {
	x, y := m.addr(f), m.addr(f)
	if y.Less(x) {
		x, y = y, x
	}
	return netipx.IPRangeFrom(x, y)
}

func (m *model) randomPools() []Pool {
	var pools []Pool
	for i := range 1 + m.rnd.IntN(3) {
		p := Pool{
			Name:          fmt.Sprintf("p%d", i),
			AutoAssign:    m.rnd.IntN(4) > 0,
			AvoidBuggyIPs: m.rnd.IntN(3) == 0,
			Created:       epoch.Add(time.Duration(m.rnd.IntN(3)) * time.Minute),
			Terminating:   m.rnd.IntN(8) == 0,
		}
		for range 1 + m.rnd.IntN(2) {
			f := IPv4
			if m.rnd.IntN(3) == 0 {
				f = IPv6
			}
			p.Ranges = append(p.Ranges, m.randomRange(f))
		}
		if m.rnd.IntN(3) == 0 {
			p.Allocation = &Allocation{Priority: m.rnd.IntN(3), Namespaces: []string{"a"}}
		}
		pools = append(pools, p)
	}
	return pools
}

func (m *model) setPools() {
	if len(m.pools) > 0 && m.rnd.IntN(3) == 0 {
		// Flags only, to exercise the fast path.
		for i := range m.pools {
			m.pools[i].AutoAssign = !m.pools[i].AutoAssign
		}
	} else {
		m.pools = m.randomPools()
	}
	m.logf("SetPools %v", m.pools)
	probs := m.a.SetPools(m.pools)
	m.enabled = map[string]bool{}
	for _, p := range m.pools {
		m.enabled[p.Name] = true
	}
	for _, p := range probs {
		m.enabled[p.Pool] = false
	}
	// Recycled addresses that left every enabled pool are never-used again.
	m.recycled = slices.DeleteFunc(m.recycled, func(a netip.Addr) bool { return !m.recyclable(a) })
	m.check()
}

// giver returns the enabled pool containing a.
func (m *model) giver(a netip.Addr) *Pool {
	for i, p := range m.pools {
		if !m.enabled[p.Name] {
			continue
		}
		for _, r := range p.Ranges {
			if r.Contains(a) {
				return &m.pools[i]
			}
		}
	}
	return nil
}

func (m *model) recyclable(a netip.Addr) bool {
	p := m.giver(a)
	return p != nil && !(p.AvoidBuggyIPs && isBuggy(a))
}

func (m *model) inUse() map[netip.Addr]int {
	use := map[netip.Addr]int{}
	for _, ips := range m.held {
		for _, ip := range ips {
			use[ip]++
		}
	}
	return use
}

// expectedFresh is the address pool must hand out next for family f, per the model.
func (m *model) expectedFresh(pool string, f Family) (netip.Addr, bool) {
	var p *Pool
	for i := range m.pools {
		if m.pools[i].Name == pool {
			p = &m.pools[i]
		}
	}
	if p == nil {
		return netip.Addr{}, false
	}
	use := m.inUse()
	var best netip.Addr
	for _, r := range p.Ranges {
		if FamilyOf(r.From()) != f {
			continue
		}
		for a := r.From(); a.IsValid() && !r.To().Less(a); a = a.Next() {
			if use[a] > 0 || slices.Contains(m.recycled, a) || (p.AvoidBuggyIPs && isBuggy(a)) || m.conflicts[a] {
				continue
			}
			if !best.IsValid() || a.Less(best) {
				best = a
			}
			break
		}
	}
	if best.IsValid() {
		return best, true
	}
	for _, a := range m.recycled {
		if FamilyOf(a) == f && m.giver(a) == p {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (m *model) randomService() Service {
	key := fmt.Sprintf("%s/s%d", []string{"a", "b"}[m.rnd.IntN(2)], m.rnd.IntN(12))
	svc := mkSvc(key)
	switch m.rnd.IntN(6) {
	case 0:
		svc.Families = []Family{IPv6}
	case 1:
		svc.Policy, svc.Families = PreferDualStack, []Family{IPv4, IPv6}
	case 2:
		svc.Policy, svc.Families = RequireDualStack, []Family{IPv6, IPv4}
	}
	if m.rnd.IntN(5) == 0 {
		for _, f := range wantedFamilies(svc) {
			if len(svc.RequestedIPs) == 0 || m.rnd.IntN(2) == 0 {
				svc.RequestedIPs = append(svc.RequestedIPs, m.addr(f))
			}
		}
	}
	if m.rnd.IntN(5) == 0 {
		svc.Pool = fmt.Sprintf("p%d", m.rnd.IntN(3))
	}
	svc.SharingKey = []string{"", "", "k1", "k2"}[m.rnd.IntN(4)]
	svc.BackendKey = []string{"", "", "sel"}[m.rnd.IntN(3)]
	for _, p := range []Port{{"TCP", 80}, {"TCP", 81}, {"UDP", 53}} {
		if m.rnd.IntN(2) == 0 {
			svc.Ports = append(svc.Ports, p)
		}
	}
	return svc
}

func (m *model) step(i int) {
	switch op := m.rnd.IntN(20); {
	case op < 11:
		m.allocate()
	case op < 14:
		key := m.randomService().Key
		m.logf("Release %s", key)
		got := m.a.Release(key)
		if !sameAddrSet(got, m.held[key]) {
			m.fatalf("Release(%s) = %v, model %v", key, got, m.held[key])
		}
		m.releaseModel(key)
	case op < 16:
		m.setConflicts()
	case op < 18:
		svc := m.randomService()
		ips := []netip.Addr{m.addr(IPv4)}
		if m.rnd.IntN(2) == 0 {
			ips = append(ips, m.addr(IPv6))
		}
		pool := fmt.Sprintf("p%d", m.rnd.IntN(4))
		m.logf("Restore %s %v %s", svc.Key, ips, pool)
		err := m.a.Restore(svc, ips, pool)
		m.releaseModel(svc.Key)
		if err == nil {
			for _, ip := range ips {
				m.take(ip)
			}
			m.held[svc.Key] = ips
		}
	default:
		m.setPools()
	}
	m.check()
}

func (m *model) allocate() {
	svc := m.randomService()
	before := slices.Clone(m.held[svc.Key])
	useBefore := m.inUse()
	res, err := m.a.Allocate(svc)
	m.logf("Allocate %+v -> %+v, %v", svc, res, err)
	if res.Changed != !sameAddrSet(before, res.IPs) {
		m.fatalf("Changed = %v, before %v after %v", res.Changed, before, res.IPs)
	}
	// An error comes with what the Service kept (a pool it names does not exist), never
	// with an IP it did not hold.
	if err != nil && slices.ContainsFunc(res.IPs, func(ip netip.Addr) bool { return !slices.Contains(before, ip) }) {
		m.fatalf("error %v with new IPs %v (held %v)", err, res.IPs, before)
	}
	// Released first: the old IPs no one else holds go to the recycled queue.
	delete(m.held, svc.Key)
	use := m.inUse()
	for _, ip := range before {
		if !slices.Contains(res.IPs, ip) && use[ip] == 0 && m.recyclable(ip) && !m.conflicts[ip] {
			m.recycled = append(m.recycled, ip)
		}
	}
	for _, ip := range res.IPs {
		if slices.Contains(before, ip) {
			continue
		}
		if m.conflicts[ip] {
			m.fatalf("Allocate(%s) took %s, which is in conflict", svc.Key, ip)
		}
		fresh := useBefore[ip] == 0
		if fresh && len(svc.RequestedIPs) == 0 {
			want, ok := m.expectedFresh(res.Pool, FamilyOf(ip))
			if !ok || want != ip {
				m.fatalf("Allocate(%s) took %s from %q, model expects %v (recycled %v)", svc.Key, ip, res.Pool, want, m.recycled)
			}
		}
		m.take(ip)
	}
	if len(res.IPs) > 0 {
		m.held[svc.Key] = res.IPs
	}
}

// setConflicts gives the allocator a few random addresses in conflict. Free ones
// leave the recycled queue; free ones no longer in conflict go to its back.
func (m *model) setConflicts() {
	next := map[netip.Addr]bool{}
	for range m.rnd.IntN(5) {
		f := IPv4
		if m.rnd.IntN(3) == 0 {
			f = IPv6
		}
		next[m.addr(f)] = true
	}
	var ips []netip.Addr
	for ip := range next {
		ips = append(ips, ip)
	}
	added, cleared := m.a.SetConflicts(ips)
	m.logf("SetConflicts %v -> added %v cleared %v", ips, added, cleared)
	for _, ip := range added {
		if !next[ip] || m.conflicts[ip] {
			m.fatalf("SetConflicts: %s added wrongly", ip)
		}
	}
	for _, ip := range cleared {
		if next[ip] || !m.conflicts[ip] {
			m.fatalf("SetConflicts: %s cleared wrongly", ip)
		}
	}
	if want := len(next) - len(m.conflicts) + len(cleared); len(added) != want {
		m.fatalf("SetConflicts: added %v, want %d addresses", added, want)
	}
	m.conflicts = next
	m.recycled = slices.DeleteFunc(m.recycled, func(a netip.Addr) bool { return next[a] })
	use := m.inUse()
	for _, ip := range cleared { // sorted, as the allocator queues them
		if use[ip] == 0 && m.recyclable(ip) {
			m.recycled = append(m.recycled, ip)
		}
	}
}

func (m *model) take(ip netip.Addr) {
	m.recycled = slices.DeleteFunc(m.recycled, func(a netip.Addr) bool { return a == ip })
}

func (m *model) releaseModel(key string) {
	ips := m.held[key]
	delete(m.held, key)
	use := m.inUse()
	for _, ip := range ips {
		if use[ip] == 0 && m.recyclable(ip) && !m.conflicts[ip] {
			m.recycled = append(m.recycled, ip)
		}
	}
}

func (m *model) check() {
	m.t.Helper()
	checkInvariants(m.t, m.a)
	m.checkPacking()
	if len(m.held) != len(m.a.allocs) {
		m.fatalf("model holds %d Services, allocator %d", len(m.held), len(m.a.allocs))
	}
	for key, ips := range m.held {
		al := m.a.allocs[key]
		if al == nil || !sameAddrSet(al.ips, ips) {
			m.fatalf("%s holds %v in the model, allocator %+v", key, ips, al)
		}
	}
	use := m.inUse()
	if len(use) != len(m.a.ips) {
		m.fatalf("model has %d IPs in use, allocator %d", len(use), len(m.a.ips))
	}
	var assigned int64
	for _, p := range m.pools {
		if m.a.pools[p.Name] == nil {
			continue
		}
		st := m.a.Stats(p.Name)
		assigned += st.AssignedIPv4 + st.AssignedIPv6
	}
	if assigned > int64(len(use)) {
		m.fatalf("pools count %d assigned IPs, only %d in use", assigned, len(use))
	}
}

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
	if len(m.log) > 40 {
		m.log = m.log[1:]
	}
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	for _, l := range m.log {
		m.t.Log(l)
	}
	m.t.Fatalf(format, args...)
}

// checkPacking compares the sharing index with a scan of every IP in use: both must
// pick the same (lowest) IP a probe Service may join in each pool and family.
func (m *model) checkPacking() {
	m.t.Helper()
	probe := m.randomService()
	probe.Key = "probe/holds-nothing"
	for _, p := range m.a.byAge {
		for _, f := range []Family{IPv4, IPv6} {
			got, _ := m.a.sharing.candidate(p, probe, f, m.a.conflicts)
			var want netip.Addr
			for ip, st := range m.a.ips {
				if probe.SharingKey == "" || FamilyOf(ip) != f || !p.contains(ip) || !p.countsInCapacity(ip) || canShare(st, probe) != nil || m.conflicts[ip] {
					continue
				}
				if !want.IsValid() || ip.Less(want) {
					want = ip
				}
			}
			if got != want {
				m.fatalf("pool %s %s: sharing index offers %v for %+v, a scan finds %v", p.Name, f, got, probe, want)
			}
		}
	}
}
