//go:build linux

package compare

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"

	"herald.dev/herald/hack/kporacle/oracle"
	"herald.dev/herald/proxy"
	"herald.dev/herald/proxy/iptables"
	"herald.dev/herald/proxy/model"
)

// heraldServices converts a world the way herald's proxier does (proxy/tracker.go):
// every Service through proxy.ConvertService, every EndpointSlice through
// proxy.ConvertEndpointSlice, slices attached to their Service sorted by slice name.
// Services left out by the converter and conversion problems are returned as problems:
// the generated objects are valid, so there should be none.
func heraldServices(w *world) ([]model.Service, []string) {
	var problems []string
	bySvc := map[model.ServiceName][]*discoveryv1.EndpointSlice{}
	for _, k := range sortedKeys(w.slices) {
		es := w.slices[k]
		name, _, probs, ok := proxy.ConvertEndpointSlice(es)
		for _, p := range probs {
			problems = append(problems, "convert slice "+k+": "+p.Error())
		}
		if ok {
			bySvc[name] = append(bySvc[name], es)
		}
	}
	var out []model.Service
	for _, k := range sortedKeys(w.services) {
		svc, probs, ok := proxy.ConvertService(w.services[k])
		for _, p := range probs {
			problems = append(problems, "convert service "+k+": "+p.Error())
		}
		if !ok {
			problems = append(problems, "convert service "+k+": left out")
			continue
		}
		for _, es := range bySvc[svc.ServiceName()] {
			_, converted, _, _ := proxy.ConvertEndpointSlice(es)
			svc.EndpointSlices = append(svc.EndpointSlices, converted)
		}
		out = append(out, svc)
	}
	return out, problems
}

// shuffled returns a copy of services with Services and each Service's slices in random
// order: Generate must not depend on either (kube-proxy walks maps).
func shuffled(r *rand.Rand, services []model.Service) []model.Service {
	out := slices.Clone(services)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for i := range out {
		out[i].EndpointSlices = slices.Clone(out[i].EndpointSlices)
		es := out[i].EndpointSlices
		r.Shuffle(len(es), func(a, b int) { es[a], es[b] = es[b], es[a] })
	}
	return out
}

// kubeProxyView reduces a world to what kube-proxy's proxier of one family tracks for
// change detection, in herald's types, so that comparing two views
// names exactly the Services kube-proxy's partial sync rewrites (changedNames):
//
//   - ServiceChangeTracker keeps, per Service with a cluster IP of the family, the
//     per-port info (servicePortInfo): the family's cluster IP, externalIPs, VIP-mode
//     load balancer IPs and source ranges (masked; any "allow all" range empties the
//     list, which kube-proxy tells apart from no list), the effective traffic policies and the health check port where
//     NeedsHealthCheck holds. A Service update that leaves this unchanged is no change.
//   - EndpointsChangeTracker keeps the EndpointSlices of the family's address type only
//     and calls a Service changed whenever one of its slices changes at all.
//
// With raw false, slices count by their converted content only: the Services whose rules
// may change. herald's own runner (proxy/sync.go) calls ChangedServices on the
// dual-stack converted Services: coarser across families (it also rewrites a Service
// when only its other family changed), finer within a slice (a change of an endpoint's
// ready from unset to true changes no rule, and herald does not rewrite for it). The
// test checks that the runner's set contains the raw=false set and compares end states
// for the runner's set.
func kubeProxyView(w *world, fam model.Family, raw bool) []model.Service {
	want := discoveryv1.AddressTypeIPv4
	if fam == model.IPv6 {
		want = discoveryv1.AddressTypeIPv6
	}
	in := func(a netip.Addr) bool { return a.Unmap().Is4() == (fam == model.IPv4) }
	var out []model.Service
	for _, k := range sortedKeys(w.services) {
		obj := w.services[k]
		svc, _, ok := proxy.ConvertService(obj)
		if !ok || obj.Spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		keep := func(list []netip.Addr) []netip.Addr {
			var out []netip.Addr
			for _, a := range list {
				if in(a) {
					out = append(out, a)
				}
			}
			return out
		}
		svc.ClusterIPs = keep(svc.ClusterIPs)
		if len(svc.ClusterIPs) == 0 {
			continue
		}
		svc.ExternalIPs, svc.LoadBalancerIPs = keep(svc.ExternalIPs), keep(svc.LoadBalancerIPs)
		var ranges []netip.Prefix
		for _, p := range svc.LoadBalancerSourceRanges {
			if in(p.Addr()) {
				ranges = append(ranges, p.Masked())
			}
		}
		if slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Bits() == 0 }) {
			// kube-proxy stores an empty, non-nil list here and nil when the Service
			// has no range of the family, and compares with reflect.DeepEqual: going
			// from no ranges to "allow all" is a change to it although no rule changes.
			ranges = []netip.Prefix{{}}
		}
		svc.LoadBalancerSourceRanges = ranges
		// apiservice.ExternalPolicyLocal / InternalPolicyLocal / NeedsHealthCheck; the type
		// itself is not kept.
		externallyAccessible := obj.Spec.Type == v1.ServiceTypeLoadBalancer || obj.Spec.Type == v1.ServiceTypeNodePort ||
			(obj.Spec.Type == v1.ServiceTypeClusterIP && len(obj.Spec.ExternalIPs) > 0)
		svc.ExternalTrafficPolicy = model.PolicyCluster
		if externallyAccessible && obj.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			svc.ExternalTrafficPolicy = model.PolicyLocal
		}
		if svc.InternalTrafficPolicy != model.PolicyLocal {
			svc.InternalTrafficPolicy = model.PolicyCluster
		}
		if obj.Spec.Type != v1.ServiceTypeLoadBalancer || svc.ExternalTrafficPolicy != model.PolicyLocal {
			svc.HealthCheckNodePort = 0
		}
		svc.Type = ""
		for _, sk := range w.slicesOf(obj.Namespace, obj.Name) {
			es := w.slices[sk]
			if es.AddressType != want {
				continue
			}
			_, converted, _, _ := proxy.ConvertEndpointSlice(es)
			if raw {
				// kube-proxy compares whole slice objects (esDataChanged): the slice's
				// name and every field count, also those the rules do not depend on
				// (ready unset vs true).
				text, err := json.Marshal(es)
				if err != nil {
					panic(err)
				}
				converted.Ports = append(converted.Ports, model.EndpointPort{Name: string(text)})
			}
			svc.EndpointSlices = append(svc.EndpointSlices, converted)
		}
		out = append(out, svc)
	}
	return out
}

