package proxy

import (
	"cmp"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"time"

	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// tracker turns the full lists of Services and EndpointSlices the caller hands over into
// the generator's Services. It keeps each object's conversion and reuses it while the
// object's resourceVersion stays the same, so a change of one object among 10,000 costs
// one conversion, and it notes when each Service's endpoints changed, for
// herald_proxy_programming_seconds. It also keeps each Service assembled with its
// slices and assembles again only those an update touched: unchanged Services keep
// sharing their slices with the previous state, which makes ChangedServices' deep
// comparison of them cheap.
type tracker struct {
	services map[types.NamespacedName]*serviceEntry
	slices   map[types.NamespacedName]*sliceEntry
	// bySvc indexes the slices by the Service they name.
	bySvc map[model.ServiceName]map[types.NamespacedName]*sliceEntry
	// assembled are the Services of the last state; dirty are those to assemble again.
	assembled map[model.ServiceName]model.Service
	dirty     map[model.ServiceName]bool
	gen       uint64 // counts updates; entries note the last one that listed them
	started   bool
	start     time.Time
	// withheld are the nodes whose endpoints are withheld (setWithheld), each true when
	// it is unreachable.
	withheld map[string]bool
}

type serviceEntry struct {
	uid      types.UID
	version  string
	svc      model.Service // without EndpointSlices
	ok       bool
	problems []model.Problem
	seen     uint64
}

type sliceEntry struct {
	uid      types.UID
	version  string
	name     string
	service  model.ServiceName
	slice    model.EndpointSlice
	ok       bool
	problems []model.Problem
	seen     uint64
}

// state is one converted view of the cluster: what a sync programs.
type state struct {
	services []model.Service
	// problems are the conversion's; the generator adds its own per family.
	problems []model.Problem
}

// changes is what one update found.
type changes struct {
	// any says the state differs from the previous one.
	any bool
	// triggers are the times the endpoints of a Service changed: the EndpointSlice's
	// last-change-trigger-time annotation, or when the change was seen.
	triggers map[model.ServiceName][]time.Time
	// problems are newly found conversion problems (of objects converted this time),
	// for the log; state.problems holds them all.
	problems []model.Problem
}

func newTracker() *tracker {
	return &tracker{
		services:  map[types.NamespacedName]*serviceEntry{},
		slices:    map[types.NamespacedName]*sliceEntry{},
		bySvc:     map[model.ServiceName]map[types.NamespacedName]*sliceEntry{},
		assembled: map[model.ServiceName]model.Service{},
		dirty:     map[model.ServiceName]bool{},
	}
}

// update converts what changed since the last call and returns the new state, nil
// when nothing changed. The first call's objects are the initial state, not changes:
// they record no triggers.
func (t *tracker) update(now time.Time, svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) (*state, changes) {
	ch := changes{triggers: map[model.ServiceName][]time.Time{}}
	first := !t.started
	if first {
		t.started, t.start, ch.any = true, now, true
	}

	t.gen++
	for _, svc := range svcs {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		old := t.services[key]
		if old != nil && unchanged(old.uid, old.version, svc.UID, svc.ResourceVersion) {
			old.seen = t.gen
			continue
		}
		e := &serviceEntry{uid: svc.UID, version: svc.ResourceVersion, seen: t.gen}
		e.svc, e.problems, e.ok = ConvertService(svc)
		ch.problems = append(ch.problems, e.problems...)
		if old == nil || old.ok != e.ok || !reflect.DeepEqual(old.svc, e.svc) {
			ch.any = true
			t.dirty[model.ServiceName(key)] = true
		}
		t.services[key] = e
	}
	for key, e := range t.services {
		if e.seen != t.gen {
			delete(t.services, key)
			ch.any = true
			t.dirty[model.ServiceName(key)] = true
		}
	}

	for _, slice := range eps {
		key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
		old := t.slices[key]
		if old != nil && unchanged(old.uid, old.version, slice.UID, slice.ResourceVersion) {
			old.seen = t.gen
			continue
		}
		e := &sliceEntry{uid: slice.UID, version: slice.ResourceVersion, name: slice.Name, seen: t.gen}
		e.service, e.slice, e.problems, e.ok = ConvertEndpointSlice(slice)
		ch.problems = append(ch.problems, e.problems...)
		moved := old != nil && old.service != e.service
		if old == nil || moved || old.ok != e.ok || !reflect.DeepEqual(old.slice, e.slice) {
			ch.any = true
			t.dirty[e.service] = true
			if moved {
				t.dirty[old.service] = true
			}
			if !first && e.ok {
				ch.triggers[e.service] = append(ch.triggers[e.service], t.triggerTime(slice, now))
			}
		}
		if old != nil {
			t.unindex(key, old)
		}
		t.slices[key] = e
		if t.bySvc[e.service] == nil {
			t.bySvc[e.service] = map[types.NamespacedName]*sliceEntry{}
		}
		t.bySvc[e.service][key] = e
	}
	for key, e := range t.slices {
		if e.seen != t.gen {
			// kube-proxy measures no latency for deletions: the annotation is that of
			// the last update, not of the deletion.
			delete(t.slices, key)
			t.unindex(key, e)
			ch.any = true
			t.dirty[e.service] = true
		}
	}
	if !ch.any {
		return nil, ch // the caller keeps its state; building one costs O(Services)
	}
	return t.state(), ch
}

// unchanged says an object is the one converted before. Objects without a
// resourceVersion (built by hand, never stored) are always converted again.
func unchanged(oldUID types.UID, oldVersion string, uid types.UID, version string) bool {
	return version != "" && oldVersion == version && oldUID == uid
}

// triggerTime is when the change of a slice was triggered: the endpoints controller's
// annotation when present and later than the tracker's start (kube-proxy's rule; older
// times belong to changes made before this process watched), else now.
func (t *tracker) triggerTime(slice *discoveryv1.EndpointSlice, now time.Time) time.Time {
	if v, ok := slice.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		if at, err := time.Parse(time.RFC3339Nano, v); err == nil && at.After(t.start) && !at.After(now) {
			return at
		}
	}
	return now
}

