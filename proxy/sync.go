package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"time"

	"herald.dev/herald/proxy/iptables"
	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/runner"
)

// family is the sync state of one IP family: kube-proxy runs one proxier per family,
// herald one family value per family inside one loop.
type family struct {
	family model.Family
	// run drives the family's iptables binaries: always in iptables mode; in nftables
	// mode when installed, to notice kube-proxy's iptables mode. nft is the nftables
	// mode's state (nil in iptables mode).
	run *runner.Runner
	nft *nftFamily
	// synced: a sync of the family succeeded since the start or the last failure.
	synced bool
	// last is the snapshot of the last successful restore: what the kernel holds, and
	// what the next partial sync is computed against. nil until the first success.
	last *iptables.Snapshot
	// active are the per-service nat chains that restore left; a partial sync deletes
	// those it no longer uses without listing the nat table (iptables-save grows with
	// every rule on the host, this list only with ours).
	active []string
	// large is the last payload's LargeClusterMode; when it flips, every endpoint rule
	// must be rewritten with or without comments, so the sync is full.
	large bool
	// needFull is set by a failed sync and by a missing canary.
	needFull bool
	lastFull time.Time
	// problems are the generator's problems of the last payload, by text: logged when
	// new, counted in herald_proxy_skipped_objects.
	problems map[string]bool
}

// errNoState: Run was asked to sync before the first Update.
var errNoState = errors.New("no Services handed over yet")

