package vipstatus

import (
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

var (
	t0   = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	vip1 = netip.MustParseAddr("172.18.255.200")
	key1 = Key{Namespace: "default", Name: "ip-172-18-255-200"}
)

// inDefault puts every IP in the pool "default".
func inDefault(netip.Addr) string { return "default" }

// lbSvc is a LoadBalancer Service holding ips (of pool "default", see inDefault).
func lbSvc(ns, name string, ips ...string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return svc
}

func announcement1(mac string, at time.Time) layer2.Announcement {
	hw, _ := net.ParseMAC(mac)
	return layer2.Announcement{IP: vip1, At: at, Links: []layer2.Link{{Interface: "eth0", MAC: hw}}}
}

func dec(ip, owner string, svcs ...string) election.Decision {
	return election.Decision{IP: netip.MustParseAddr(ip), Owner: owner, Services: svcs}
}

func unowned(ip string, reason election.Reason, svcs ...string) election.Decision {
	d := dec(ip, "", svcs...)
	d.Reason, d.Message = reason, "why: "+string(reason)
	return d
}

// node is a speaker's planner with the store it writes to, applying the actions as
// the publisher does (minus the API server).
type node struct {
	t     *testing.T
	name  string
	p     *Planner
	store map[Key]*heraldv1.VIPStatus
}

func newNode(t *testing.T, name string, store map[Key]*heraldv1.VIPStatus) *node {
	return &node{t: t, name: name, p: NewPlanner(name), store: store}
}

// reconcile runs Reconcile on key, applies its write to the store and returns it.
func (n *node) reconcile(key Key, now time.Time) Action {
	n.t.Helper()
	in := Input{Key: key, Self: n.name, Reporter: n.p.Reporter(), Held: n.p.Held(key), Stored: n.store[key],
		Now: now, Grace: 30 * time.Second}
	task, ok := n.p.Task(key)
	if ok {
		in.Task = &task
	}
	a := Reconcile(in)
	switch a.Kind {
	case Create:
		if n.store[key] != nil {
			n.t.Fatalf("%s: create of %s, which exists", n.name, key)
		}
		obj := a.Object.DeepCopy()
		obj.UID, obj.ResourceVersion, obj.CreationTimestamp = "vip-uid", "1", metav1.NewTime(now)
		n.store[key] = obj
	case Update:
		if n.store[key] == nil || n.store[key].ResourceVersion != a.Object.ResourceVersion {
			n.t.Fatalf("%s: update of %s with a stale or missing object", n.name, key)
		}
		obj := a.Object.DeepCopy()
		obj.ResourceVersion += "+"
		n.store[key] = obj
	case Delete:
		if n.store[key] == nil || n.store[key].UID != a.UID || n.store[key].ResourceVersion != a.ResourceVersion {
			n.t.Fatalf("%s: delete of %s with wrong preconditions", n.name, key)
		}
		delete(n.store, key)
	case Contested:
		if _, ok := n.p.Contest(key, task.Gen, now); !ok {
			n.t.Fatalf("%s: contest of %s refused", n.name, key)
		}
	}
	if a.Done && ok {
		n.p.Done(key, task.Gen)
	}
	return a
}

// status is the stored status in one line, for comparisons.
func status(store map[Key]*heraldv1.VIPStatus, key Key) string {
	o := store[key]
	if o == nil {
		return "<none>"
	}
	s := o.Status
	since := "-"
	if s.Since != nil {
		since = s.Since.UTC().Format("15:04:05")
	}
	return s.IP + " node=" + s.Node + " if=" + s.Interface + " mac=" + s.MAC + " since=" + since +
		" changes=" + itoa(s.LeaderChanges) + " pool=" + s.Pool + " svcs=" + join(s.Services) + " reason=" + s.Reason
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func join(s []string) string { return strings.Join(s, ",") }

// The owner writes after its first frames, each new owner counts one leader change,
// and a restarted owner changes nothing.
func TestPlanOwnerWrites(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w1, w2 := newNode(t, "w1", store), newNode(t, "w2", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	elect := func(n *node, owner string, taken bool, now time.Time) []Key {
		e := Election{Decisions: []election.Decision{dec(vip1.String(), owner, "default/svc1")}, Services: svcs, PoolOf: inDefault, Now: now}
		if taken && owner == n.name {
			e.Taken = []netip.Addr{vip1}
		}
		return n.p.Plan(e)
	}

	if got := elect(w1, "w1", true, t0); !reflect.DeepEqual(got, []Key{key1}) {
		t.Fatalf("first election: changed %v, want [%v]", got, key1)
	}
	if a := w1.reconcile(key1, t0); a.Kind != Nothing || a.Done {
		t.Fatalf("before the first frame: %+v, want nothing (the takeover is not done)", a)
	}
	if got := w1.p.Announced(announcement1("02:42:ac:12:00:03", t0.Add(time.Second))); !reflect.DeepEqual(got, []Key{key1}) {
		t.Fatalf("announced: changed %v", got)
	}
	if a := w1.reconcile(key1, t0.Add(2*time.Second)); a.Kind != Create {
		t.Fatalf("after the first frame: %+v, want a create", a)
	}
	want := "172.18.255.200 node=w1 if=eth0 mac=02:42:ac:12:00:03 since=12:00:01 changes=1 pool=default svcs=svc1 reason="
	if got := status(store, key1); got != want {
		t.Fatalf("created:\n got %s\nwant %s", got, want)
	}
	refs := store[key1].OwnerReferences
	if len(refs) != 1 || refs[0].UID != "uid-default-svc1" || refs[0].Kind != "Service" || *refs[0].Controller || *refs[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want one to Service svc1, neither controller nor blocking deletion", refs)
	}
	if a := w1.reconcile(key1, t0.Add(3*time.Second)); a.Kind != Nothing {
		t.Errorf("again: %+v, want nothing (only write what changed)", a)
	}
	if got := elect(w1, "w1", false, t0.Add(4*time.Second)); len(got) != 0 {
		t.Errorf("the same election again changed %v", got)
	}

	// w1 dies; w2 takes over. Frames before w2's election are ignored.
	if got := w2.p.Announced(announcement1("02:42:ac:12:00:04", t0.Add(9*time.Second))); got != nil {
		t.Fatalf("frames before the election changed %v", got)
	}
	elect(w2, "w2", true, t0.Add(10*time.Second))
	w2.p.Announced(announcement1("02:42:ac:12:00:04", t0.Add(11*time.Second)))
	if a := w2.reconcile(key1, t0.Add(12*time.Second)); a.Kind != Update {
		t.Fatalf("w2's takeover: %+v, want an update", a)
	}
	want = "172.18.255.200 node=w2 if=eth0 mac=02:42:ac:12:00:04 since=12:00:11 changes=2 pool=default svcs=svc1 reason="
	if got := status(store, key1); got != want {
		t.Fatalf("after w2's takeover:\n got %s\nwant %s", got, want)
	}

	// w2 restarts (a new planner, knowing nothing) and keeps the IP: since and the
	// count stay.
	w2 = newNode(t, "w2", store)
	elect(w2, "w2", true, t0.Add(20*time.Second))
	w2.p.Announced(announcement1("02:42:ac:12:00:04", t0.Add(21*time.Second)))
	if a := w2.reconcile(key1, t0.Add(22*time.Second)); a.Kind != Nothing || !a.Done {
		t.Errorf("restarted owner: %+v, want nothing", a)
	}
	if got := status(store, key1); got != want {
		t.Fatalf("after w2's restart:\n got %s\nwant %s", got, want)
	}

	// A Service joins the IP (sharing): the owner adds it, nothing else changes.
	svcs = append(svcs, lbSvc("default", "svc0", vip1.String()))
	w2.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc0", "default/svc1")}, Services: svcs, PoolOf: inDefault})
	if a := w2.reconcile(key1, t0.Add(30*time.Second)); a.Kind != Update {
		t.Fatalf("Service added: %+v, want an update", a)
	}
	want = "172.18.255.200 node=w2 if=eth0 mac=02:42:ac:12:00:04 since=12:00:11 changes=2 pool=default svcs=svc0,svc1 reason="
	if got := status(store, key1); got != want {
		t.Fatalf("after svc0 joined:\n got %s\nwant %s", got, want)
	}
	if n := len(store[key1].OwnerReferences); n != 2 {
		t.Errorf("%d owner references, want 2: the object goes with the last of its Services", n)
	}
}

// Two speakers that both believe they own the IP (a partition, the API server
// reachable from both sides) take the object back from each other ever more slowly:
// at most every 5 minutes once the contest went on for a while. When the partition
// heals, the owner takes the object back at once.
func TestPlanNoTugOfWar(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w1, w2 := newNode(t, "w1", store), newNode(t, "w2", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	for i, n := range []*node{w1, w2} {
		n.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), n.name, "default/svc1")}, Services: svcs, PoolOf: inDefault,
			Taken: []netip.Addr{vip1}, Now: t0})
		n.p.Announced(announcement1("02:42:ac:12:00:0"+itoa(int64(i+3)), t0))
	}
	writes := map[string][]time.Duration{}
	for now := t0; now.Before(t0.Add(time.Hour)); now = now.Add(time.Second) {
		for _, n := range []*node{w1, w2} {
			if a := n.reconcile(key1, now); a.Kind == Create || a.Kind == Update {
				writes[n.name] = append(writes[n.name], now.Sub(t0))
			}
		}
	}
	for _, n := range []string{"w1", "w2"} {
		w := writes[n]
		if len(w) > 25 {
			t.Errorf("%s wrote %d times in an hour: %v", n, len(w), w)
		}
		for i := 1; i < len(w); i++ {
			if gap := w[i] - w[i-1]; i > 12 && gap < 5*time.Minute {
				t.Errorf("%s: writes %v and %v only %v apart after %d contests", n, w[i-1], w[i], gap, i)
			}
		}
	}
	total := int64(len(writes["w1"]) + len(writes["w2"]))
	if got := store[key1].Status.LeaderChanges; got != total {
		t.Errorf("%d leader changes after %d writes of alternating owners", got, total)
	}
	t.Logf("an hour of split brain: %d writes by w1, %d by w2", len(writes["w1"]), len(writes["w2"]))

	// The partition heals: w2 gives the IP up (no task), w1 announces again and takes the
	// object back at once, whoever wrote last.
	healed := t0.Add(2 * time.Hour)
	w2.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault, Now: healed})
	if a := w2.reconcile(key1, healed); a.Kind != Nothing {
		t.Errorf("w2, no longer owner: %+v", a)
	}
	if got := w1.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault,
		Healed: true, Now: healed}); len(got) != 1 {
		t.Fatalf("healed: changed %v, want the object", got)
	}
	if store[key1].Status.Node == "w1" {
		store[key1].Status.Node = "w2" // as if w2 wrote last
	}
	if a := w1.reconcile(key1, healed); a.Kind != Update {
		t.Fatalf("healed: %+v, want w1 to take the object back", a)
	}
	if got := store[key1].Status; got.Node != "w1" || !got.Since.Time.Equal(healed) {
		t.Errorf("after the heal: node %s since %v; want w1 since %v", got.Node, got.Since, healed)
	}
}

