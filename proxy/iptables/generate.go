package iptables

import (
	"fmt"
	"slices"

	"herald.dev/herald/proxy/model"
)

// Options turns a full sync into one of kube-proxy's lighter ones. The zero value is a
// full sync that deletes no chains.
type Options struct {
	// Changed, when non-nil, makes this a partial sync (KEP-3453): the KUBE-SVC-,
	// KUBE-SVL-, KUBE-EXT-, KUBE-FW- and KUBE-SEP- chains are written only for services
	// in Changed (added, updated, deleted, or whose endpoints changed since the last
	// successful restore). The shared chains are always written in full. Use
	// ChangedServices to compute the set; do a full sync instead after a failed
	// restore, when Node changed, or when LargeClusterMode flipped and comments should
	// follow.
	Changed model.ServiceSet
	// ExistingNATChains lists the chains now in the nat table (from iptables-save -t
	// nat). Every per-service chain in it that this snapshot does not use is flushed
	// and deleted in the payload, as kube-proxy does. nil skips the cleanup (kube-proxy
	// skips it in large clusters except once per sync period).
	ExistingNATChains []string
}

// Payload is the iptables-restore input of one sync of one family, with what a runner
// needs to apply it and keep track of it.
type Payload struct {
	Family model.Family
	// Partial reports whether unchanged services' chains were left out.
	Partial bool
	// Filter and NAT are the two tables of the restore input.
	Filter, NAT Table
	// ActiveNATChains lists every per-service nat chain the rules use, including those a
	// partial sync did not write, in emission order. Anything else with a service prefix
	// in the nat table is stale.
	ActiveNATChains []string
	// DeletedNATChains lists the stale chains this payload flushes and deletes.
	DeletedNATChains []string
	// SkippedNATRules counts the rules a partial sync left in place instead of writing;
	// NAT.Rules + SkippedNATRules is the nat rule count after the restore (kube-proxy's
	// sync_proxy_rules_iptables_total{table="nat"}).
	SkippedNATRules int
	// TotalEndpoints counts the endpoints of all proxied service ports;
	// LargeClusterMode is TotalEndpoints above the threshold (comments dropped).
	TotalEndpoints   int
	LargeClusterMode bool
	// Problems lists the input that was skipped.
	Problems []model.Problem

	data []byte
}

// Table is one table's part of the restore input.
type Table struct {
	// Text runs from "*filter" or "*nat" to "COMMIT\n".
	Text []byte
	// Chains are the chains Text declares (and so flushes and refills), in order,
	// without the stale chains it only declares to delete them.
	Chains []string
	// Rules counts the rules ("-A" lines) in Text.
	Rules int
}

// Bytes returns the whole restore input: filter, then nat, as kube-proxy passes it to
// iptables-restore --noflush --counters.
func (p *Payload) Bytes() []byte { return p.data }

// Generate computes the restore input kube-proxy's iptables proxier writes for the
// snapshot. It is pure: the same snapshot and options give the same bytes. Input it
// cannot express is skipped and listed in Payload.Problems; only invalid node settings
// are an error.
func Generate(snap *Snapshot, opts Options) (*Payload, error) {
	node, err := resolveNode(&snap.Node, snap.Family)
	if err != nil {
		return nil, fmt.Errorf("generate %s rules: %w", snap.Family, err)
	}
	resolved, probs := model.Resolve(snap.Services, snap.Family, node.name)
	ports := make([]*portInfo, len(resolved))
	for i, p := range resolved {
		ports[i] = newPortInfo(p)
	}

	g := newGenerator(node, len(ports))
	g.payload.Family, g.payload.Partial = snap.Family, opts.Changed != nil
	for _, p := range ports {
		g.payload.TotalEndpoints += len(p.Endpoints)
	}
	g.payload.LargeClusterMode = node.largeAbove >= 0 && g.payload.TotalEndpoints > node.largeAbove

	for _, p := range ports {
		g.writePort(p, opts.Changed == nil || opts.Changed.Has(p.Service))
	}
	g.deleteStale(opts.ExistingNATChains)
	writeNodePortsJump(&g.natRules, node)
	writeForward(&g.filterRules, node)

	g.payload.Problems = probs
	g.assemble()
	return &g.payload, nil
}

