package proxy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"herald.dev/herald/proxy/runner"
)

// kube-proxy's nftables mode keeps all its rules in two nftables tables of its own,
// "ip kube-proxy" and "ip6 kube-proxy", and leaves no KUBE-PROXY-CANARY in iptables:
// the tables are how the proxier sees it. They are listed with `nft list tables`.
//
// Without the nft binary the tables cannot be listed, and the check is skipped (New
// says so once). On a host whose tools kube-proxy would share, that is no blind spot:
// kube-proxy's nftables mode drives nft itself (through knftables) and cannot run
// without it either. A containerized kube-proxy brings its own nft, which is why
// herald's speaker image installs nftables too.
var kubeProxyNFTTables = []runner.NFTTable{{Family: "ip", Name: "kube-proxy"}, {Family: "ip6", Name: "kube-proxy"}}

// kubeProxyNFTMessage is Status.Disabled when the tables exist.
func kubeProxyNFTMessage(found []runner.NFTTable) string {
	names := make([]string, len(found))
	deletes := make([]string, len(found))
	for i, t := range found {
		names[i] = t.String()
		deletes[i] = "nft delete table " + t.String()
	}
	return fmt.Sprintf("kube-proxy programs this node in nftables mode (nftables table %s exists), so herald's proxier "+
		"stays off to avoid two proxies for the same Services; if kube-proxy is gone for good, delete the table (%s) "+
		"and restart the speaker", strings.Join(names, ", "), strings.Join(deletes, "; "))
}

// kubeProxyNFT returns kube-proxy's nftables tables that exist in the node's namespace;
// none without the nft binary.
func (p *Proxier) kubeProxyNFT(ctx context.Context) ([]runner.NFTTable, error) {
	if p.nft == nil {
		return nil, nil
	}
	tables, err := p.nft.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("looking for kube-proxy's nftables tables: %w", err)
	}
	var found []runner.NFTTable
	for _, t := range kubeProxyNFTTables {
		if slices.Contains(tables, t) {
			found = append(found, t)
		}
	}
	return found, nil
}