// A write a cut-off node queued and sent once its link came back, after the owner had
// published itself, is taken back within a second or two.
func TestPlanStaleWriteTakenBack(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w2, w3 := newNode(t, "w2", store), newNode(t, "w3", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	owns := func(n *node, at time.Time) {
		n.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), n.name, "default/svc1")}, Services: svcs, PoolOf: inDefault,
			Taken: []netip.Addr{vip1}, Now: at})
		n.p.Announced(announcement1("02:42:ac:12:00:0"+n.name[1:], at))
	}
	owns(w2, t0)
	w2.reconcile(key1, t0)
	owns(w3, t0.Add(time.Second)) // alone behind its pulled cable
	now := t0.Add(10 * time.Second)
	w3.reconcile(key1, now) // the cable is back: its queued write goes out...
	w3.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc1")}, Services: svcs, PoolOf: inDefault, Now: now})
	// ...and w3 rejoins and gives the IP up.
	for i := range 3 {
		w2.reconcile(key1, now.Add(time.Duration(i)*time.Second))
	}
	if got := store[key1].Status; got.Node != "w2" || got.LeaderChanges != 3 {
		t.Errorf("node %s, %d leader changes; want w2 back, 3", got.Node, got.LeaderChanges)
	}
}

// The old owner that sees the new owner's write before its own election released the
// IP (its informers lag) does not write: by the time it would, it has no task.
func TestPlanLaggingOldOwnerDoesNotWrite(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w1, w2 := newNode(t, "w1", store), newNode(t, "w2", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	for _, n := range []*node{w1, w2} {
		n.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), n.name, "default/svc1")}, Services: svcs, PoolOf: inDefault,
			Taken: []netip.Addr{vip1}, Now: t0})
		n.p.Announced(announcement1("02:42:ac:12:00:0"+n.name[1:], t0))
		n.reconcile(key1, t0)
	}
	if a := w1.reconcile(key1, t0); a.Kind != Contested {
		t.Fatalf("w1 sees w2's write: %+v, want a contest", a)
	}
	if a := w1.reconcile(key1, t0.Add(500*time.Millisecond)); a.Kind != Later {
		t.Fatalf("w1 half a second later: %+v, want later", a)
	}
	w1.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc1")}, Services: svcs, PoolOf: inDefault, Now: t0.Add(time.Second)})
	if a := w1.reconcile(key1, t0.Add(2*time.Second)); a.Kind != Nothing {
		t.Errorf("w1 after it released the IP: %+v", a)
	}
	if got := store[key1].Status; got.Node != "w2" || got.LeaderChanges != 2 {
		t.Errorf("node %s, %d leader changes; want w2, 2", got.Node, got.LeaderChanges)
	}
}

