package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/layer2"
)

// reporter writes the Events users read with `kubectl describe service`: a Normal
// Event when a node takes an IP, and Warnings when an IP cannot be announced as asked.
// Warnings are written once per condition, not on every election.
type reporter struct {
	self     string
	services client.Reader // the informers' Services
	recorder events.EventRecorder

	mu sync.Mutex
	// warned holds the warnings in force, by IP, so each is written once.
	warned map[netip.Addr]string
}

func newReporter(self string, services client.Reader, recorder events.EventRecorder) *reporter {
	return &reporter{self: self, services: services, recorder: recorder, warned: map[netip.Addr]string{}}
}

// takeover reports that this node took an IP over.
func (r *reporter) takeover(t Takeover, a layer2.Announcement) {
	ifaces := make([]string, 0, len(a.Links))
	for _, l := range a.Links {
		ifaces = append(ifaces, l.Interface)
	}
	prev := "none"
	if t.Previous != "" {
		prev = t.Previous
	}
	note := fmt.Sprintf("announcing %s from %s on %s, previous owner %s", t.IP, r.self, strings.Join(ifaces, ","), prev)
	r.event(t.Services, corev1.EventTypeNormal, heraldv1.ReasonAnnouncing, note)
}

// afterElection writes the warnings that the decisions call for. IPs without owner
// are reported by one speaker only (the live member with the smallest name), so
// that a cluster of n nodes does not write n copies.
func (r *reporter) afterElection(ds []election.Decision, live []string, responders []layer2.ResponderInfo) {
	self := r.self
	reportsUnowned := election.IsReporter(live, self)
	r.mu.Lock()
	defer r.mu.Unlock()
	current := map[netip.Addr]bool{}
	for _, d := range ds {
		current[d.IP] = true
		var reason, note string
		var services []string
		switch {
		case d.Owner == "" && reportsUnowned:
			reason, note, services = string(d.Reason), fmt.Sprintf("%s is announced by no node: %s", d.IP, d.Message), d.Services
		case d.Owner == self && missingInterfaces(d, responders):
			reason, services = heraldv1.ReasonInterfaceMissing, d.Services
			note = fmt.Sprintf("%s is elected to %s, which has none of the interfaces %s that the L2Advertisement allows (it answers on %s)",
				d.IP, self, strings.Join(d.Interfaces, ","), responderNames(responders))
		case d.Owner == self && len(d.Unserved) > 0:
			reason, services = heraldv1.ReasonUnserved, d.Unserved
			note = fmt.Sprintf("%s is announced from %s, which cannot serve this Service (it shares the IP with Services that pick other nodes)", d.IP, self)
		}
		key := reason + "|" + note
		if reason == "" {
			delete(r.warned, d.IP)
			continue
		}
		if r.warned[d.IP] == key {
			continue
		}
		r.warned[d.IP] = key
		r.event(services, corev1.EventTypeWarning, reason, note)
	}
	for ip := range r.warned {
		if !current[ip] {
			delete(r.warned, ip)
		}
	}
}

// missingInterfaces says whether the decision limits the IP to interfaces none of
// which has a responder of the IP's protocol on this node.
func missingInterfaces(d election.Decision, responders []layer2.ResponderInfo) bool {
	if d.Interfaces == nil {
		return false
	}
	proto := "arp"
	if d.IP.Is6() {
		proto = "ndp"
	}
	for _, rsp := range responders {
		if rsp.Protocol == proto && slices.Contains(d.Interfaces, rsp.Interface) {
			return false
		}
	}
	return true
}

func responderNames(responders []layer2.ResponderInfo) string {
	var names []string
	for _, r := range responders {
		if !slices.Contains(names, r.Interface) {
			names = append(names, r.Interface)
		}
	}
	if len(names) == 0 {
		return "no interface"
	}
	return strings.Join(names, ",")
}

// event writes one Event on each of the Services (keys "namespace/name") still in
// the cache.
func (r *reporter) event(services []string, typ, reason, note string) {
	for _, key := range services {
		ns, name, _ := strings.Cut(key, "/")
		var svc corev1.Service
		if err := r.services.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &svc); err != nil {
			continue // deleted meanwhile: nobody to tell
		}
		r.recorder.Eventf(&svc, nil, typ, reason, "Announce", "%s", note)
	}
}