// unindex removes a slice from bySvc.
func (t *tracker) unindex(key types.NamespacedName, e *sliceEntry) {
	delete(t.bySvc[e.service], key)
	if len(t.bySvc[e.service]) == 0 {
		delete(t.bySvc, e.service)
	}
}

// state assembles the Services the updates touched with their slices, sorted by slice
// name so that equal input gives equal Services (ChangedServices compares them
// deeply), and returns every Service.
func (t *tracker) state() *state {
	for name := range t.dirty {
		e := t.services[types.NamespacedName(name)]
		if e == nil || !e.ok {
			delete(t.assembled, name)
			continue
		}
		svc := e.svc
		var list []*sliceEntry
		for _, se := range t.bySvc[name] {
			if se.ok {
				list = append(list, se)
			}
		}
		if len(list) > 0 {
			slices.SortFunc(list, func(a, b *sliceEntry) int { return cmp.Compare(a.name, b.name) })
			svc.EndpointSlices = make([]model.EndpointSlice, len(list))
			for i, se := range list {
				svc.EndpointSlices[i] = withhold(se.slice, t.withheld)
			}
		}
		t.assembled[name] = svc
	}
	clear(t.dirty)

	st := &state{services: make([]model.Service, 0, len(t.assembled))}
	for _, svc := range t.assembled {
		st.services = append(st.services, svc)
	}
	for _, e := range t.slices {
		st.problems = append(st.problems, e.problems...)
	}
	for _, e := range t.services {
		st.problems = append(st.problems, e.problems...)
	}
	return st
}

// setWithheld makes the endpoints on the nodes of the map withheld until the next
// call, marked unreachable where the node's value is true, and returns the new state
// and whether it differs (nil before the first update, when there is none to change).
// Only the Services with an endpoint on a node whose entry changed are assembled again.
func (t *tracker) setWithheld(nodes map[string]bool) (*state, bool) {
	changed := map[string]bool{}
	for n, unreachable := range nodes {
		if was, ok := t.withheld[n]; !ok || was != unreachable {
			changed[n] = true
		}
	}
	for n := range t.withheld {
		if _, ok := nodes[n]; !ok {
			changed[n] = true
		}
	}
	t.withheld = maps.Clone(nodes)
	if len(changed) == 0 || !t.started {
		return nil, false
	}
	any := false
	for name, list := range t.bySvc {
		for _, se := range list {
			if se.ok && onNodes(se.slice, changed) {
				t.dirty[name], any = true, true
				break
			}
		}
	}
	if !any {
		return nil, false
	}
	return t.state(), true
}

// withhold returns slice with its endpoints on withheld nodes marked Withheld, not
// ready and not serving; slice itself (shared, never changed) when it has none.
func withhold(slice model.EndpointSlice, withheld map[string]bool) model.EndpointSlice {
	if len(withheld) == 0 || !onNodes(slice, withheld) {
		return slice
	}
	eps := make([]model.Endpoint, len(slice.Endpoints))
	for i, e := range slice.Endpoints {
		if unreachable, ok := withheld[e.NodeName]; ok && e.NodeName != "" {
			e.Withheld, e.Unreachable, e.Ready, e.Serving = true, unreachable, false, false
		}
		eps[i] = e
	}
	slice.Endpoints = eps
	return slice
}

// onNodes says whether an endpoint of slice is on one of nodes.
func onNodes(slice model.EndpointSlice, nodes map[string]bool) bool {
	for _, e := range slice.Endpoints {
		if _, ok := nodes[e.NodeName]; ok && e.NodeName != "" {
			return true
		}
	}
	return false
}

// withheldCounts counts, per withheld node, the distinct endpoint addresses the API
// server says can serve (ready or serving) that are withheld: what the withholding
// takes out of service. It falls to 0 once the API server marks them not ready too.
func (t *tracker) withheldCounts() map[string]int {
	if len(t.withheld) == 0 {
		return nil
	}
	ips := map[string]map[netip.Addr]bool{}
	for _, se := range t.slices {
		if !se.ok {
			continue
		}
		for _, e := range se.slice.Endpoints {
			if _, ok := t.withheld[e.NodeName]; !ok || !(e.Ready || e.Serving) {
				continue
			}
			if ips[e.NodeName] == nil {
				ips[e.NodeName] = map[netip.Addr]bool{}
			}
			ips[e.NodeName][e.IP] = true
		}
	}
	out := make(map[string]int, len(t.withheld))
	for n := range t.withheld {
		out[n] = len(ips[n])
	}
	return out
}