// The reporter writes node "" with the reason for IPs nobody announces; other
// speakers do not.
func TestPlanReporterWritesUnowned(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	rep, other := newNode(t, "a", store), newNode(t, "b", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	e := Election{Decisions: []election.Decision{unowned(vip1.String(), election.ReasonNoEndpoints, "default/svc1")}, Services: svcs, PoolOf: inDefault, Now: t0}
	if got := other.p.Plan(e); len(got) != 0 {
		t.Errorf("non-reporter: changed %v", got)
	}
	e.Reporter = true
	rep.p.Plan(e)
	if a := rep.reconcile(key1, t0); a.Kind != Create {
		t.Fatalf("reporter: %+v, want a create", a)
	}
	want := "172.18.255.200 node= if= mac= since=12:00:00 changes=0 pool=default svcs=svc1 reason=NoEndpoints"
	if got := status(store, key1); got != want {
		t.Fatalf("unowned:\n got %s\nwant %s", got, want)
	}
	if m := store[key1].Status.Message; m != "why: NoEndpoints" {
		t.Errorf("message %q", m)
	}
	// The reason changes: updated, since stays.
	e.Decisions = []election.Decision{unowned(vip1.String(), election.ReasonExcluded, "default/svc1")}
	rep.p.Plan(e)
	if a := rep.reconcile(key1, t0.Add(time.Minute)); a.Kind != Update {
		t.Fatalf("new reason: %+v, want an update", a)
	}
	if s := store[key1].Status; s.Reason != "Excluded" || !s.Since.Time.Equal(t0) {
		t.Errorf("new reason: %s since %v, want Excluded since %v", s.Reason, s.Since, t0)
	}

	// An owner appears (w1), then disappears: the reporter clears the node, keeping
	// the count.
	w1 := newNode(t, "w1", store)
	w1.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault, Taken: []netip.Addr{vip1}})
	w1.p.Announced(announcement1("02:42:ac:12:00:03", t0.Add(2*time.Minute)))
	w1.reconcile(key1, t0.Add(2*time.Minute))
	rep.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault, Reporter: true})
	if a := rep.reconcile(key1, t0.Add(2*time.Minute)); a.Kind != Nothing {
		t.Errorf("reporter while w1 owns: %+v", a)
	}
	e.Decisions = []election.Decision{unowned(vip1.String(), election.ReasonNoLiveSpeaker, "default/svc1")}
	e.Now = t0.Add(3 * time.Minute)
	rep.p.Plan(e)
	if a := rep.reconcile(key1, t0.Add(3*time.Minute)); a.Kind != Update {
		t.Fatalf("owner gone: %+v, want an update", a)
	}
	want = "172.18.255.200 node= if= mac= since=12:03:00 changes=1 pool=default svcs=svc1 reason=NoLiveSpeaker"
	if got := status(store, key1); got != want {
		t.Fatalf("owner gone:\n got %s\nwant %s", got, want)
	}
}

