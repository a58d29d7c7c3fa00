package layer2

import (
	"net/netip"
	"slices"
	"sync"
)

// Table is the set of IPs this node announces and, for each, the interfaces it may be
// announced on. Responders read it for every packet; the speaker writes it with Set and
// Withdraw. Several owners (Services sharing an IP, keyed by any string the caller
// likes) may hold the same IP: it stays owned until the last one withdraws, and it is
// allowed on the union of their interface lists, an empty list meaning every eligible
// interface.
//
// An owned IP may also be quiet: still owned, but neither answered nor announced,
// while the announcer probes it before its first announcement or after yielding it to
// another device that claims it (see Announcer). Responders treat a quiet IP as owned
// for claim detection and drop requests for it.
//
// A Withdraw is seen by every packet read after it returns. A packet that was already
// being handled when Withdraw ran may still be answered once.
type Table struct {
	mu  sync.RWMutex
	ips map[netip.Addr]*ownership
	// awake, if set, says whether the process ran without a stall (watchdog.go): while
	// it says no, every owned IP is treated as quiet.
	awake func() bool
}

// ownership is one IP: who holds it, and the interfaces that follows from that.
type ownership struct {
	holders map[string][]string // owner key → its interface list (nil = all)
	allow   allowance
	quiet   bool // owned but not answered: being probed, or yielded to another device
}

// allowance is where an IP may be answered: everywhere, or on the named interfaces.
type allowance struct {
	all   bool
	names map[string]struct{}
}

func (a allowance) permits(ifname string) bool {
	if a.all {
		return true
	}
	_, ok := a.names[ifname]
	return ok
}

func (a allowance) equal(b allowance) bool {
	if a.all || b.all {
		return a.all == b.all
	}
	if len(a.names) != len(b.names) {
		return false
	}
	for n := range a.names {
		if _, ok := b.names[n]; !ok {
			return false
		}
	}
	return true
}

// Change says what a Set or Withdraw did to an IP.
type Change int

const (
	// Unchanged: the IP's ownership and interfaces are as they were.
	Unchanged Change = iota
	// Added: the IP was not owned and now is (a takeover).
	Added
	// Updated: the IP stays owned but the interfaces it may be answered on changed.
	Updated
	// Removed: the last holder withdrew; the IP is no longer owned.
	Removed
)

func (c Change) String() string {
	switch c {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	default:
		return "unchanged"
	}
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{ips: make(map[netip.Addr]*ownership)}
}

// normalize makes the table's keys canonical: IPv4-mapped IPv6 becomes IPv4, zones go.
func normalize(ip netip.Addr) netip.Addr {
	return ip.Unmap().WithZone("")
}

// Set records that key owns ip on the given interfaces (none = every eligible
// interface). Calling it again for the same key replaces that key's interface list.
// An invalid IP is ignored.
func (t *Table) Set(key string, ip netip.Addr, interfaces []string) Change {
	return t.set(key, ip, interfaces, false)
}

// set is Set, and if the IP is added, it starts quiet when quiet is true, so that no
// request is answered before the announcer has probed it.
func (t *Table) set(key string, ip netip.Addr, interfaces []string, quiet bool) Change {
	ip = normalize(ip)
	if !ip.IsValid() {
		return Unchanged
	}
	list := cleanNames(interfaces)
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.ips[ip]
	if !ok {
		o = &ownership{holders: map[string][]string{key: list}, quiet: quiet}
		o.allow = o.union()
		t.ips[ip] = o
		return Added
	}
	o.holders[key] = list
	return o.recompute()
}

