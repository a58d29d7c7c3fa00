//go:build linux

package oracle

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
)

// Canonical rewrites an iptables-restore payload or an iptables-save dump so
// that it no longer depends on the order kube-proxy happened to visit
// Services in (it walks a Go map), keeping every order that has meaning:
//
//   - tables by name; in each, chains KUBE-NODEPORTS, KUBE-SERVICES, the other
//     KUBE-* chains by name, then the rest by name (the order of kube-proxy's
//     own unit tests), with each chain's rules grouped after the chain lines;
//   - in the chains kube-proxy fills service by service (nat KUBE-SERVICES
//     and KUBE-NODEPORTS; filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES,
//     KUBE-NODEPORTS and KUBE-PROXY-FIREWALL) rules are sorted stably by the
//     service port named at the start of their comment, so one service port's
//     rules keep their relative order; nat KUBE-SERVICES' "must be the last
//     rule" jumps to KUBE-NODEPORTS stay last, sorted by text.
//
// Rules inside per-service chains (KUBE-SVC-*, KUBE-SEP-*, ...) keep their
// order; it is deterministic in kube-proxy.
func Canonical(rules string) (string, error) {
	dump, err := iptablestest.ParseIPTablesDump(rules)
	if err != nil {
		return "", fmt.Errorf("parse iptables rules: %w", err)
	}
	slices.SortFunc(dump.Tables, func(a, b iptablestest.Table) int { return cmp.Compare(a.Name, b.Name) })
	for t := range dump.Tables {
		table := &dump.Tables[t]
		slices.SortFunc(table.Chains, func(a, b iptablestest.Chain) int {
			return cmp.Or(cmp.Compare(chainRank(a.Name), chainRank(b.Name)), cmp.Compare(a.Name, b.Name))
		})
		for c := range table.Chains {
			chain := &table.Chains[c]
			if perServiceChains[table.Name][chain.Name] {
				slices.SortStableFunc(chain.Rules, compareByServicePort)
			}
		}
	}
	return dump.String(), nil
}

// perServiceChains are the chains whose rules kube-proxy writes service by
// service in map order.
var perServiceChains = map[utiliptables.Table]map[utiliptables.Chain]bool{
	utiliptables.TableNAT: {"KUBE-SERVICES": true, "KUBE-NODEPORTS": true},
	utiliptables.TableFilter: {
		"KUBE-SERVICES": true, "KUBE-EXTERNAL-SERVICES": true,
		"KUBE-NODEPORTS": true, "KUBE-PROXY-FIREWALL": true,
	},
}

// chainRank orders chain names as kube-proxy's unit tests do.
func chainRank(name utiliptables.Chain) int {
	switch {
	case name == "KUBE-NODEPORTS":
		return 0
	case name == "KUBE-SERVICES":
		return 1
	case strings.HasPrefix(string(name), "KUBE-"):
		return 2
	default:
		return 3
	}
}

// lastRuleMarker is in the comment of nat KUBE-SERVICES' final jumps.
const lastRuleMarker = "must be the last rule"

// compareByServicePort orders rules by the service port their comment names
// ("ns/svc:port" up to the first space); rules marked as last go last.
func compareByServicePort(a, b *iptablestest.Rule) int {
	aLast, bLast := isLastRule(a), isLastRule(b)
	switch {
	case aLast && bLast:
		return cmp.Compare(a.Raw, b.Raw)
	case aLast != bLast:
		if aLast {
			return 1
		}
		return -1
	}
	return cmp.Compare(commentServicePort(a), commentServicePort(b))
}

func isLastRule(rule *iptablestest.Rule) bool {
	return rule.Comment != nil && strings.Contains(rule.Comment.Value, lastRuleMarker)
}

// commentServicePort is the comment up to its first space, which for
// kube-proxy's per-service rules is the service port name ("ns1/svc1:p80").
func commentServicePort(rule *iptablestest.Rule) string {
	if rule.Comment == nil {
		return ""
	}
	name, _, _ := strings.Cut(rule.Comment.Value, " ")
	return name
}