// A shared IP held by Services of two namespaces has one object in each.
func TestPlanSharedAcrossNamespaces(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w1 := newNode(t, "w1", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String()), lbSvc("other", "svc2", vip1.String())}
	w1.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1", "other/svc2")}, Services: svcs, PoolOf: inDefault, Taken: []netip.Addr{vip1}})
	keys := w1.p.Announced(announcement1("02:42:ac:12:00:03", t0))
	want := []Key{key1, {Namespace: "other", Name: "ip-172-18-255-200"}}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for _, k := range keys {
		w1.reconcile(k, t0)
	}
	if s := store[want[1]].Status; s.Node != "w1" || !reflect.DeepEqual(s.Services, []string{"svc2"}) {
		t.Errorf("other namespace: %+v", s)
	}
	// A third namespace joins later: its object is written at once, from the same
	// takeover.
	svcs = append(svcs, lbSvc("third", "svc3", vip1.String()))
	changed := w1.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1", "other/svc2", "third/svc3")}, Services: svcs, PoolOf: inDefault})
	k3 := Key{Namespace: "third", Name: "ip-172-18-255-200"}
	if !reflect.DeepEqual(changed, []Key{k3}) {
		t.Fatalf("changed %v, want [%v]", changed, k3)
	}
	if a := w1.reconcile(k3, t0.Add(time.Minute)); a.Kind != Create || a.Object.Status.Since.Time != t0 {
		t.Errorf("third namespace: %+v, want a create since the takeover", a)
	}
}

