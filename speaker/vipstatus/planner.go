// Package vipstatus publishes the owner of every LoadBalancer IP in VIPStatus objects
// (api/v1beta1). The Planner and Reconcile decide, purely, what this node writes; the
// Publisher applies that through the API server, off the election loop.
//
// Who writes what:
//   - The owner, once its first gratuitous ARP/NA went out: node, interface, MAC,
//     since, and one more leader change when the stored node was another (or none).
//   - The reporting speaker (the live member with the smallest name, as for Events):
//     node "" with the election's reason for IPs no node announces, and it deletes
//     objects no LoadBalancer Service holds any more (the garbage collector removes
//     those of deleted Services through their owner references).
//
// A writer takes the IP's node field at once for each change it sees (a takeover, a
// healed partition, an IP newly without owner). When another speaker's write then
// contradicts its view, it takes the field back only after a delay that doubles with
// each contest (1 s, 2 s, ... 5 min; forgotten after 10 quiet minutes): a speaker
// whose informers lag (it has not yet released the IP) gives up in the meantime, a
// stale write (queued by a node while it was cut off) is corrected within a second,
// and two speakers whose views stay apart (a partition with the API server reachable
// from both sides) write a few times an hour instead of taking turns counting leader
// changes.
package vipstatus

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

// Key names a VIPStatus: the namespace of the Services holding the IP and
// heraldv1.VIPStatusName of the IP.
type Key = types.NamespacedName

// ServiceRef is a Service holding an IP, for the owner references.
type ServiceRef struct {
	Name string
	UID  types.UID
}

// Task is what this node wants of one VIPStatus.
type Task struct {
	IP       netip.Addr
	Services []ServiceRef // of the object's namespace, by name
	Pool     string
	// Owned: this node announces IP. Otherwise nobody does and this node reports it.
	Owned bool
	// Announced: the first gratuitous frames of the takeover went out, on Interface
	// with MAC (comma-separated when several) at At. Only then does the owner write.
	Announced      bool
	Interface, MAC string
	At             time.Time
	// Reason and Message say why nobody announces IP, or that this node, owning it,
	// forwards its old owner's connections (heraldv1.VIPReasonHandover).
	Reason, Message string
	// Assert: write the node field once, whatever the stored one says.
	Assert bool
	// RetakeAt: another speaker's write contradicts this task; take the node field
	// back from then on (see Contest). Zero when not contested.
	RetakeAt time.Time
	// Gen changes with every change of the task, so that a write done for an older
	// one does not clear a newer Assert.
	Gen uint64
}

// sameTarget says whether two tasks ask for the same object, Assert and Gen aside.
func (t *Task) sameTarget(o *Task) bool {
	return t.IP == o.IP && slices.Equal(t.Services, o.Services) && t.Pool == o.Pool && t.Owned == o.Owned &&
		t.Announced == o.Announced && t.Interface == o.Interface && t.MAC == o.MAC && t.At.Equal(o.At) &&
		t.Reason == o.Reason && t.Message == o.Message
}

// Election is one election as the planner needs it.
type Election struct {
	Decisions []election.Decision
	// Services are every cached Service: their UIDs, and which objects are still held.
	Services []*corev1.Service
	// PoolOf names the pool of an IP ("" when none; nil: no pool is known).
	PoolOf func(netip.Addr) string
	// LBClass is the loadBalancerClass herald serves besides Services without one.
	LBClass string
	// Reporter: this node reports the IPs nobody announces and deletes leftovers.
	Reporter bool
	// Taken are the IPs this node takes over in this election: their first frames
	// have not gone out yet (Announced follows).
	Taken []netip.Addr
	// Healed: a partition healed and this node announces its IPs again; it takes
	// their node field once more.
	Healed bool
	// Conflicts are the IPs this node owns but yielded to a foreign device, with why
	// (layer2): published with no node and reason IPConflict.
	Conflicts map[netip.Addr]string
	// Handovers are the IPs this node owns and forwards the old owner's connections
	// of, with a sentence saying so.
	Handovers map[netip.Addr]string
	Now       time.Time
}

func (e *Election) poolOf(ip netip.Addr) string {
	if e.PoolOf == nil {
		return ""
	}
	return e.PoolOf(ip)
}

