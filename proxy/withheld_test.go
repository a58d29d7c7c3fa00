package proxy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"herald.dev/herald/proxy/model"
)

// twoNodeSlice is svc1's slice with 10.0.0.1 on node1 and 10.0.0.2 on node2.
func twoNodeSlice() *discoveryv1.EndpointSlice {
	return apiSlice(func(s *discoveryv1.EndpointSlice) {
		s.ResourceVersion = "1"
		s.Endpoints = []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("node1")},
			{Addresses: []string{"10.0.0.2"}, NodeName: ptr.To("node2")},
		}
	})
}

func endpointsOf(st *state) map[string]model.Endpoint {
	out := map[string]model.Endpoint{}
	for _, svc := range st.services {
		for _, s := range svc.EndpointSlices {
			for _, e := range s.Endpoints {
				out[e.IP.String()] = e
			}
		}
	}
	return out
}

func TestTrackerWithholdsEndpointsOfNodes(t *testing.T) {
	tr := newTracker()
	if st, changed := tr.setWithheld(map[string]bool{"node1": false}); st != nil || changed {
		t.Fatalf("before the first update: state %v, changed %v; want none", st, changed)
	}
	svc := apiService(func(s *corev1.Service) { s.ResourceVersion = "1" })
	slice := twoNodeSlice()
	st, _ := tr.update(time.Now(), []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice})
	// Set before the first update, the set applies from it on.
	if e := endpointsOf(st)["10.0.0.1"]; !e.Withheld || e.Ready || e.Serving {
		t.Fatalf("node1's endpoint after the first update: %+v; want withheld, not ready, not serving", e)
	}

	st, changed := tr.setWithheld(map[string]bool{"node1": false})
	if changed || st != nil {
		t.Fatal("the same set again reported a change")
	}
	st, changed = tr.setWithheld(map[string]bool{"node2": false})
	if !changed {
		t.Fatal("withholding node2 instead of node1 changed nothing")
	}
	if e := endpointsOf(st)["10.0.0.2"]; !e.Withheld || e.Unreachable {
		t.Errorf("node2's endpoint: %+v; want withheld, not unreachable", e)
	}
	st, changed = tr.setWithheld(map[string]bool{"node2": true})
	if !changed {
		t.Fatal("node2 becoming unreachable changed nothing")
	}
	eps := endpointsOf(st)
	if e := eps["10.0.0.1"]; e.Withheld || !e.Ready || !e.Serving {
		t.Errorf("node1's endpoint once node1 is back: %+v; want ready and serving again", e)
	}
	if e := eps["10.0.0.2"]; !e.Withheld || !e.Unreachable || e.Ready || e.Serving {
		t.Errorf("node2's endpoint: %+v; want withheld and unreachable", e)
	}
	if got := tr.withheldCounts(); !reflect.DeepEqual(got, map[string]int{"node2": 1}) {
		t.Errorf("withheldCounts = %v, want node2: 1", got)
	}

	// The API server marks node2's endpoint not ready: nothing is withheld any more
	// that would serve, and the endpoint stays withheld.
	slice2 := slice.DeepCopy()
	slice2.ResourceVersion = "2"
	slice2.Endpoints[1].Conditions.Ready = ptr.To(false)
	slice2.Endpoints[1].Conditions.Serving = ptr.To(false)
	st, _ = tr.update(time.Now(), []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{slice2})
	if e := endpointsOf(st)["10.0.0.2"]; !e.Withheld {
		t.Errorf("node2's endpoint after a slice update: %+v; want still withheld", e)
	}
	if got := tr.withheldCounts(); !reflect.DeepEqual(got, map[string]int{"node2": 0}) {
		t.Errorf("withheldCounts = %v, want node2: 0 once the API server agrees", got)
	}

	// A node without endpoints changes no Service.
	if _, changed := tr.setWithheld(map[string]bool{"node2": true, "node9": false}); changed {
		t.Error("withholding a node without endpoints reported a change")
	}
	st, changed = tr.setWithheld(nil)
	if !changed {
		t.Fatal("withholding nothing changed nothing")
	}
	for ip, e := range endpointsOf(st) {
		if e.Withheld {
			t.Errorf("%s still withheld after the set emptied", ip)
		}
	}
	// The slice the tracker converted is shared, never changed in place.
	if tr.slices[keyOf(slice2)].slice.Endpoints[1].Withheld {
		t.Error("withholding changed the converted slice in place")
	}
}

