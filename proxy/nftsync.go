package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"sigs.k8s.io/knftables"

	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/nftables"
	"herald.dev/herald/proxy/nftdirect"
	"herald.dev/herald/proxy/runner"
)

// nftFamily is the nftables mode's state of one family: the table's content as last
// committed, and the handle that runs transactions.
type nftFamily struct {
	family knftables.Family
	nft    knftables.Interface
	table  *nftables.Table
	// last are the services of the last committed sync, what the next partial sync is
	// computed against.
	last []model.Service
}

// newFamily prepares one family for the configured mode. In nftables mode the
// iptables binaries, if installed, still serve to notice kube-proxy's iptables mode.
func (p *Proxier) newFamily(f model.Family, host hostTools) (*family, error) {
	fam := &family{family: f}
	cmds, err := runner.CommandsFor(f, p.cfg.Backend)
	if err != nil {
		return nil, err
	}
	hasIPTables := true
	for _, c := range cmds.All() {
		hasIPTables = hasIPTables && host.installed[c]
	}
	if p.cfg.Mode == ModeIPTables || hasIPTables {
		if fam.run, err = runner.New(f, p.cfg.InNetNS, p.cfg.Backend); err != nil {
			return nil, err
		}
	}
	if p.cfg.Mode == ModeNFTables {
		nf := &nftFamily{family: knftables.IPv4Family, table: nftables.NewTable()}
		if f == model.IPv6 {
			nf.family = knftables.IPv6Family
		}
		if nf.nft, err = p.newNFT(nf.family); err != nil {
			return nil, fmt.Errorf("%s nftables: %w", f, err)
		}
		fam.nft = nf
	}
	return fam, nil
}

// newNFT opens a knftables handle on herald's table of one family, in the proxier's
// namespace (New probes nft there).
func (p *Proxier) newNFT(family knftables.Family) (knftables.Interface, error) {
	var nft knftables.Interface
	err := p.inNetNS(func() (err error) {
		nft, err = knftables.New(family, nftables.TableName)
		return err
	})
	return nft, err
}

// largeTransaction is the operation count past which runNFT replaces the knftables
// handle after running a transaction. A handle keeps the text of the largest
// transaction it ran in a reusable buffer, tens of megabytes after a full sync of
// 10,000 Services, for the life of the process; the two nft probes of a fresh handle cost
// milliseconds beside the seconds such a transaction takes. (A variable so that a
// test can have every transaction reopen the handle.)
var largeTransaction = 20000

// inNetNS runs fn in the proxier's namespace (the caller's when none is configured).
func (p *Proxier) inNetNS(fn func() error) error {
	if p.cfg.InNetNS == nil {
		return fn()
	}
	return p.cfg.InNetNS(fn)
}

// runNFT runs one transaction in the proxier's namespace and says how: "netlink" when
// direct is allowed (partial syncs, stale-chain deletions), --nftables-netlink is on
// and nftdirect translates every operation; "nft" otherwise, and when the kernel
// refuses the netlink batch (atomic: it changed nothing), so that nft's error, if any,
// is the one reported.
func (p *Proxier) runNFT(ctx context.Context, nf *nftFamily, tx *knftables.Transaction, direct bool) (string, error) {
	if direct && p.cfg.NFTNetlink {
		if b, err := nftdirect.Compile(tx.String()); err == nil {
			err := p.applyNetlink(b)
			if err == nil {
				return "netlink", nil
			}
			p.log.V(1).Info("netlink batch refused; running it with nft", "error", err.Error())
		}
	}
	err := p.inNetNS(func() error { return nf.nft.Run(ctx, tx) })
	if tx.NumOperations() > largeTransaction {
		if fresh, ferr := p.newNFT(nf.family); ferr == nil {
			nf.nft = fresh
		} else {
			p.log.Error(ferr, "reopening nft after a large transaction; keeping the old handle")
		}
	}
	return "nft", err
}

// applyNetlink sends a batch over the proxier's nf_tables socket, opening it in the
// proxier's namespace when there is none. After an error the socket is closed, since
// it may hold unread acknowledgements; the next batch opens a new one.
func (p *Proxier) applyNetlink(b *nftdirect.Batch) error {
	if p.netlink == nil {
		if err := p.inNetNS(func() (err error) {
			p.netlink, err = nftdirect.Open()
			return err
		}); err != nil {
			return err
		}
	}
	err := p.netlink.Apply(b)
	if err != nil {
		p.closeNetlink()
	}
	return err
}

// closeNetlink closes the nf_tables socket, if open.
func (p *Proxier) closeNetlink() {
	if p.netlink != nil {
		p.netlink.Close()
		p.netlink = nil
	}
}