// Planner keeps the tasks of this node from election to election. It is pure and
// not safe for concurrent use.
type Planner struct {
	self  string
	tasks map[Key]*Task
	// contests count, per object, the writes of other speakers this node took back.
	contests map[Key]contest
	// anns are the first frames of the takeovers of the IPs this node owns, for the
	// objects of every namespace holding the IP, present and future.
	anns     map[netip.Addr]announcement
	owned    map[netip.Addr]bool
	yielded  map[netip.Addr]bool // owned but yielded to a foreign device
	held     map[Key]bool
	reporter bool
	gen      uint64
}

type contest struct {
	n    int
	last time.Time
}

// Contest delays: the first, the longest, and how long a quiet object keeps its count.
const (
	contestDelay  = time.Second
	contestMax    = 5 * time.Minute
	contestForget = 10 * time.Minute
)

type announcement struct {
	iface, mac string
	at         time.Time
}

// NewPlanner returns the planner of the node named self.
func NewPlanner(self string) *Planner {
	return &Planner{self: self, tasks: map[Key]*Task{}, contests: map[Key]contest{}, anns: map[netip.Addr]announcement{},
		owned: map[netip.Addr]bool{}, held: map[Key]bool{}}
}

// Plan records an election and returns the keys whose task changed or went away,
// sorted: those to look at again.
func (p *Planner) Plan(e Election) []Key {
	bySvc := make(map[string]*corev1.Service, len(e.Services))
	held := map[Key]bool{}
	for _, svc := range e.Services {
		bySvc[svc.Namespace+"/"+svc.Name] = svc
		if !heraldv1.Announceable(svc, e.LBClass) {
			continue
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(ing.IP); err == nil {
				held[Key{Namespace: svc.Namespace, Name: heraldv1.VIPStatusName(ip)}] = true
			}
		}
	}
	for _, ip := range e.Taken {
		delete(p.anns, ip) // a new takeover: wait for its first frames
	}
	owned := map[netip.Addr]bool{}
	for _, d := range e.Decisions {
		if _, yielded := e.Conflicts[d.IP]; d.Owner == p.self && !yielded {
			owned[d.IP] = true
		}
	}
	for ip := range p.anns {
		// A yielded IP keeps its announcement: the one after the conflict may come
		// before the election that owns the IP again.
		if _, yielded := e.Conflicts[ip]; !owned[ip] && !yielded {
			delete(p.anns, ip)
		} else if e.Healed {
			a := p.anns[ip]
			a.at = e.Now
			p.anns[ip] = a
		}
	}
	tasks := map[Key]*Task{}
	var changed []Key
	for _, d := range e.Decisions {
		owned := owned[d.IP]
		if note, yielded := e.Conflicts[d.IP]; yielded && d.Owner == p.self {
			d.Reason, d.Message = heraldv1.VIPReasonIPConflict, note
		} else if !owned && (d.Owner != "" || !e.Reporter) {
			continue
		}
		for ns, refs := range servicesByNamespace(d.Services, bySvc) {
			key := Key{Namespace: ns, Name: heraldv1.VIPStatusName(d.IP)}
			t := &Task{IP: d.IP, Owned: owned, Pool: e.poolOf(d.IP)}
			for _, r := range refs {
				t.Services = append(t.Services, ServiceRef{Name: r.Name, UID: r.UID})
			}
			prev := p.tasks[key]
			switch a, announced := p.anns[d.IP]; {
			case owned && announced:
				t.Announced, t.Interface, t.MAC, t.At = true, a.iface, a.mac, a.at
				// Take the node field once for each takeover (Announced sets Assert), for
				// a new object, and again when a partition healed.
				t.Assert = prev == nil || !prev.Owned || prev.Assert || e.Healed
			case owned:
				// A takeover whose first frames have not gone out yet.
			default:
				t.Reason, t.Message = string(d.Reason), d.Message
				// Newly without owner as this node sees it, or newly its reporter.
				t.Assert = prev == nil || prev.Owned || prev.Assert
			}
			if note, ok := e.Handovers[d.IP]; ok && owned {
				t.Reason, t.Message = heraldv1.VIPReasonHandover, note
			}
			if prev != nil && prev.Owned == t.Owned && !t.Assert {
				t.RetakeAt = prev.RetakeAt
			}
			if prev != nil && prev.sameTarget(t) && prev.Assert == t.Assert {
				t.Gen = prev.Gen
			} else {
				p.gen++
				t.Gen = p.gen
				changed = append(changed, key)
			}
			tasks[key] = t
		}
	}
	for key := range p.tasks {
		if _, ok := tasks[key]; !ok {
			changed = append(changed, key)
		}
	}
	for key, c := range p.contests {
		if e.Now.Sub(c.last) > contestForget {
			delete(p.contests, key)
		}
	}
	p.tasks, p.owned, p.held, p.reporter = tasks, owned, held, e.Reporter
	p.yielded = make(map[netip.Addr]bool, len(e.Conflicts))
	for ip := range e.Conflicts {
		p.yielded[ip] = true
	}
	return sortKeys(changed)
}

