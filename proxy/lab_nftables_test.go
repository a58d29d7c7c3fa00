package proxy

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestProxierStaysOffBesideNFTablesKubeProxy: kube-proxy's nftables mode leaves no
// iptables canary; its table "ip kube-proxy" (or "ip6 kube-proxy"), there before the
// proxier starts or appearing later, keeps the proxier from writing.
func TestProxierStaysOffBesideNFTablesKubeProxy(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("install the nftables package (hack/setup.sh does): %v", err)
	}
	lab := newLab(t, "hpxn-")
	node := addNode(t, lab)
	mustExec(t, node, "nft", "add", "table", "ip", "kube-proxy")
	h := startProxier(t, node, nil)
	h.p.Update([]*corev1.Service{lbService("web", "10.96.0.10", "198.51.100.10", 30080)}, nil)
	eventually(t, 5*time.Second, "disabled", func() error {
		if st := h.p.Status(); !strings.Contains(st.Disabled, "nftables table ip kube-proxy exists") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // ten sync periods
	if nat := save(t, node, "nat"); strings.Contains(nat, "KUBE-SERVICES") || strings.Contains(nat, heraldCanary) {
		t.Errorf("the proxier wrote next to kube-proxy:\n%s", nat)
	}
	if got := h.metric("herald_proxy_disabled", "reason", "kube-proxy"); got != 1 {
		t.Errorf("herald_proxy_disabled{reason=kube-proxy} = %v", got)
	}

	// Later: kube-proxy starts in nftables mode on a node the proxier already programs.
	node2 := addHost(t, lab, "node2", "172.31.0.4")
	h2 := startProxier(t, node2, func(c *Config) { c.NodeName = "node2" })
	h2.p.Update([]*corev1.Service{lbService("web", "10.96.0.10", "198.51.100.10", 30080)}, nil)
	eventually(t, 5*time.Second, "first sync", func() error {
		if !h2.p.Status().Synced {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	mustExec(t, node2, "nft", "add", "table", "ip6", "kube-proxy")
	eventually(t, 5*time.Second, "disabled later", func() error {
		if st := h2.p.Status(); !strings.Contains(st.Disabled, "nftables table ip6 kube-proxy exists") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}