// changedNames names the Services added, removed or different between two views. (The
// test's own code, not iptables.ChangedServices, which is part of what is tested.)
func changedNames(prev, next []model.Service) model.ServiceSet {
	out := model.ServiceSet{}
	before := map[model.ServiceName]model.Service{}
	for _, s := range prev {
		before[s.ServiceName()] = s
	}
	for _, s := range next {
		old, ok := before[s.ServiceName()]
		if !ok || !reflect.DeepEqual(old, s) {
			out.Insert(s.ServiceName())
		}
		delete(before, s.ServiceName())
	}
	for name := range before {
		out.Insert(name)
	}
	return out
}

// heraldSim is herald's proxier for one family reduced to its sync decisions
// (proxy/sync.go: syncFamily and apply), applying each payload to kube-proxy's fake
// iptables (pkg/util/iptables/testing.FakeIPTables), which implements
// iptables-restore --noflush: declared chains are flushed and refilled, "-X" deletes,
// other chains stay, and a restore whose jumps lead to missing chains is rejected.
type heraldSim struct {
	fam model.Family
	ipt *iptablestest.FakeIPTables
	// last is the snapshot of the last restore, active its ActiveNATChains, large its
	// LargeClusterMode; nil last means the next sync is full.
	last   *iptables.Snapshot
	active []string
	large  bool
}

func newHeraldSim(fam model.Family) *heraldSim {
	ipt := iptablestest.NewFake()
	if fam == model.IPv6 {
		ipt = iptablestest.NewIPv6Fake()
	}
	return &heraldSim{fam: fam, ipt: ipt}
}

// sync brings the simulated tables to snap as herald's runner does: a full sync (jump
// rules ensured, stale chains found by listing the nat table) when forced or first, else
// a partial sync of iptables.ChangedServices(last, snap) that deletes the chains the
// previous payload used and this one does not; nothing at all when nothing changed. It
// returns the runner's changed set (nil for a full sync) and the payload (nil if none).
func (h *heraldSim) sync(snap *iptables.Snapshot, full bool) (model.ServiceSet, *iptables.Payload, error) {
	if h.last == nil {
		full = true
	}
	var changed model.ServiceSet
	if !full {
		if changed = iptables.ChangedServices(h.last, snap); len(changed) == 0 {
			return changed, nil, nil
		}
	}
	payload, err := h.apply(snap, changed, full)
	if err != nil {
		return changed, payload, err
	}
	h.last, h.active, h.large = snap, payload.ActiveNATChains, payload.LargeClusterMode
	return changed, payload, nil
}

func (h *heraldSim) apply(snap *iptables.Snapshot, changed model.ServiceSet, full bool) (*iptables.Payload, error) {
	opts := iptables.Options{}
	if full {
		if err := ensureJumps(h.ipt); err != nil {
			return nil, err
		}
		opts.ExistingNATChains = natChains(h.ipt)
	} else {
		opts.Changed, opts.ExistingNATChains = changed, h.active
	}
	payload, err := iptables.Generate(snap, opts)
	if err != nil {
		return nil, err
	}
	if !full && payload.LargeClusterMode != h.large {
		return h.apply(snap, nil, true)
	}
	if err := h.ipt.RestoreAll(payload.Bytes(), utiliptables.NoFlushTables, utiliptables.RestoreCounters); err != nil {
		return payload, fmt.Errorf("iptables-restore of herald's payload: %w", err)
	}
	return payload, nil
}

