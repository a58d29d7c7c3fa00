package proxy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestTrackerBuildsServicesWithSortedSlices(t *testing.T) {
	tr := newTracker()
	svc := apiService(nil)
	b := apiSlice(func(s *discoveryv1.EndpointSlice) { s.Name = "svc1-b"; s.Endpoints[0].Addresses = []string{"10.0.0.2"} })
	a := apiSlice(func(s *discoveryv1.EndpointSlice) { s.Name = "svc1-a" })
	orphan := apiSlice(func(s *discoveryv1.EndpointSlice) { s.Name = "x"; s.Labels[discoveryv1.LabelServiceName] = "gone" })
	st, ch := tr.update(time.Now(), []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{b, orphan, a})
	if !ch.any || len(ch.triggers) != 0 {
		t.Fatalf("first update: any %v, triggers %v; want true and none (initial state)", ch.any, ch.triggers)
	}
	if len(st.services) != 1 || len(st.services[0].EndpointSlices) != 2 {
		t.Fatalf("services = %+v", st.services)
	}
	if got := st.services[0].EndpointSlices[0].Endpoints[0].IP.String(); got != "10.0.0.1" {
		t.Errorf("first slice holds %s, want svc1-a's 10.0.0.1 (slices sorted by name)", got)
	}
}

func TestTrackerChangesAndTriggers(t *testing.T) {
	tr := newTracker()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	svc := apiService(func(s *corev1.Service) { s.ResourceVersion = "1" })
	slice := apiSlice(func(s *discoveryv1.EndpointSlice) { s.ResourceVersion = "1" })
	tr.update(t0, []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice})

	// Same resourceVersions: nothing to do, even if the objects were edited in place
	// (they are not re-read).
	_, ch := tr.update(t0.Add(time.Second), []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice})
	if ch.any {
		t.Fatal("unchanged objects reported as a change")
	}

	// A new resourceVersion with the same content (a label edit): no change.
	slice2 := slice.DeepCopy()
	slice2.ResourceVersion, slice2.Labels["x"] = "2", "y"
	if _, ch = tr.update(t0.Add(2*time.Second), []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice2}); ch.any {
		t.Fatal("a label edit was reported as a change")
	}

	// An endpoint change without the annotation: triggered when seen.
	slice3 := slice2.DeepCopy()
	slice3.ResourceVersion = "3"
	slice3.Endpoints[0].Addresses = []string{"10.0.0.9"}
	seen := t0.Add(3 * time.Second)
	_, ch = tr.update(seen, []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice3})
	name := model.ServiceName{Namespace: "ns1", Name: "svc1"}
	if !ch.any || len(ch.triggers[name]) != 1 || !ch.triggers[name][0].Equal(seen) {
		t.Fatalf("change: any %v, triggers %v; want one at %v", ch.any, ch.triggers, seen)
	}

	// With the annotation (after the tracker started): its time.
	slice4 := slice3.DeepCopy()
	slice4.ResourceVersion = "4"
	slice4.Endpoints[0].Addresses = []string{"10.0.0.10"}
	trig := t0.Add(3500 * time.Millisecond)
	slice4.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trig.Format(time.RFC3339Nano)}
	_, ch = tr.update(t0.Add(4*time.Second), []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice4})
	if got := ch.triggers[name]; len(got) != 1 || !got[0].Equal(trig) {
		t.Fatalf("triggers %v, want the annotation's %v", got, trig)
	}

	// An annotation from before the start belongs to an older change: time seen.
	slice5 := slice4.DeepCopy()
	slice5.ResourceVersion = "5"
	slice5.Endpoints[0].Addresses = []string{"10.0.0.11"}
	slice5.Annotations[corev1.EndpointsLastChangeTriggerTime] = t0.Add(-time.Hour).Format(time.RFC3339Nano)
	seen = t0.Add(5 * time.Second)
	_, ch = tr.update(seen, []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice5})
	if got := ch.triggers[name]; len(got) != 1 || !got[0].Equal(seen) {
		t.Fatalf("triggers %v, want %v", got, seen)
	}

	// Deleting the slice is a change without a trigger; deleting the Service too.
	st, ch := tr.update(t0.Add(6*time.Second), []*corev1.Service{svc}, nil)
	if !ch.any || len(ch.triggers) != 0 || len(st.services[0].EndpointSlices) != 0 {
		t.Fatalf("slice deletion: any %v triggers %v services %+v", ch.any, ch.triggers, st.services)
	}
	st, ch = tr.update(t0.Add(7*time.Second), nil, nil)
	if !ch.any || len(st.services) != 0 {
		t.Fatalf("service deletion: any %v services %+v", ch.any, st.services)
	}
}