// Withdraw removes key's hold on ip. It returns Removed when that was the last holder.
func (t *Table) Withdraw(key string, ip netip.Addr) Change {
	ip = normalize(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.ips[ip]
	if !ok {
		return Unchanged
	}
	if _, had := o.holders[key]; !had {
		return Unchanged
	}
	delete(o.holders, key)
	if len(o.holders) == 0 {
		delete(t.ips, ip)
		return Removed
	}
	return o.recompute()
}

// Lookup answers the per-packet question: is ip owned, and may it be answered on ifname?
func (t *Table) Lookup(ip netip.Addr, ifname string) (owned, allowed bool) {
	ip = normalize(ip)
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, ok := t.ips[ip]
	if !ok {
		return false, false
	}
	return true, o.allow.permits(ifname)
}

// status is what a responder needs to know about one IP on its interface.
type status uint8

const (
	statusNotOwned status = iota
	statusWrongInterface
	statusQuiet     // owned and allowed here, but not answered for now
	statusAnswering // owned, allowed here, answered
)

// here reports whether the IP is owned and allowed on the interface, quiet or not.
func (s status) here() bool { return s >= statusQuiet }

// statusOn is o's status on ifname; o may be nil. Called with t.mu held.
func (o *ownership) statusOn(ifname string) status {
	switch {
	case o == nil:
		return statusNotOwned
	case !o.allow.permits(ifname):
		return statusWrongInterface
	case o.quiet:
		return statusQuiet
	default:
		return statusAnswering
	}
}

// status answers the per-packet question for one IP. It does not allocate.
func (t *Table) status(ip netip.Addr, ifname string) status {
	ip = normalize(ip)
	t.mu.RLock()
	st := t.ips[ip].statusOn(ifname)
	t.mu.RUnlock()
	return t.hushed(st)
}

// statusPair is status for the two IPs of an ARP packet under one read lock: the
// sender's (a claim if owned here) and the target's (answered if owned here).
func (t *Table) statusPair(sender, target netip.Addr, ifname string) (status, status) {
	sender, target = normalize(sender), normalize(target)
	t.mu.RLock()
	s, tg := t.ips[sender].statusOn(ifname), t.ips[target].statusOn(ifname)
	t.mu.RUnlock()
	return t.hushed(s), t.hushed(tg)
}

// running says whether the process ran without a stall (true without a watchdog).
func (t *Table) running() bool { return t.awake == nil || t.awake() }

// hushed turns an answered status quiet while the process is not known awake.
func (t *Table) hushed(st status) status {
	if st == statusAnswering && !t.running() {
		return statusQuiet
	}
	return st
}

// setQuiet makes an owned IP quiet or answered again; it reports false if the IP is
// not owned.
func (t *Table) setQuiet(ip netip.Addr, quiet bool) bool {
	ip = normalize(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.ips[ip]
	if ok {
		o.quiet = quiet
	}
	return ok
}

// Quiet reports whether ip is owned but not answered for now (probed or yielded).
func (t *Table) Quiet(ip netip.Addr) bool {
	ip = normalize(ip)
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, ok := t.ips[ip]
	return ok && o.quiet
}

// Allowed reports whether ip is owned and may be answered on ifname.
func (t *Table) Allowed(ip netip.Addr, ifname string) bool {
	_, allowed := t.Lookup(ip, ifname)
	return allowed
}

// Owned reports whether any holder owns ip.
func (t *Table) Owned(ip netip.Addr) bool {
	owned, _ := t.Lookup(ip, "")
	return owned
}

// IPs returns the owned IPs in ascending order.
func (t *Table) IPs() []netip.Addr {
	t.mu.RLock()
	out := make([]netip.Addr, 0, len(t.ips))
	for ip := range t.ips {
		out = append(out, ip)
	}
	t.mu.RUnlock()
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Interfaces returns where ip may be answered: all (true) or the sorted names.
// ok is false when ip is not owned.
func (t *Table) Interfaces(ip netip.Addr) (names []string, all, ok bool) {
	ip = normalize(ip)
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, found := t.ips[ip]
	if !found {
		return nil, false, false
	}
	if o.allow.all {
		return nil, true, true
	}
	for n := range o.allow.names {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, false, true
}

// recompute refreshes the allowance after a holder changed and says whether it moved.
func (o *ownership) recompute() Change {
	next := o.union()
	if next.equal(o.allow) {
		return Unchanged
	}
	o.allow = next
	return Updated
}

// union is the interfaces the IP may be answered on: all if any holder said all.
func (o *ownership) union() allowance {
	names := map[string]struct{}{}
	for _, list := range o.holders {
		if len(list) == 0 {
			return allowance{all: true}
		}
		for _, n := range list {
			names[n] = struct{}{}
		}
	}
	return allowance{names: names}
}

// cleanNames drops empty names and duplicates; nil means all interfaces.
func cleanNames(in []string) []string {
	var out []string
	for _, n := range in {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
