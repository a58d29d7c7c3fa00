package proxy

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald.dev/herald/internal/testkit"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestProxierIPv4OnlyWithoutIP6Tables: a dual-stack node whose $PATH has no ip6tables
// gets its IPv4 rules, and the proxier says that IPv6 is missing instead of refusing to
// start.
func TestProxierIPv4OnlyWithoutIP6Tables(t *testing.T) {
	ip6save, err := exec.LookPath("ip6tables-save")
	if err != nil {
		t.Fatalf("install the iptables package: %v", err)
	}
	lab := newLab(t, "hpx6-")
	if err := lab.AddSubnet(netip.MustParsePrefix("fd00:31::/64")); err != nil {
		t.Fatal(err)
	}
	node := addNode(t, lab)
	if err := node.AddAddr(netip.MustParseAddr("fd00:31::3")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", pathWithout(t, "ip6tables"))

	h := startProxier(t, node, func(c *Config) {
		c.NodeIPs = append(c.NodeIPs, netip.MustParseAddr("fd00:31::3"))
	})
	if st := h.p.Status(); len(st.MissingFamilies) != 1 || !strings.Contains(st.MissingFamilies[0], "ip6tables-restore") {
		t.Errorf("missing families %q", st.MissingFamilies)
	}
	if v4, v6 := h.metric("herald_proxy_family_programmed", "family", "IPv4"), h.metric("herald_proxy_family_programmed", "family", "IPv6"); v4 != 1 || v6 != 0 {
		t.Errorf("herald_proxy_family_programmed IPv4 %v IPv6 %v, want 1 and 0", v4, v6)
	}
	h.p.Update([]*corev1.Service{webService()},
		[]*discoveryv1.EndpointSlice{slice("web", 8080, corev1.ProtocolTCP, "172.31.0.65@node")})
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "IPv4 synced", func() error {
		if st := h.p.Status(); !st.Synced {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if rules, _ := chainRules(save(t, node, "nat"), "KUBE-SERVICES"); !containsAll(rules, "-d 198.51.100.10/32") {
		t.Errorf("IPv4 KUBE-SERVICES = %q", rules)
	}
	if nat6 := mustExec(t, node, ip6save, "-t", "nat"); strings.Contains(nat6, "KUBE-") || strings.Contains(nat6, heraldCanary) {
		t.Errorf("ip6tables written without ip6tables in $PATH:\n%s", nat6)
	}
}

// pathWithout is a directory of links to every command of $PATH except those whose
// name starts with prefix, for a $PATH that lacks them.
func pathWithout(t *testing.T, prefix string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			link := filepath.Join(dir, e.Name())
			if strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			if _, err := os.Lstat(link); err == nil {
				continue // an earlier directory of $PATH wins, as in lookups
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}
