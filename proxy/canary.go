package proxy

import (
	"context"
	"fmt"
	"slices"

	"herald.dev/herald/proxy/nftables"
	"herald.dev/herald/proxy/runner"
)

// Canary chains are empty chains whose only job is to exist. kube-proxy keeps
// KUBE-PROXY-CANARY in mangle, nat and filter and resyncs when it disappears (a firewall
// reload flushed everything). herald keeps its own, HERALD-PROXY-CANARY, for the same
// reason, and never creates kube-proxy's: then KUBE-PROXY-CANARY existing always means
// a kube-proxy has been programming the node, whatever herald did before it restarted.
const (
	heraldCanary    = "HERALD-PROXY-CANARY"
	kubeProxyCanary = "KUBE-PROXY-CANARY"
)

// canaryTables are kube-proxy's: mangle first (the one its monitor polls), then the two
// tables the rules live in.
var canaryTables = []string{"mangle", "nat", "filter"}

const kubeProxyMessage = "kube-proxy programs this node (chain KUBE-PROXY-CANARY exists), so herald's proxier stays off " +
	"to avoid two writers of the same KUBE-* chains; if kube-proxy is gone for good, delete the chain " +
	"(iptables -t mangle -X KUBE-PROXY-CANARY; also -t nat and -t filter) and restart the speaker"

// kubeProxyPresent looks for kube-proxy's canary in every table of every family, and
// for its nftables tables. It returns why the proxier must stay off, or "".
func (p *Proxier) kubeProxyPresent(ctx context.Context) (string, error) {
	for _, f := range p.families {
		if f.run == nil {
			continue // nftables mode without iptables binaries
		}
		for _, table := range canaryTables {
			found, err := f.run.ChainExists(table, kubeProxyCanary)
			if err != nil {
				return "", err
			}
			if found {
				return kubeProxyMessage, nil
			}
		}
	}
	found, err := p.kubeProxyNFT(ctx)
	if err != nil || len(found) == 0 {
		return "", err
	}
	return kubeProxyNFTMessage(found), nil
}

// ensureCanaries creates herald's canaries; part of every full sync. saved holds the
// iptables-save of the tables already read (nat, filter).
func (f *family) ensureCanaries(saved map[string][]byte) error {
	for _, table := range canaryTables {
		if text, ok := saved[table]; ok && slices.Contains(runner.ParseChains(text, table), heraldCanary) {
			continue
		}
		if err := f.run.EnsureChain(table, heraldCanary); err != nil {
			return fmt.Errorf("canary: %w", err)
		}
	}
	return nil
}

// checkCanaries runs every CanaryPeriod. It turns the proxier off when kube-proxy's
// canary has appeared in mangle or its nftables tables have appeared (kube-proxy
// started after herald), and otherwise marks
// for a full resync every family one of whose canaries is gone; it reports whether a
// sync is needed. A failing check is not a reason to resync: the next one will tell.
func (p *Proxier) checkCanaries(ctx context.Context) bool {
	if found, err := p.kubeProxyNFT(ctx); err == nil && len(found) > 0 {
		p.disable(disabledKubeProxy, kubeProxyNFTMessage(found))
		return false
	}
	resync := false
	for _, f := range p.families {
		if f.run != nil {
			if found, err := f.run.ChainExists("mangle", kubeProxyCanary); err == nil && found {
				p.disable(disabledKubeProxy, kubeProxyMessage)
				return false
			}
		}
		if !f.synced || f.needFull {
			continue // nothing programmed yet, or a full sync is already due
		}
		if f.nft != nil {
			gone, err := p.nftTableGone(ctx, f)
			if err != nil {
				p.log.V(1).Info("nftables table check failed", "family", f.family.String(), "error", err.Error())
			} else if gone {
				p.log.Info("nftables table gone: the ruleset was flushed behind the proxier's back; resyncing in full",
					"family", f.family.String(), "table", nftables.TableName)
				f.needFull, resync = true, true
			}
			continue
		}
		for _, table := range canaryTables {
			if ctx.Err() != nil {
				return false
			}
			found, err := f.run.ChainExists(table, heraldCanary)
			if err != nil {
				p.log.V(1).Info("canary check failed", "family", f.family.String(), "table", table, "error", err.Error())
				continue
			}
			if !found {
				p.log.Info("canary chain gone: iptables were flushed behind the proxier's back; resyncing in full",
					"family", f.family.String(), "table", table)
				f.needFull, resync = true, true
				break
			}
		}
	}
	return resync
}