// The reporter deletes objects no LoadBalancer Service holds, once they are older
// than the grace period; nobody else does.
func TestPlanLeftovers(t *testing.T) {
	old := &heraldv1.VIPStatus{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: key1.Name, UID: "u1", ResourceVersion: "7",
		CreationTimestamp: metav1.NewTime(t0)}, Status: heraldv1.VIPStatusStatus{IP: vip1.String(), ObservedAt: ptr.To(metav1.NewTime(t0.Add(time.Minute)))}}
	clusterIP := lbSvc("default", "svc1", vip1.String())
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	for _, c := range []struct {
		name     string
		reporter bool
		svcs     []*corev1.Service
		now      time.Time
		want     Action
	}{
		{"held by a LoadBalancer Service", true, []*corev1.Service{lbSvc("default", "svc1", vip1.String())}, t0.Add(time.Hour), Action{}},
		{"held in another namespace only", true, []*corev1.Service{lbSvc("other", "svc1", vip1.String())}, t0.Add(time.Hour),
			Action{Kind: Delete, UID: "u1", ResourceVersion: "7"}},
		{"Service no longer LoadBalancer", true, []*corev1.Service{clusterIP}, t0.Add(time.Hour), Action{Kind: Delete, UID: "u1", ResourceVersion: "7"}},
		{"no Service at all", true, nil, t0.Add(time.Hour), Action{Kind: Delete, UID: "u1", ResourceVersion: "7"}},
		{"written 10s ago: later", true, nil, t0.Add(time.Minute + 10*time.Second), Action{Kind: Later, After: 20 * time.Second}},
		{"not the reporter", false, nil, t0.Add(time.Hour), Action{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := map[Key]*heraldv1.VIPStatus{key1: old.DeepCopy()}
			n := newNode(t, "a", store)
			n.p.Plan(Election{Services: c.svcs, PoolOf: inDefault, Reporter: c.reporter})
			in := Input{Key: key1, Self: "a", Reporter: n.p.Reporter(), Held: n.p.Held(key1), Stored: store[key1], Now: c.now, Grace: 30 * time.Second}
			if got := Reconcile(in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// A leftover whose observedAt lies further in the future than the grace period (a
// writer's clock may run a little ahead, not more) is judged by its creation: it cannot
// keep itself from being cleaned by a stamp in the future.
func TestPlanLeftoverStampedInTheFuture(t *testing.T) {
	for _, c := range []struct {
		name     string
		observed time.Time
		want     Action
	}{
		{"a year ahead", t0.Add(365 * 24 * time.Hour), Action{Kind: Delete, UID: "u1", ResourceVersion: "7"}},
		{"within the grace ahead", t0.Add(time.Hour + 20*time.Second), Action{Kind: Later, After: 50 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stored := &heraldv1.VIPStatus{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: key1.Name, UID: "u1", ResourceVersion: "7",
				CreationTimestamp: metav1.NewTime(t0)}, Status: heraldv1.VIPStatusStatus{IP: vip1.String(), ObservedAt: ptr.To(metav1.NewTime(c.observed))}}
			n := newNode(t, "a", map[Key]*heraldv1.VIPStatus{key1: stored})
			n.p.Plan(Election{Reporter: true})
			in := Input{Key: key1, Self: "a", Reporter: n.p.Reporter(), Held: n.p.Held(key1), Stored: stored, Now: t0.Add(time.Hour), Grace: 30 * time.Second}
			if got := Reconcile(in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// A write done for an older task does not clear the Assert of a newer one.
func TestPlannerDoneKeepsNewerAssert(t *testing.T) {
	p := NewPlanner("w1")
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault, Taken: []netip.Addr{vip1}})
	p.Announced(announcement1("02:42:ac:12:00:03", t0))
	old, _ := p.Task(key1)
	p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault, Healed: true, Now: t0.Add(time.Minute)})
	p.Done(key1, old.Gen)
	if cur, _ := p.Task(key1); !cur.Assert {
		t.Errorf("Done of generation %d cleared the Assert of generation %d", old.Gen, cur.Gen)
	}
	// Frames of an IP this node does not own are ignored.
	p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc1")}, Services: svcs, PoolOf: inDefault})
	if got := p.Announced(announcement1("02:42:ac:12:00:03", t0)); got != nil {
		t.Errorf("frames of a released IP changed %v", got)
	}
}

// An object left by a deleted Service that held the same IP (the garbage collector has
// not removed it yet) does not lend its history to the new Service's.
func TestPlanLeftoverOfDeletedServiceStartsOver(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{key1: {
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: key1.Name, UID: "old", ResourceVersion: "3",
			OwnerReferences: ownerRefs([]ServiceRef{{Name: "gone", UID: "uid-gone"}})},
		Status: heraldv1.VIPStatusStatus{IP: vip1.String(), Node: "w2", LeaderChanges: 7, Since: ptr.To(metav1.NewTime(t0)), Services: []string{"gone"}},
	}}
	w1 := newNode(t, "w1", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	w1.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w1", "default/svc1")}, Services: svcs, PoolOf: inDefault, Taken: []netip.Addr{vip1}})
	w1.p.Announced(announcement1("02:42:ac:12:00:03", t0.Add(time.Hour)))
	if a := w1.reconcile(key1, t0.Add(time.Hour)); a.Kind != Update {
		t.Fatalf("%+v, want an update", a)
	}
	want := "172.18.255.200 node=w1 if=eth0 mac=02:42:ac:12:00:03 since=13:00:00 changes=1 pool=default svcs=svc1 reason="
	if got := status(store, key1); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// An owned IP yielded to a foreign device is published with no node and reason
// IPConflict by its owner, reporter or not; once the conflict is over the owner
// writes itself again.
func TestPlanConflict(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w1 := newNode(t, "w1", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	owned := []election.Decision{dec(vip1.String(), "w1", "default/svc1")}
	w1.p.Plan(Election{Decisions: owned, Services: svcs, PoolOf: inDefault, Taken: []netip.Addr{vip1}, Now: t0})
	w1.p.Announced(announcement1("02:42:ac:12:00:03", t0))
	w1.reconcile(key1, t0)
	w1.p.Plan(Election{Decisions: owned, Services: svcs, PoolOf: inDefault, Now: t0.Add(time.Minute),
		Conflicts: map[netip.Addr]string{vip1: "claimed by 02:00:00:00:00:99"}})
	if a := w1.reconcile(key1, t0.Add(time.Minute)); a.Kind != Update {
		t.Fatalf("conflict: %+v, want an update", a)
	}
	want := "172.18.255.200 node= if= mac= since=12:01:00 changes=1 pool=default svcs=svc1 reason=IPConflict"
	if got := status(store, key1); got != want {
		t.Fatalf("conflict:\n got %s\nwant %s", got, want)
	}
	if m := store[key1].Status.Message; m != "claimed by 02:00:00:00:00:99" {
		t.Errorf("message %q", m)
	}
	// The device went away: the IP is announced again (a new first frame).
	w1.p.Plan(Election{Decisions: owned, Services: svcs, PoolOf: inDefault, Now: t0.Add(2 * time.Minute)})
	w1.p.Announced(announcement1("02:42:ac:12:00:03", t0.Add(2*time.Minute)))
	if a := w1.reconcile(key1, t0.Add(2*time.Minute)); a.Kind != Update {
		t.Fatalf("conflict over: %+v, want an update", a)
	}
	if s := store[key1].Status; s.Node != "w1" || s.Reason != "" {
		t.Fatalf("conflict over: %s", status(store, key1))
	}
}

// An owned IP in a handover says so (reason Handover, with the note) while it lasts,
// and the next election without it clears the reason; the owner and its leader
// changes are as for any takeover.
func TestPlanHandover(t *testing.T) {
	store := map[Key]*heraldv1.VIPStatus{}
	w2 := newNode(t, "w2", store)
	svcs := []*corev1.Service{lbSvc("default", "svc1", vip1.String())}
	elect := func(handover map[netip.Addr]string, now time.Time) {
		w2.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc1")}, Services: svcs,
			PoolOf: inDefault, Taken: []netip.Addr{vip1}, Handovers: handover, Now: now})
	}
	elect(map[netip.Addr]string{vip1: "from w1 (cordoned)"}, t0)
	w2.p.Announced(announcement1("02:42:ac:12:00:04", t0.Add(100*time.Millisecond)))
	if a := w2.reconcile(key1, t0.Add(time.Second)); a.Kind != Create {
		t.Fatalf("after the first frame: %+v, want a create", a)
	}
	want := "172.18.255.200 node=w2 if=eth0 mac=02:42:ac:12:00:04 since=12:00:00 changes=1 pool=default svcs=svc1 reason=Handover"
	if got := status(store, key1); got != want || store[key1].Status.Message != "from w1 (cordoned)" {
		t.Fatalf("in handover:\n got %s (message %q)\nwant %s", got, store[key1].Status.Message, want)
	}
	w2.p.Plan(Election{Decisions: []election.Decision{dec(vip1.String(), "w2", "default/svc1")}, Services: svcs,
		PoolOf: inDefault, Now: t0.Add(time.Minute)})
	if a := w2.reconcile(key1, t0.Add(time.Minute)); a.Kind != Update {
		t.Fatalf("after the handover: %+v, want an update", a)
	}
	want = "172.18.255.200 node=w2 if=eth0 mac=02:42:ac:12:00:04 since=12:00:00 changes=1 pool=default svcs=svc1 reason="
	if got := status(store, key1); got != want || store[key1].Status.Message != "" {
		t.Errorf("after the handover:\n got %s (message %q)\nwant %s", got, store[key1].Status.Message, want)
	}
}
