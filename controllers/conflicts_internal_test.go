package controllers

import (
	"net/netip"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

func vip(ns, ip, node, reason string) heraldv1.VIPStatus {
	v := heraldv1.VIPStatus{Status: heraldv1.VIPStatusStatus{IP: ip, Node: node, Reason: reason}}
	v.Namespace, v.Name = ns, "ip-"+ip
	return v
}

// The controller reads the reason the speakers write.
func TestConflictReasonIsTheSpeakers(t *testing.T) {
	if heraldv1.VIPReasonIPConflict != heraldv1.ReasonIPConflict {
		t.Fatalf("heraldv1.VIPReasonIPConflict = %q, the speaker publishes %q", heraldv1.VIPReasonIPConflict, heraldv1.ReasonIPConflict)
	}
}

func TestConflictingIPs(t *testing.T) {
	// Namespace a holds every IP; b holds 10.0.0.9; c holds nothing.
	heldIn := func(ip netip.Addr, ns string) bool {
		return ns == "a" || ns == "b" && ip == netip.MustParseAddr("10.0.0.9")
	}
	for _, c := range []struct {
		name string
		vips []heraldv1.VIPStatus
		want []string
	}{
		{name: "none", want: nil},
		{name: "only reason IPConflict counts", vips: []heraldv1.VIPStatus{
			vip("a", "10.0.0.1", "w1", ""),
			vip("a", "10.0.0.2", "", "NoEndpoints"),
			vip("a", "10.0.0.3", "", "IPConflict"),
			vip("a", "10.0.0.4", "", "ipconflict"),
		}, want: []string{"10.0.0.3"}},
		{name: "sorted, one IP once whatever its namespaces say", vips: []heraldv1.VIPStatus{
			vip("a", "fd00::1", "", "IPConflict"),
			vip("b", "10.0.0.9", "", "IPConflict"),
			vip("a", "10.0.0.9", "w2", ""),
			vip("c", "10.0.0.9", "", "IPConflict"),
			vip("a", "10.0.0.10", "", "IPConflict"),
		}, want: []string{"10.0.0.9", "10.0.0.10", "fd00::1"}},
		{name: "unparsable IPs are skipped, mapped ones unmapped", vips: []heraldv1.VIPStatus{
			vip("a", "", "", "IPConflict"),
			vip("a", "not-an-ip", "", "IPConflict"),
			vip("a", "::ffff:10.0.0.5", "", "IPConflict"),
		}, want: []string{"10.0.0.5"}},
		{name: "a claim counts only from a namespace holding the IP", vips: []heraldv1.VIPStatus{
			vip("b", "10.0.0.9", "", "IPConflict"),
			vip("b", "10.0.0.10", "", "IPConflict"),
			vip("c", "10.0.0.11", "", "IPConflict"),
		}, want: []string{"10.0.0.9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, ip := range conflictingIPs(c.vips, heldIn) {
				got = append(got, ip.String())
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("conflictingIPs = %v, want %v", got, c.want)
			}
		})
	}
}

// Only events that may change the set of IPs in conflict wake the reconciler.
func TestConflictChanged(t *testing.T) {
	ok, conflicted := vip("a", "10.0.0.1", "w1", ""), vip("a", "10.0.0.1", "", "IPConflict")
	other := vip("a", "10.0.0.2", "", "IPConflict")
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"create announced", conflictChanged.Create(event.CreateEvent{Object: &ok}), false},
		{"create in conflict", conflictChanged.Create(event.CreateEvent{Object: &conflicted}), true},
		{"delete announced", conflictChanged.Delete(event.DeleteEvent{Object: &ok}), false},
		{"delete in conflict", conflictChanged.Delete(event.DeleteEvent{Object: &conflicted}), true},
		{"update into conflict", conflictChanged.Update(event.UpdateEvent{ObjectOld: &ok, ObjectNew: &conflicted}), true},
		{"update out of conflict", conflictChanged.Update(event.UpdateEvent{ObjectOld: &conflicted, ObjectNew: &ok}), true},
		{"update staying announced", conflictChanged.Update(event.UpdateEvent{ObjectOld: &ok, ObjectNew: &ok}), false},
		{"update staying in conflict", conflictChanged.Update(event.UpdateEvent{ObjectOld: &conflicted, ObjectNew: &conflicted}), false},
		{"update of the IP in conflict", conflictChanged.Update(event.UpdateEvent{ObjectOld: &conflicted, ObjectNew: &other}), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