// nftNode is the nftables generator's Node: the configuration plus the addresses
// probed on every sync, so that a change makes the sync full.
func (p *Proxier) nftNode(addrs []netip.Addr) nftables.Node {
	return nftables.Node{
		Name:              p.cfg.NodeName,
		Zone:              p.cfg.NodeZone,
		IPs:               p.cfg.NodeIPs,
		LocalDetector:     model.LocalDetector{PodCIDRs: p.settings.podCIDRs},
		MasqueradeBit:     p.cfg.MasqueradeBit,
		NodePortAddresses: p.settings.nodePortAddresses,
		InterfaceAddrs:    addrs,
	}
}

// syncFamilyNFT is syncFamily in nftables mode: a full sync recreates the family's
// table in one transaction, a partial one writes only what changed.
func (p *Proxier) syncFamilyNFT(ctx context.Context, f *family, st *state, addrs []netip.Addr, problems map[string]bool) error {
	start := p.now()
	nf := f.nft
	snap := &nftables.Snapshot{Family: f.family, Node: p.nftNode(addrs), Services: st.services}
	full := !f.synced || f.needFull || start.Sub(f.lastFull) >= p.cfg.SyncPeriod || nf.table.NeedsFull(&snap.Node)
	var changed model.ServiceSet
	if !full {
		if changed = model.ChangedServices(nf.last, st.services); len(changed) == 0 {
			for text := range f.problems {
				problems[text] = true
			}
			return nil
		}
	} else {
		changed = nil
	}

	// Chains flushed by an earlier sync are deleted apart, so that a failure here
	// cannot hold the sync back (the next full sync recreates the table anyway).
	if stale := nf.nft.NewTransaction(); nf.table.StaleChains(stale, start) > 0 && !full {
		if _, err := p.runNFT(ctx, nf, stale, true); err != nil {
			p.log.Error(err, "deleting stale nftables chains; the next full sync will", "family", f.family.String())
		}
	}

	u, err := nf.table.Sync(nf.nft.NewTransaction(), snap, changed, start)
	if err != nil {
		return err
	}
	path := "none"
	if u.Tx.NumOperations() > 0 {
		if path, err = p.runNFT(ctx, nf, u.Tx, !u.Full); err != nil {
			nf.table.Reset()
			return fmt.Errorf("nft: %w", err)
		}
	}
	u.Commit()
	mode := "partial"
	if u.Full {
		mode = "full"
	}
	p.metrics.nftTransactions.WithLabelValues(f.family.String(), path).Inc()
	p.metrics.syncSeconds.WithLabelValues(mode).Observe(p.now().Sub(start).Seconds())
	p.metrics.rules.WithLabelValues(f.family.String(), nftables.TableName).Set(float64(nf.table.Rules()))
	p.log.V(1).Info("synced", "family", f.family.String(), "mode", mode, "services", len(st.services),
		"changed", u.Services, "operations", u.Tx.NumOperations(), "path", path, "took", p.now().Sub(start).String())
	p.noteProblems(f, u.Problems, problems)

	prev := nf.last
	nf.last, f.synced, f.needFull = st.services, true, false
	if u.Full {
		f.lastFull = start
		changed = model.ChangedServices(prev, st.services)
	}
	if prev != nil {
		p.clearStaleFlows(ctx, f.family, prev, st.services, changed)
	}
	return nil
}

// nftTableGone reports whether the family's table has disappeared (a firewall reload
// ran `nft flush ruleset`, say), which calls for a full resync.
func (p *Proxier) nftTableGone(ctx context.Context, f *family) (bool, error) {
	if p.nft == nil {
		return false, errors.New("no nft binary")
	}
	tables, err := p.nft.Tables(ctx)
	if err != nil {
		return false, err
	}
	family := "ip"
	if f.family == model.IPv6 {
		family = "ip6"
	}
	return !slices.Contains(tables, runner.NFTTable{Family: family, Name: nftables.TableName}), nil
}

// removeNFTTables deletes herald's nftables tables when kube-proxy takes the node:
// unlike the iptables mode's KUBE-* chains, which kube-proxy rewrites as its own, a
// table of herald's would go on translating Service traffic beside kube-proxy's.
func (p *Proxier) removeNFTTables() {
	for _, f := range p.families {
		if f.nft == nil {
			continue
		}
		tx := f.nft.nft.NewTransaction()
		tx.Add(&knftables.Table{})
		tx.Delete(&knftables.Table{})
		if err := p.inNetNS(func() error { return f.nft.nft.Run(context.Background(), tx) }); err != nil {
			p.log.Error(err, "deleting herald's nftables table beside kube-proxy's", "family", f.family.String())
		}
		f.nft.table.Reset()
	}
}