// servicesByNamespace groups the Services ("namespace/name") of a decision that are
// in the cache by namespace, each group sorted by name.
func servicesByNamespace(keys []string, bySvc map[string]*corev1.Service) map[string][]*corev1.Service {
	out := map[string][]*corev1.Service{}
	for _, k := range keys {
		if svc, ok := bySvc[k]; ok {
			out[svc.Namespace] = append(out[svc.Namespace], svc)
		}
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b *corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// Announced records the first gratuitous frames of a takeover of ip and returns the
// keys to write. Frames of an IP this node no longer owns are ignored.
func (p *Planner) Announced(a layer2.Announcement) []Key {
	links := slices.Clone(a.Links)
	slices.SortFunc(links, func(x, y layer2.Link) int { return strings.Compare(x.Interface, y.Interface) })
	var ifaces, macs []string
	for _, l := range links {
		ifaces = append(ifaces, l.Interface)
		macs = append(macs, l.MAC.String())
	}
	ann := announcement{iface: strings.Join(ifaces, ","), mac: strings.Join(macs, ","), at: a.At}
	if p.yielded[a.IP] {
		p.anns[a.IP] = ann // announced again after a conflict: for the next election
	}
	if !p.owned[a.IP] {
		return nil
	}
	p.anns[a.IP] = ann
	var changed []Key
	for key, t := range p.tasks {
		if t.IP != a.IP || !t.Owned {
			continue
		}
		p.gen++
		t.Announced, t.Interface, t.MAC, t.At, t.Assert, t.Gen = true, ann.iface, ann.mac, ann.at, true, p.gen
		changed = append(changed, key)
	}
	return sortKeys(changed)
}

// Done records that the object of key is as the task of generation gen asks: its
// node field need not be written again.
func (p *Planner) Done(key Key, gen uint64) {
	if t, ok := p.tasks[key]; ok && t.Gen == gen {
		t.Assert, t.RetakeAt = false, time.Time{}
	}
}

// Contest records that another speaker's write of key contradicts the task of
// generation gen, and returns when to take the node field back: a delay that doubles
// with each contest of the object. False when the task has changed meanwhile (its
// change queued the key again).
func (p *Planner) Contest(key Key, gen uint64, now time.Time) (time.Duration, bool) {
	t, ok := p.tasks[key]
	if !ok || t.Gen != gen {
		return 0, false
	}
	c := p.contests[key]
	if now.Sub(c.last) > contestForget {
		c.n = 0
	}
	delay := contestMax
	if c.n < 16 {
		delay = min(contestDelay<<c.n, contestMax)
	}
	c.n++
	c.last = now
	p.contests[key] = c
	t.RetakeAt = now.Add(delay)
	return delay, true
}

// Task returns a copy of the task of key.
func (p *Planner) Task(key Key) (Task, bool) {
	t, ok := p.tasks[key]
	if !ok {
		return Task{}, false
	}
	c := *t
	c.Services = slices.Clone(t.Services)
	return c, true
}

// Reporter says whether this node reported the last election.
func (p *Planner) Reporter() bool { return p.reporter }

// Held says whether a LoadBalancer Service held the object's IP in the last election.
func (p *Planner) Held(key Key) bool { return p.held[key] }

// Keys returns the keys of the tasks, sorted.
func (p *Planner) Keys() []Key { return sortKeys(slices.Collect(maps.Keys(p.tasks))) }

func sortKeys(keys []Key) []Key {
	slices.SortFunc(keys, func(a, b Key) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return keys
}