func keyOf(s *discoveryv1.EndpointSlice) (k struct{ Namespace, Name string }) {
	k.Namespace, k.Name = s.Namespace, s.Name
	return k
}

func TestStaleFlowsOfWithheldEndpoints(t *testing.T) {
	name := model.ServiceName{Namespace: "ns", Name: "a"}
	withheld := func(e model.Endpoint) model.Endpoint {
		e.Withheld, e.Unreachable, e.Ready, e.Serving = true, true, false, false
		return e
	}
	live := ep("10.0.0.2", true)
	dead := ep("10.0.0.1", true)
	svc := func(eps ...model.Endpoint) []model.Service {
		s := udpService("a", eps...)
		s.Ports[1].NodePort = 30080
		return []model.Service{s}
	}
	got := staleFlows(model.IPv4, svc(dead, live), svc(withheld(dead), live), model.NewServiceSet(name))
	var lines []string
	for _, f := range got {
		lines = append(lines, strings.Join(f, " "))
	}
	want := []string{
		"-p tcp --dport 30080 --dst-nat 10.0.0.1",
		"-p tcp --orig-dst 1.2.3.4 --dst-nat 10.0.0.1",
		"-p tcp --orig-dst 172.30.0.1 --dst-nat 10.0.0.1",
		"-p tcp --orig-dst 192.168.99.1 --dst-nat 10.0.0.1",
		"-p udp --dport 30053 --dst-nat 10.0.0.1",
		"-p udp --orig-dst 1.2.3.4 --dst-nat 10.0.0.1",
		"-p udp --orig-dst 172.30.0.1 --dst-nat 10.0.0.1",
		"-p udp --orig-dst 192.168.99.1 --dst-nat 10.0.0.1",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("flows cleared when 10.0.0.1 is withheld:\n got %q\nwant %q", lines, want)
	}

	// Already withheld before: nothing more to clear. Back from withheld: nothing.
	if got := staleFlows(model.IPv4, svc(withheld(dead), live), svc(withheld(dead), live), model.NewServiceSet(name)); len(got) != 0 {
		t.Errorf("still withheld: %v, want nothing", got)
	}
	if got := staleFlows(model.IPv4, svc(withheld(dead), live), svc(dead, live), model.NewServiceSet(name)); len(got) != 0 {
		t.Errorf("withheld no more: %v, want nothing", got)
	}
	// A TCP endpoint that merely stops serving keeps its flows (kube-proxy's rule),
	// and so does one withheld but not (yet) unreachable.
	suspect := ep("10.0.0.1", false)
	suspect.Withheld = true
	for _, f := range staleFlows(model.IPv4, svc(dead, live), svc(suspect, live), model.NewServiceSet(name)) {
		if f[1] == "tcp" {
			t.Errorf("TCP flows cleared for an endpoint withheld but not unreachable: %v", f)
		}
	}
	stopped := ep("10.0.0.1", false)
	for _, f := range staleFlows(model.IPv4, svc(dead, live), svc(stopped, live), model.NewServiceSet(name)) {
		if f[1] == "tcp" {
			t.Errorf("TCP flows cleared for an endpoint that only stopped serving: %v", f)
		}
	}
	// IPv6 filters name the family.
	dead6 := model.Endpoint{IP: netip.MustParseAddr("fd00::1"), Ready: true, Serving: true}
	for _, f := range staleFlows(model.IPv6, svc(dead6), svc(withheld(dead6)), model.NewServiceSet(name)) {
		if f[0] != "-f" || f[1] != "ipv6" {
			t.Errorf("IPv6 filter without -f ipv6: %v", f)
		}
	}
}