// syncAll syncs every family to the latest state, then the health check servers, and
// records the outcome. A family that fails does not stop the others.
func (p *Proxier) syncAll(ctx context.Context) error {
	if err := p.checkKubeProxy(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	st, triggers, pending := p.current, p.triggers, p.pending
	p.triggers, p.pending = map[model.ServiceName][]time.Time{}, map[model.Family]time.Time{}
	p.mu.Unlock()
	if st == nil {
		return errNoState
	}

	addrs, err := p.nodeAddrs()
	var errs []error
	failed := map[model.Family]bool{}
	if err != nil {
		errs = append(errs, err)
		for _, f := range p.families {
			failed[f.family] = true
		}
	} else {
		problems := map[string]bool{}
		for _, f := range p.families {
			if err := p.syncFamily(ctx, f, st, addrs, problems); err != nil {
				p.metrics.syncErrors.Inc()
				f.needFull = true
				failed[f.family] = true
				errs = append(errs, fmt.Errorf("%s: %w", f.family, err))
			}
		}
		p.metrics.skipped.Set(float64(len(st.problems) + len(problems)))
		p.health.sync(healthChecks(st.services, p.cfg.NodeName), addrs)
	}
	err = errors.Join(errs...)
	end := p.now()

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.families {
		if !failed[f.family] {
			p.lastUpdated[f.family] = end
		}
	}
	// The changes a failed family did not program stay pending for the retry.
	for f, since := range pending {
		if cur, ok := p.pending[f]; failed[f] && (!ok || since.Before(cur)) {
			p.pending[f] = since
		}
	}
	if err != nil {
		for name, ts := range triggers {
			p.triggers[name] = append(ts, p.triggers[name]...)
		}
		p.status.LastError = err.Error()
		return err
	}
	for _, ts := range triggers {
		for _, t := range ts {
			p.metrics.programmingSeconds.Observe(end.Sub(t).Seconds())
		}
	}
	p.status.Synced, p.status.LastSync, p.status.LastError = true, end, ""
	return nil
}

// syncFamily brings one family to st: a full sync when due, else a partial one of the
// services that changed since the last success, else nothing. problems collects the
// generator's, by text, across families.
func (p *Proxier) syncFamily(ctx context.Context, f *family, st *state, addrs []netip.Addr, problems map[string]bool) error {
	if f.nft != nil {
		return p.syncFamilyNFT(ctx, f, st, addrs, problems)
	}
	start := p.now()
	node, err := p.node(f, addrs)
	if err != nil {
		return err
	}
	snap := &iptables.Snapshot{Family: f.family, Node: node, Services: st.services}
	full := f.last == nil || f.needFull || start.Sub(f.lastFull) >= p.cfg.SyncPeriod ||
		!reflect.DeepEqual(f.last.Node, node)
	var changed model.ServiceSet
	if !full {
		if changed = iptables.ChangedServices(f.last, snap); len(changed) == 0 {
			for text := range f.problems {
				problems[text] = true
			}
			return nil
		}
	}

	payload, err := p.apply(ctx, f, snap, changed, full)
	if err != nil {
		return err
	}
	full = !payload.Partial // apply goes full when LargeClusterMode flips
	mode := "partial"
	if full {
		mode = "full"
	}
	p.metrics.syncSeconds.WithLabelValues(mode).Observe(p.now().Sub(start).Seconds())
	fam := f.family.String()
	p.metrics.rules.WithLabelValues(fam, "filter").Set(float64(payload.Filter.Rules))
	p.metrics.rules.WithLabelValues(fam, "nat").Set(float64(payload.NAT.Rules + payload.SkippedNATRules))
	p.log.V(1).Info("synced", "family", fam, "mode", mode, "services", len(st.services),
		"changed", len(changed), "bytes", len(payload.Bytes()), "deletedChains", len(payload.DeletedNATChains),
		"took", p.now().Sub(start).String())
	p.noteProblems(f, payload.Problems, problems)

	prev := f.last
	f.last, f.active, f.large, f.needFull, f.synced = snap, payload.ActiveNATChains, payload.LargeClusterMode, false, true
	if full {
		f.lastFull = start
		if prev != nil {
			changed = iptables.ChangedServices(prev, snap)
		}
	}
	if prev != nil {
		p.clearStaleFlows(ctx, f.family, prev.Services, snap.Services, changed)
	}
	return nil
}

// apply generates and restores one payload. A full sync first ensures the canaries and
// the jumps from the built-in chains (kube-proxy does this only on full syncs too) and
// lists the nat table so that chains left by anyone (a previous run, a crashed
// kube-proxy) get deleted.
func (p *Proxier) apply(ctx context.Context, f *family, snap *iptables.Snapshot, changed model.ServiceSet, full bool) (*iptables.Payload, error) {
	opts := iptables.Options{}
	if full {
		// One iptables-save per table tells which canaries and jumps already exist
		// (all of them, on every full sync but the first) and which nat chains are
		// stale: single iptables calls read the whole table each, which is slow with
		// iptables-legacy and large tables.
		saved := map[string][]byte{}
		for _, table := range []string{"filter", "nat"} {
			out, err := f.run.Save(ctx, table)
			if err != nil {
				return nil, err
			}
			saved[table] = out
		}
		if err := f.ensureCanaries(saved); err != nil {
			return nil, err
		}
		if err := f.ensureJumps(saved); err != nil {
			return nil, err
		}
		opts.ExistingNATChains = runner.ParseChains(saved["nat"], "nat")
	} else {
		opts.Changed, opts.ExistingNATChains = changed, f.active
	}
	payload, err := iptables.Generate(snap, opts)
	if err != nil {
		return nil, err
	}
	if !full && payload.LargeClusterMode != f.large {
		return p.apply(ctx, f, snap, nil, true)
	}
	if err := f.run.Restore(ctx, payload.Bytes()); err != nil {
		return nil, err
	}
	return payload, nil
}

// ensureJumps creates the generator's chains that built-in chains jump to and puts the
// jumps at the top of the built-in chains, unless saved (iptables-save of filter and nat)
// shows them there already.
func (f *family) ensureJumps(saved map[string][]byte) error {
	type tableChain struct{ table, chain string }
	done := map[tableChain]bool{}
	for table, text := range saved {
		for _, c := range runner.ParseChains(text, table) {
			done[tableChain{table, c}] = true
		}
	}
	for _, j := range iptables.JumpRules() {
		if runner.HasRule(saved[j.Table], j.Chain, j.Args...) {
			continue
		}
		target := tableChain{j.Table, j.Args[len(j.Args)-1]}
		if !done[target] {
			if err := f.run.EnsureChain(target.table, target.chain); err != nil {
				return err
			}
			done[target] = true
		}
		if err := f.run.EnsureRule(j.Table, j.Chain, j.Args...); err != nil {
			return err
		}
	}
	return nil
}

// node is the generator's Node for f: the configuration plus what is probed from the
// host on every sync, so that a change (an address, the sysctl) makes the sync full.
func (p *Proxier) node(f *family, addrs []netip.Addr) (iptables.Node, error) {
	n := iptables.DefaultNode(p.cfg.NodeName, p.cfg.NodeIPs...)
	n.Zone = p.cfg.NodeZone
	n.MasqueradeBit = p.cfg.MasqueradeBit
	n.LocalDetector.PodCIDRs = p.settings.podCIDRs
	n.NodePortAddresses = p.settings.nodePortAddresses
	n.InterfaceAddrs = addrs
	n.RandomFully = f.run.HasRandomFully()
	liberal, err := runner.Sysctl(p.cfg.InNetNS, "net.netfilter.nf_conntrack_tcp_be_liberal")
	if err != nil {
		return n, err
	}
	n.ConntrackTCPLiberal = liberal != "" && liberal != "0"
	return n, nil
}

// clearStaleFlows deletes the conntrack entries the sync left stuck (staleFlows): UDP
// flows, and the flows to endpoints of dead nodes. Failures are
// logged, not returned: the rules are right, and a stale flow ends when its client stops.
func (p *Proxier) clearStaleFlows(ctx context.Context, fam model.Family, prev, next []model.Service, changed model.ServiceSet) {
	flows := staleFlows(fam, prev, next, changed)
	if len(flows) == 0 {
		return
	}
	if p.conntrck == nil {
		p.log.V(1).Info("not deleting stale flows: no conntrack binary", "filters", len(flows))
		return
	}
	for _, filter := range flows {
		if err := p.conntrck.Delete(ctx, filter...); err != nil {
			p.log.Error(err, "deleting stale flows")
		}
	}
}

// noteProblems logs the generator's problems that the family's previous payload did
// not have, and adds them all to problems.
func (p *Proxier) noteProblems(f *family, list []model.Problem, problems map[string]bool) {
	seen := make(map[string]bool, len(list))
	for _, pr := range list {
		text := pr.Error()
		seen[text], problems[text] = true, true
		if !f.problems[text] {
			p.log.Info("skipping what the proxier cannot express", "family", f.family.String(), "problem", text)
		}
	}
	f.problems = seen
}

// nextFullSync is when the oldest full sync of a synced family expires.
func (p *Proxier) nextFullSync() (time.Time, bool) {
	var next time.Time
	for _, f := range p.families {
		if !f.synced {
			continue
		}
		if at := f.lastFull.Add(p.cfg.SyncPeriod); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}