func TestTrackerKeepsProblemsAndSkipsBadServices(t *testing.T) {
	tr := newTracker()
	bad := apiService(func(s *corev1.Service) { s.Name = "bad"; s.Spec.ClusterIPs = []string{"x"}; s.ResourceVersion = "1" })
	half := apiService(func(s *corev1.Service) { s.Name = "half"; s.Spec.ExternalIPs = []string{"y"}; s.ResourceVersion = "1" })
	st, ch := tr.update(time.Now(), []*corev1.Service{bad, half}, nil)
	if len(ch.problems) != 2 || len(st.problems) != 2 {
		t.Fatalf("problems: new %v, all %v; want 2 and 2", ch.problems, st.problems)
	}
	if len(st.services) != 1 || st.services[0].Name != "half" {
		t.Fatalf("services = %+v, want only half", st.services)
	}
	// Not converted again: no new problems to log, no new state.
	st, ch = tr.update(time.Now(), []*corev1.Service{bad, half}, nil)
	if len(ch.problems) != 0 || ch.any || st != nil {
		t.Fatalf("second update: problems %v, any %v, state %v; want none", ch.problems, ch.any, st)
	}
}

// TestTrackerIncrementalEqualsFresh: after each of many random updates (Services and
// slices added, edited, broken, deleted, slices moved between Services), the state of
// the long-lived tracker, which assembles only what changed, equals the state a new
// tracker builds from the same lists.
func TestTrackerIncrementalEqualsFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	tr := newTracker()
	svcs := map[string]*corev1.Service{}
	eps := map[string]*discoveryv1.EndpointSlice{}
	version := 0
	next := func() string { version++; return strconv.Itoa(version) }
	var last *state
	for step := range 400 {
		name := fmt.Sprintf("svc%d", r.IntN(6))
		slice := fmt.Sprintf("%s-%d", name, r.IntN(3))
		switch r.IntN(7) {
		case 0, 1:
			svcs[name] = apiService(func(s *corev1.Service) {
				s.Name, s.ResourceVersion = name, next()
				s.Spec.Ports[0].Port = int32(80 + r.IntN(3))
				if r.IntN(8) == 0 {
					s.Spec.ClusterIP, s.Spec.ClusterIPs = "not-an-ip", []string{"not-an-ip"}
				}
			})
		case 2:
			delete(svcs, name)
		case 3, 4:
			owner := fmt.Sprintf("svc%d", r.IntN(6)) // sometimes another Service: a move
			eps[slice] = apiSlice(func(s *discoveryv1.EndpointSlice) {
				s.Name, s.ResourceVersion = slice, next()
				s.Labels[discoveryv1.LabelServiceName] = owner
				s.Endpoints[0].Addresses = []string{fmt.Sprintf("10.0.0.%d", 1+r.IntN(4))}
			})
		case 5:
			delete(eps, slice)
		case 6:
			if s, ok := eps[slice]; ok { // a label edit: new version, same content
				s = s.DeepCopy()
				s.ResourceVersion, s.Labels["x"] = next(), next()
				eps[slice] = s
			}
		}
		svcList, sliceList := slices.Collect(maps.Values(svcs)), slices.Collect(maps.Values(eps))
		st, ch := tr.update(time.Now(), svcList, sliceList)
		if st != nil {
			last = st
		}
		fresh, _ := newTracker().update(time.Now(), svcList, sliceList)
		if !ch.any && last != nil && !sameServices(last.services, fresh.services) {
			t.Fatalf("step %d: no change reported, but the lists now give\n%+v\nnot\n%+v", step, fresh.services, last.services)
		}
		if last != nil && !sameServices(last.services, fresh.services) {
			t.Fatalf("step %d: incremental state\n%+v\nfresh\n%+v", step, last.services, fresh.services)
		}
		if last != nil && len(last.problems) != len(fresh.problems) {
			t.Fatalf("step %d: %d problems, fresh %d", step, len(last.problems), len(fresh.problems))
		}
	}
}

func sameServices(a, b []model.Service) bool {
	byName := func(x, y model.Service) int { return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name) }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, byName)
	slices.SortFunc(b, byName)
	return reflect.DeepEqual(a, b)
}
