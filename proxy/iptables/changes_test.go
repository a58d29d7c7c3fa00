package iptables

import (
	"reflect"
	"testing"

	"herald.dev/herald/proxy/model"
)

func TestChangedServices(t *testing.T) {
	a := service("ns1", "a", "172.30.0.1", endpoints(ready("10.0.0.1", "")))
	b := service("ns1", "b", "172.30.0.2", endpoints(ready("10.0.0.2", "")))
	c := service("ns1", "c", "172.30.0.3")
	bMoved := service("ns1", "b", "172.30.0.2", endpoints(ready("10.0.0.3", "")))
	prev := snapshot(model.IPv4, testNode(), a, b, c)
	next := snapshot(model.IPv4, testNode(), service("ns1", "d", "172.30.0.4"), bMoved, a)

	got := ChangedServices(prev, next)
	want := model.NewServiceSet(model.ServiceName{Namespace: "ns1", Name: "b"}, model.ServiceName{Namespace: "ns1", Name: "c"}, model.ServiceName{Namespace: "ns1", Name: "d"})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChangedServices = %v, want %v", got, want)
	}
	if all := ChangedServices(nil, next); len(all) != 3 {
		t.Errorf("nil prev: %v, want all three", all)
	}
	if none := ChangedServices(next, next); len(none) != 0 {
		t.Errorf("same snapshot: %v, want none", none)
	}
}

// A partial sync without changes writes no per-service chains, but keeps track of them:
// written + skipped rules equal what a full sync writes.
func TestPartialSyncAccounting(t *testing.T) {
	snap := snapshot(model.IPv4, testNode(), overallServices()...)
	full := mustGenerate(t, snap, Options{})
	partial := mustGenerate(t, snap, Options{Changed: model.ServiceSet{}})
	if !partial.Partial || full.Partial {
		t.Errorf("Partial flags: full %v, partial %v", full.Partial, partial.Partial)
	}
	if got, want := partial.NAT.Rules+partial.SkippedNATRules, full.NAT.Rules; got != want {
		t.Errorf("partial written+skipped = %d, full = %d", got, want)
	}
	if !reflect.DeepEqual(partial.ActiveNATChains, full.ActiveNATChains) {
		t.Errorf("active chains differ:\n%v\n%v", partial.ActiveNATChains, full.ActiveNATChains)
	}
	if got := partial.NAT.Chains; !reflect.DeepEqual(got, []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq}) {
		t.Errorf("partial sync declares %v", got)
	}
	if !reflect.DeepEqual(full.NAT.Chains[4:], full.ActiveNATChains) {
		t.Errorf("full sync declares %v, active %v", full.NAT.Chains, full.ActiveNATChains)
	}
	if !reflect.DeepEqual(partial.Filter, full.Filter) {
		t.Errorf("filter table differs between full and partial syncs")
	}

	// Rewriting only ns5/svc5 writes exactly its chains.
	one := mustGenerate(t, snap, Options{Changed: model.NewServiceSet(model.ServiceName{Namespace: "ns5", Name: "svc5"})})
	want := []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq,
		"KUBE-EXT-NUKIZ6OKUXPJNT4C", "KUBE-FW-NUKIZ6OKUXPJNT4C", "KUBE-SVC-NUKIZ6OKUXPJNT4C", "KUBE-SEP-I77PXRDZVX7PMWMN"}
	if !reflect.DeepEqual(one.NAT.Chains, want) {
		t.Errorf("partial sync of ns5/svc5 declares %v, want %v", one.NAT.Chains, want)
	}
}

// Stale chains are found among the existing ones by prefix; others are left alone.
func TestStaleChains(t *testing.T) {
	snap := snapshot(model.IPv4, testNode(), service("ns1", "svc1", "172.30.0.41", endpoints(ready("10.180.0.1", ""))))
	existing := []string{"KUBE-SERVICES", "KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SEP-SXIVWICOYRO3J4NJ",
		"KUBE-SEP-GONE", "KUBE-FW-GONE", "KUBE-SEP-GONE", "CNI-HOSTPORT-DNAT", "KUBE-XLB-OLD", "KUBE-MARK-DROP"}
	p := mustGenerate(t, snap, Options{ExistingNATChains: existing})
	if want := []string{"KUBE-FW-GONE", "KUBE-SEP-GONE"}; !reflect.DeepEqual(p.DeletedNATChains, want) {
		t.Errorf("deleted %v, want %v", p.DeletedNATChains, want)
	}
	checkStructure(t, p, nil)
	if none := mustGenerate(t, snap, Options{}); none.DeletedNATChains != nil {
		t.Errorf("without ExistingNATChains nothing may be deleted: %v", none.DeletedNATChains)
	}
}
