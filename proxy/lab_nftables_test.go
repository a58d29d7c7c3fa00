package proxy

import (
	"os/exec"
	"testing"
)

// TestProxierStaysOffBesideNFTablesKubeProxy: kube-proxy's nftables mode leaves no
// iptables canary; its table "ip kube-proxy" (or "ip6 kube-proxy"), there before the
// proxier starts or appearing later, keeps the proxier from writing.
func TestProxierStaysOffBesideNFTablesKubeProxy(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("install the nftables package (hack/setup.sh does): %v", err)
	}
	expectOffBesideKubeProxy(t, "hpxn-", []string{"nft", "add", "table", "ip", "kube-proxy"}, "nftables table ip kube-proxy exists",
		[]string{"nft", "add", "table", "ip6", "kube-proxy"}, "nftables table ip6 kube-proxy exists")
}
