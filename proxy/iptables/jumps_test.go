package iptables

import (
	"strings"
	"testing"
)

// The jump rules as iptables-save shows them after kube-proxy ensured them
// (proxier.go iptablesJumpChains and iptablesKubeletJumpChains).
func TestJumpRules(t *testing.T) {
	want := dedent(`
		filter INPUT -m conntrack --ctstate NEW -m comment --comment kubernetes externally-visible service portals -j KUBE-EXTERNAL-SERVICES
		filter FORWARD -m conntrack --ctstate NEW -m comment --comment kubernetes externally-visible service portals -j KUBE-EXTERNAL-SERVICES
		filter INPUT -m comment --comment kubernetes health check service ports -j KUBE-NODEPORTS
		filter FORWARD -m conntrack --ctstate NEW -m comment --comment kubernetes service portals -j KUBE-SERVICES
		filter OUTPUT -m conntrack --ctstate NEW -m comment --comment kubernetes service portals -j KUBE-SERVICES
		filter FORWARD -m comment --comment kubernetes forwarding rules -j KUBE-FORWARD
		filter INPUT -m conntrack --ctstate NEW -m comment --comment kubernetes load balancer firewall -j KUBE-PROXY-FIREWALL
		filter OUTPUT -m conntrack --ctstate NEW -m comment --comment kubernetes load balancer firewall -j KUBE-PROXY-FIREWALL
		filter FORWARD -m conntrack --ctstate NEW -m comment --comment kubernetes load balancer firewall -j KUBE-PROXY-FIREWALL
		nat OUTPUT -m comment --comment kubernetes service portals -j KUBE-SERVICES
		nat PREROUTING -m comment --comment kubernetes service portals -j KUBE-SERVICES
		nat POSTROUTING -m comment --comment kubernetes postrouting rules -j KUBE-POSTROUTING
		filter INPUT -j KUBE-FIREWALL
		filter OUTPUT -j KUBE-FIREWALL
		`)
	var got strings.Builder
	for _, j := range JumpRules() {
		got.WriteString(j.Table + " " + j.Chain + " " + strings.Join(j.Args, " ") + "\n")
	}
	if got.String() != want {
		t.Errorf("%s\n--- got:\n%s", diffLines(want, got.String()), got.String())
	}
}