// ensureJumps does what herald's runner does on a full sync (proxy/sync.go ensureJumps):
// create each jump's target chain and prepend the jump unless present. Comments with
// spaces are stored quoted, as the oracle stores kube-proxy's (iptables-save prints them
// so).
func ensureJumps(ipt *iptablestest.FakeIPTables) error {
	for _, j := range iptables.JumpRules() {
		table := utiliptables.Table(j.Table)
		if _, err := ipt.EnsureChain(table, utiliptables.Chain(j.Args[len(j.Args)-1])); err != nil {
			return err
		}
		if _, err := ipt.EnsureRule(utiliptables.Prepend, table, utiliptables.Chain(j.Chain), quoteArgs(j.Args)...); err != nil {
			return err
		}
	}
	return nil
}

// jumpRuleStrings writes herald's jump rules the way the oracle reports kube-proxy's
// EnsureRule calls: "-t nat -I PREROUTING -m comment --comment "..." -j KUBE-SERVICES".
func jumpRuleStrings() []string {
	var out []string
	for _, j := range iptables.JumpRules() {
		out = append(out, "-t "+j.Table+" -I "+j.Chain+" "+strings.Join(quoteArgs(j.Args), " "))
	}
	return out
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.Contains(a, " ") {
			out[i] = `"` + a + `"`
		}
	}
	return out
}

// natChains lists the chains of the simulated nat table, as iptables-save -t nat would
// (kube-proxy reads its stale chains the same way).
func natChains(ipt *iptablestest.FakeIPTables) []string {
	var buf bytes.Buffer
	if err := ipt.SaveInto(utiliptables.TableNAT, &buf); err != nil {
		panic(err)
	}
	var out []string
	for chain := range utiliptables.GetChainsFromTable(buf.Bytes()) {
		out = append(out, string(chain))
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}

// dump is the simulated tables in iptables-save form, as oracle.Dump prints kube-proxy's.
func dump(ipt *iptablestest.FakeIPTables) string {
	var buf bytes.Buffer
	if err := ipt.SaveInto("", &buf); err != nil {
		panic(err)
	}
	return buf.String()
}

// checkMetadata compares what herald's payload says about itself with kube-proxy's
// payload of the same sync and the tables after it: the chains each table declares (nat
// without the deleted ones), the "-A" rule counts, the deleted chains, the per-service
// chains in use (all of them in the nat table after the sync) and, for the rule-count
// metric, written plus skipped nat rules (all KUBE-* rules in the nat table after the
// sync). "" means they agree.
func checkMetadata(p *iptables.Payload, res oracle.Result, state string) string {
	var problems []string
	check := func(what string, got, want []string) {
		got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("%s: herald %q, kube-proxy %q", what, got, want))
		}
	}
	count := func(what string, got, want int) {
		if got != want {
			problems = append(problems, fmt.Sprintf("%s: herald %d, kube-proxy %d", what, got, want))
		}
	}
	filterChains, _, filterRules := restoreLines(res.Filter)
	natChains, natDeleted, natRules := restoreLines(res.NAT)
	check("Filter.Chains", p.Filter.Chains, filterChains)
	check("NAT.Chains", p.NAT.Chains, slices.DeleteFunc(natChains, func(c string) bool { return slices.Contains(natDeleted, c) }))
	check("DeletedNATChains", p.DeletedNATChains, natDeleted)
	count("Filter.Rules", p.Filter.Rules, filterRules)
	count("NAT.Rules", p.NAT.Rules, natRules)

	tables, err := oracle.SplitTables(state)
	if err != nil {
		return err.Error()
	}
	stateChains, _, _ := restoreLines(tables["nat"])
	check("ActiveNATChains", p.ActiveNATChains, slices.DeleteFunc(stateChains, func(c string) bool { return !iptables.IsServiceChain(c) }))
	kubeRules := 0
	for _, l := range strings.Split(tables["nat"], "\n") {
		if strings.HasPrefix(l, "-A KUBE-") {
			kubeRules++
		}
	}
	count("NAT.Rules+SkippedNATRules (nat rules after the sync)", p.NAT.Rules+p.SkippedNATRules, kubeRules)
	return strings.Join(problems, "; ")
}

// restoreLines returns the chains a restore input or dump section declares, the chains
// it deletes and its number of "-A" rules.
func restoreLines(section string) (chains, deleted []string, rules int) {
	for _, l := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			chains = append(chains, name)
		case strings.HasPrefix(l, "-X "):
			deleted = append(deleted, strings.TrimPrefix(l, "-X "))
		case strings.HasPrefix(l, "-A "):
			rules++
		}
	}
	return chains, deleted, rules
}
