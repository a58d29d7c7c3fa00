package speaker

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

// The VIPStatus objects (api/v1beta1) publish the owner of every LoadBalancer IP. This
// file decides, purely, what this node writes; publisher.go applies it.
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

// VIPKey names a VIPStatus: the namespace of the Services holding the IP and
// heraldv1.VIPStatusName of the IP.
type VIPKey = types.NamespacedName

// ServiceRef is a Service holding an IP, for the owner references.
type ServiceRef struct {
	Name string
	UID  types.UID
}

// VIPTask is what this node wants of one VIPStatus.
type VIPTask struct {
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
	// Reason and Message say why nobody announces IP.
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
func (t *VIPTask) sameTarget(o *VIPTask) bool {
	return t.IP == o.IP && slices.Equal(t.Services, o.Services) && t.Pool == o.Pool && t.Owned == o.Owned &&
		t.Announced == o.Announced && t.Interface == o.Interface && t.MAC == o.MAC && t.At.Equal(o.At) &&
		t.Reason == o.Reason && t.Message == o.Message
}

// VIPElection is one election as the planner needs it.
type VIPElection struct {
	Decisions []election.Decision
	// Services are every cached Service: their UIDs and pools, and which objects
	// are still held.
	Services []*corev1.Service
	LBClass  string
	// Reporter: this node reports the IPs nobody announces and deletes leftovers.
	Reporter bool
	// Taken are the IPs this node takes over in this election (Plan.Take): their
	// frames have not gone out yet.
	Taken []netip.Addr
	// Healed: a partition healed and this node announces its IPs again; it takes
	// their node field once more.
	Healed bool
	// Conflicts are the IPs this node owns but yielded to a foreign device, with why
	// (layer2): published with no node and reason IPConflict.
	Conflicts map[netip.Addr]string
	Now       time.Time
}

// VIPPlanner keeps the tasks of this node from election to election. It is pure and
// not safe for concurrent use.
type VIPPlanner struct {
	self  string
	tasks map[VIPKey]*VIPTask
	// contests count, per object, the writes of other speakers this node took back.
	contests map[VIPKey]contest
	// anns are the first frames of the takeovers of the IPs this node owns, for the
	// objects of every namespace holding the IP, present and future.
	anns     map[netip.Addr]announcement
	owned    map[netip.Addr]bool
	yielded  map[netip.Addr]bool // owned but yielded to a foreign device
	held     map[VIPKey]bool
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

// NewVIPPlanner returns the planner of the node named self.
func NewVIPPlanner(self string) *VIPPlanner {
	return &VIPPlanner{self: self, tasks: map[VIPKey]*VIPTask{}, contests: map[VIPKey]contest{}, anns: map[netip.Addr]announcement{},
		owned: map[netip.Addr]bool{}, held: map[VIPKey]bool{}}
}

// Elect records an election and returns the keys whose task changed or went away,
// sorted: those to look at again.
func (p *VIPPlanner) Elect(e VIPElection) []VIPKey {
	bySvc := make(map[string]*corev1.Service, len(e.Services))
	held := map[VIPKey]bool{}
	for _, svc := range e.Services {
		bySvc[svc.Namespace+"/"+svc.Name] = svc
		if !Announceable(svc, e.LBClass) {
			continue
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(ing.IP); err == nil {
				held[VIPKey{Namespace: svc.Namespace, Name: heraldv1.VIPStatusName(ip)}] = true
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
	tasks := map[VIPKey]*VIPTask{}
	var changed []VIPKey
	for _, d := range e.Decisions {
		owned := owned[d.IP]
		if note, yielded := e.Conflicts[d.IP]; yielded && d.Owner == p.self {
			d.Reason, d.Message = ReasonIPConflict, note
		} else if !owned && (d.Owner != "" || !e.Reporter) {
			continue
		}
		for ns, refs := range servicesByNamespace(d.Services, bySvc) {
			key := VIPKey{Namespace: ns, Name: heraldv1.VIPStatusName(d.IP)}
			t := &VIPTask{IP: d.IP, Owned: owned}
			for _, r := range refs {
				t.Services = append(t.Services, ServiceRef{Name: r.Name, UID: r.UID})
				if t.Pool == "" {
					t.Pool = r.Annotations[heraldv1.AnnotationAllocatedFromPool]
				}
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
func (p *VIPPlanner) Announced(a layer2.Announcement) []VIPKey {
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
	var changed []VIPKey
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
func (p *VIPPlanner) Done(key VIPKey, gen uint64) {
	if t, ok := p.tasks[key]; ok && t.Gen == gen {
		t.Assert, t.RetakeAt = false, time.Time{}
	}
}

// Contest records that another speaker's write of key contradicts the task of
// generation gen, and returns when to take the node field back: a delay that doubles
// with each contest of the object. False when the task has changed meanwhile (its
// change queued the key again).
func (p *VIPPlanner) Contest(key VIPKey, gen uint64, now time.Time) (time.Duration, bool) {
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
func (p *VIPPlanner) Task(key VIPKey) (VIPTask, bool) {
	t, ok := p.tasks[key]
	if !ok {
		return VIPTask{}, false
	}
	c := *t
	c.Services = slices.Clone(t.Services)
	return c, true
}

// Reporter says whether this node reported the last election.
func (p *VIPPlanner) Reporter() bool { return p.reporter }

// Held says whether a LoadBalancer Service held the object's IP in the last election.
func (p *VIPPlanner) Held(key VIPKey) bool { return p.held[key] }

// Keys returns the keys of the tasks, sorted.
func (p *VIPPlanner) Keys() []VIPKey { return sortKeys(slices.Collect(maps.Keys(p.tasks))) }

func sortKeys(keys []VIPKey) []VIPKey {
	slices.SortFunc(keys, func(a, b VIPKey) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return keys
}

// VIPActionKind is what to do with one VIPStatus.
type VIPActionKind int

const (
	VIPNothing VIPActionKind = iota
	VIPCreate
	VIPUpdate
	VIPDelete
	// VIPLater: look again after VIPAction.After.
	VIPLater
	// VIPContested: another speaker's write contradicts this node's view; ask
	// VIPPlanner.Contest when to take the object back.
	VIPContested
)

// VIPAction is the write ReconcileVIP asks for.
type VIPAction struct {
	Kind VIPActionKind
	// Object to create, or to update (with the stored resourceVersion).
	Object *heraldv1.VIPStatus
	// Delete preconditions: the object as it was judged a leftover.
	UID             types.UID
	ResourceVersion string
	After           time.Duration
	// Done: the object is as the task asks once this action succeeds.
	Done bool
}

// VIPInput is what ReconcileVIP decides from.
type VIPInput struct {
	Key  VIPKey
	Self string
	// Task of this node for the key; nil when none.
	Task *VIPTask
	// Reporter and Held: see VIPPlanner.
	Reporter, Held bool
	// Stored is the cached object; nil when there is none.
	Stored *heraldv1.VIPStatus
	Now    time.Time
	// Grace protects a fresh object from a reporter whose Services lag behind the
	// writer's: a leftover is deleted only once it was last written this long ago.
	Grace time.Duration
}

// ReconcileVIP returns the write that brings the stored object to what this node
// wants of it.
func ReconcileVIP(in VIPInput) VIPAction {
	t, stored := in.Task, in.Stored
	if t == nil {
		if stored == nil || !in.Reporter || in.Held {
			return VIPAction{}
		}
		last := stored.CreationTimestamp.Time
		if at := stored.Status.ObservedAt; at != nil && at.After(last) {
			last = at.Time
		}
		if age := in.Now.Sub(last); age < in.Grace {
			return VIPAction{Kind: VIPLater, After: in.Grace - age}
		}
		return VIPAction{Kind: VIPDelete, UID: stored.UID, ResourceVersion: stored.ResourceVersion}
	}
	if t.Owned && !t.Announced {
		return VIPAction{} // the takeover is not done until its first frame went out
	}
	// An object none of whose owners holds the IP now is a deleted Service's, which the
	// garbage collector has not removed yet: its history is not these Services'.
	fresh := stored == nil || !ownedByAny(stored.OwnerReferences, t.Services)
	var st heraldv1.VIPStatusStatus
	if !fresh {
		st = *stored.Status.DeepCopy()
	}
	node := ""
	if t.Owned {
		node = in.Self
	}
	if fresh || st.Node != node {
		if !fresh && !t.Assert {
			// Another speaker wrote its view after ours: take it back, but not at once.
			switch {
			case t.RetakeAt.IsZero():
				return VIPAction{Kind: VIPContested}
			case in.Now.Before(t.RetakeAt):
				return VIPAction{Kind: VIPLater, After: t.RetakeAt.Sub(in.Now)}
			}
		}
		st.Node = node
		if t.Owned {
			st.Since = ptr.To(metav1.NewTime(t.At))
			st.LeaderChanges++
		} else {
			st.Since = ptr.To(metav1.NewTime(in.Now))
		}
	}
	st.IP = t.IP.String()
	st.Pool = t.Pool
	st.Services = make([]string, len(t.Services))
	for i, s := range t.Services {
		st.Services[i] = s.Name
	}
	if t.Owned {
		st.Interface, st.MAC, st.Reason, st.Message = t.Interface, t.MAC, "", ""
	} else {
		st.Interface, st.MAC, st.Reason, st.Message = "", "", t.Reason, t.Message
	}
	refs := ownerRefs(t.Services)
	if stored != nil && sameStatus(stored.Status, st) && equalRefs(stored.OwnerReferences, refs) {
		return VIPAction{Done: true}
	}
	st.ObservedAt = ptr.To(metav1.NewTime(in.Now))
	if stored == nil {
		return VIPAction{Kind: VIPCreate, Done: true, Object: &heraldv1.VIPStatus{
			ObjectMeta: metav1.ObjectMeta{Namespace: in.Key.Namespace, Name: in.Key.Name, OwnerReferences: refs},
			Status:     st,
		}}
	}
	obj := stored.DeepCopy()
	obj.OwnerReferences = refs
	obj.Status = st
	return VIPAction{Kind: VIPUpdate, Done: true, Object: obj}
}

// ownerRefs make the garbage collector delete the object with the last of its
// Services. Not controller references, and blocking no deletion: the object is a
// report on the Services, never in their way.
func ownerRefs(svcs []ServiceRef) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, s := range svcs {
		if s.UID == "" {
			continue
		}
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: s.Name, UID: s.UID,
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)})
	}
	return out
}

// ownedByAny says whether one of refs is one of the Services.
func ownedByAny(refs []metav1.OwnerReference, svcs []ServiceRef) bool {
	for _, r := range refs {
		for _, s := range svcs {
			if r.UID == s.UID && s.UID != "" {
				return true
			}
		}
	}
	return false
}

func equalRefs(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			ptr.Deref(x.Controller, false) == ptr.Deref(y.Controller, false) &&
			ptr.Deref(x.BlockOwnerDeletion, false) == ptr.Deref(y.BlockOwnerDeletion, false)
	})
}

// sameStatus compares two statuses but for ObservedAt, and times to the second (the
// precision they keep in the API).
func sameStatus(a, b heraldv1.VIPStatusStatus) bool {
	sameTime := func(x, y *metav1.Time) bool {
		if x == nil || y == nil {
			return x == nil && y == nil
		}
		return x.Unix() == y.Unix()
	}
	return a.IP == b.IP && slices.Equal(a.Services, b.Services) && a.Pool == b.Pool && a.Node == b.Node &&
		a.Interface == b.Interface && a.MAC == b.MAC && sameTime(a.Since, b.Since) &&
		a.LeaderChanges == b.LeaderChanges && a.Reason == b.Reason && a.Message == b.Message
}