// generator holds the buffers of one Generate call. Chain declarations and rules are
// separate buffers because iptables-restore wants all declarations first.
type generator struct {
	node                     *nodeRules
	filterDecls, filterRules lines
	natDecls, natRules       lines
	skippedDecls, skipped    lines
	// filterChains and natChains name the chains declared in the payload.
	filterChains, natChains []string
	payload                 Payload
}

func newGenerator(node *nodeRules, ports int) *generator {
	g := &generator{node: node}
	g.skippedDecls.discard, g.skipped.discard = true, true
	// Rough sizes: a port writes about a kilobyte of nat rules.
	g.natRules.buf = make([]byte, 0, 1024+1024*ports)
	g.natDecls.buf = make([]byte, 0, 256+128*ports)
	g.filterChains, g.natChains = topLevelChains(node)
	for _, c := range g.filterChains {
		g.filterDecls.chain(c)
	}
	for _, c := range g.natChains {
		g.natDecls.chain(c)
	}
	writeFilterHead(&g.filterRules, node)
	writeNATHead(&g.natRules, node)
	return g
}

// writePort writes one service port's rules; its own chains go to the discarding
// buffers unless write is set.
func (g *generator) writePort(p *portInfo, write bool) {
	pl := planPort(p, g.node)
	writeCaptures(&g.natRules, p, &pl, g.node)
	writeFilterRules(&g.filterRules, p, &pl)
	sc := serviceChains{decls: &g.natDecls, rules: &g.natRules, active: &g.payload.ActiveNATChains,
		written: &g.natChains, bareComments: g.payload.LargeClusterMode}
	if !write {
		sc.decls, sc.rules = &g.skippedDecls, &g.skipped
	}
	writeServiceChains(&sc, p, &pl, g.node)
}

// deleteStale flushes and deletes the per-service chains that exist but are no longer
// used. The -X lines go before the final KUBE-SERVICES rule, as in kube-proxy.
func (g *generator) deleteStale(existing []string) {
	if existing == nil {
		return
	}
	active := make(map[string]bool, len(g.payload.ActiveNATChains))
	for _, c := range g.payload.ActiveNATChains {
		active[c] = true
	}
	var stale []string
	for _, c := range existing {
		if IsServiceChain(c) && !active[c] {
			active[c] = true // once, even if listed twice
			stale = append(stale, c)
		}
	}
	slices.Sort(stale)
	for _, c := range stale {
		g.natDecls.chain(c)
		g.natRules.add("-X", c)
	}
	g.payload.DeletedNATChains = stale
}

// assemble lays out the restore input and fills the Payload's tables.
func (g *generator) assemble() {
	p := &g.payload
	size := 32 + len(g.filterDecls.buf) + len(g.filterRules.buf) + len(g.natDecls.buf) + len(g.natRules.buf)
	data := make([]byte, 0, size)
	data = append(data, "*filter\n"...)
	data = append(data, g.filterDecls.buf...)
	data = append(data, g.filterRules.buf...)
	data = append(data, "COMMIT\n"...)
	split := len(data)
	data = append(data, "*nat\n"...)
	data = append(data, g.natDecls.buf...)
	data = append(data, g.natRules.buf...)
	data = append(data, "COMMIT\n"...)
	p.data = data

	p.Filter = Table{Text: data[:split:split], Chains: g.filterChains, Rules: g.filterRules.n}
	p.NAT = Table{Text: data[split:], Chains: g.natChains, Rules: g.natRules.n - len(p.DeletedNATChains)}
	p.SkippedNATRules = g.skipped.n
}
