package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"herald.dev/herald/proxy/model"
)

// Address conventions follow kube-proxy's proxier_test.go: pods 10.0.0.0/8, ClusterIPs
// 172.30.0.0/16, this node 192.168.0.2 ("test-node"), externalIPs 192.168.99.0/24, LB
// IPs 1.2.3.4 and 5.6.7.8, clients 203.0.113.0/24.
const testNodeName = "test-node"

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = addr(s)
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// testNode is kube-proxy's NewFakeProxier node without localhost NodePorts: pod CIDR
// detector, node IP 192.168.0.2, mark bit 14.
func testNode() Node {
	n := DefaultNode(testNodeName, addr("192.168.0.2"), addr("fd00::2"))
	n.LocalDetector.PodCIDRs = prefixes("10.0.0.0/8", "fd00:10::/64")
	return n
}

// fakeProxierNode is NewFakeProxier's node exactly: localhost NodePorts on and the nfacct
// counters present.
func fakeProxierNode() Node {
	n := testNode()
	n.LocalhostNodePorts, n.NFAcct = true, true
	return n
}

func snapshot(family model.Family, node Node, svcs ...model.Service) *Snapshot {
	return &Snapshot{Family: family, Node: node, Services: svcs}
}

// service builds a Service with one TCP port and edits it.
func service(ns, name, clusterIP string, edit ...func(*model.Service)) model.Service {
	s := model.Service{Namespace: ns, Name: name, Type: model.ClusterIP, ClusterIPs: addrs(clusterIP),
		Ports: []model.ServicePort{{Name: "p80", Protocol: model.TCP, Port: 80}}}
	for _, e := range edit {
		e(&s)
	}
	return s
}

// endpoints adds one slice serving port "p80"/TCP on 80 (or the given port name, protocol
// and target port) with eps.
func endpoints(eps ...model.Endpoint) func(*model.Service) {
	return endpointsOn("p80", model.TCP, 80, eps...)
}

func endpointsOn(port string, protocol model.Protocol, target int, eps ...model.Endpoint) func(*model.Service) {
	return func(s *model.Service) {
		s.EndpointSlices = append(s.EndpointSlices, model.EndpointSlice{
			Ports:     []model.EndpointPort{{Name: port, Protocol: protocol, Port: target}},
			Endpoints: eps,
		})
	}
}

func ready(ip, node string) model.Endpoint {
	return model.Endpoint{IP: addr(ip), NodeName: node, Ready: true, Serving: true}
}

func terminating(ip, node string, serving bool) model.Endpoint {
	return model.Endpoint{IP: addr(ip), NodeName: node, Serving: serving, Terminating: true}
}

func loadBalancer(nodePort int, ips ...string) func(*model.Service) {
	return func(s *model.Service) {
		s.Type = model.LoadBalancer
		s.Ports[0].NodePort = nodePort
		s.LoadBalancerIPs = addrs(ips...)
	}
}

func mustGenerate(t testing.TB, snap *Snapshot, opts Options) *Payload {
	t.Helper()
	p, err := Generate(snap, opts)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return p
}

// natTable simulates the chains of the kernel's nat table across restores, so that
// multi-step tests can pass ExistingNATChains like a runner reading iptables-save.
type natTable map[string]bool

func (t natTable) chains() []string {
	out := []string{}
	for c := range t {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func (t natTable) apply(p *Payload) {
	for _, c := range p.NAT.Chains {
		t[c] = true
	}
	for _, c := range p.DeletedNATChains {
		delete(t, c)
	}
}

// builtinTargets are the -j targets that are not chains.
var builtinTargets = []string{"ACCEPT", "DROP", "REJECT", "RETURN", "MARK", "MASQUERADE", "DNAT"}

// checkStructure checks what iptables-restore would check and what kube-proxy's
// checkIPTablesRuleJumps checks: every table is framed, chains are declared once, rules
// only append to declared chains and jump to declared (or, in a partial sync, existing)
// chains or built-in targets, and quotes are balanced.
func checkStructure(t *testing.T, p *Payload, existing natTable) {
	t.Helper()
	for _, table := range []struct {
		name string
		tbl  Table
	}{{"filter", p.Filter}, {"nat", p.NAT}} {
		text := string(table.tbl.Text)
		if !strings.HasPrefix(text, "*"+table.name+"\n") || !strings.HasSuffix(text, "\nCOMMIT\n") {
			t.Errorf("%s table not framed by *%s and COMMIT", table.name, table.name)
			continue
		}
		declared := map[string]bool{}
		rules := 0
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n")[1:] {
			if line == "COMMIT" {
				continue
			}
			if strings.Count(line, `"`)%2 != 0 {
				t.Errorf("unbalanced quotes: %s", line)
			}
			f := strings.Fields(line)
			switch {
			case strings.HasPrefix(line, ":"):
				name := strings.TrimPrefix(f[0], ":")
				if declared[name] {
					t.Errorf("%s: chain %s declared twice", table.name, name)
				}
				if len(name) > 28 {
					t.Errorf("%s: chain name %s longer than 28", table.name, name)
				}
				declared[name] = true
			case f[0] == "-X":
				if !declared[f[1]] {
					t.Errorf("%s: deletes undeclared chain %s", table.name, f[1])
				}
			case f[0] == "-A":
				rules++
				if !declared[f[1]] {
					t.Errorf("%s: appends to undeclared chain: %s", table.name, line)
				}
				if j := slices.Index(f, "-j"); j >= 0 {
					target := f[j+1]
					known := declared[target] || slices.Contains(builtinTargets, target) ||
						(p.Partial && table.name == "nat" && existing[target])
					if !known {
						t.Errorf("%s: jump to unknown chain: %s", table.name, line)
					}
				}
			default:
				t.Errorf("%s: unexpected line %q", table.name, line)
			}
		}
		if rules != table.tbl.Rules {
			t.Errorf("%s: Rules = %d, text has %d", table.name, table.tbl.Rules, rules)
		}
	}
}

// sortRules normalizes restore input the way kube-proxy's sortIPTablesRules does, so
// expectations can be copied from its tests: tables by name; chains KUBE-NODEPORTS,
// KUBE-SERVICES, then other KUBE-* alphabetically; rules grouped by chain in emission
// order, except that KUBE-NODEPORTS and KUBE-SERVICES rules are stably sorted by the
// service named in their comment (the "must be the last rule" rule staying last);
// "-X" lines after the rules. Chain declarations follow the same chain order.
func sortRules(data string) string {
	type chain struct {
		name  string
		rules []string
	}
	var out []string
	tables := strings.SplitAfter(data, "COMMIT\n")
	sort.Strings(tables)
	for _, table := range tables {
		if table == "" {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
		byName := map[string]*chain{}
		var chains []*chain
		var deletes []string
		for _, l := range lines[1 : len(lines)-1] {
			f := strings.Fields(l)
			switch {
			case strings.HasPrefix(l, ":"):
				c := &chain{name: strings.TrimPrefix(f[0], ":")}
				byName[c.name] = c
				chains = append(chains, c)
			case f[0] == "-X":
				deletes = append(deletes, l)
			default:
				if c := byName[f[1]]; c != nil {
					c.rules = append(c.rules, l)
				}
			}
		}
		rank := func(name string) string {
			switch {
			case name == chainNodePorts:
				return "0"
			case name == chainServices:
				return "1"
			case strings.HasPrefix(name, "KUBE-"):
				return "2" + name
			}
			return "3" + name
		}
		sort.Slice(chains, func(i, j int) bool { return rank(chains[i].name) < rank(chains[j].name) })
		out = append(out, lines[0])
		for _, c := range chains {
			out = append(out, ":"+c.name+" - [0:0]")
		}
		for _, c := range chains {
			if c.name == chainNodePorts || c.name == chainServices {
				sort.SliceStable(c.rules, func(i, j int) bool { return commentService(c.rules[i]) < commentService(c.rules[j]) })
			}
			out = append(out, c.rules...)
		}
		out = append(out, deletes...)
		out = append(out, "COMMIT")
	}
	return strings.Join(out, "\n") + "\n"
}

// commentService returns the service a rule's comment names (up to the first space or
// colon); the final KUBE-SERVICES rule sorts last.
func commentService(rule string) string {
	if strings.Contains(rule, "must be the last rule") {
		return "\xff"
	}
	_, c, ok := strings.Cut(rule, "--comment ")
	if !ok {
		return ""
	}
	c = strings.TrimPrefix(c, `"`)
	if i := strings.IndexAny(c, ` :"`); i >= 0 {
		c = c[:i]
	}
	return c
}

// dedent strips the common indentation of a raw string literal and its first newline.
func dedent(s string) string {
	lines := strings.Split(strings.TrimPrefix(s, "\n"), "\n")
	indent := ""
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			indent = l[:len(l)-len(strings.TrimLeft(l, "\t "))]
			break
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}

// diffLines reports the first differing line of two texts, for readable failures.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("first difference at line %d:\nwant: %s\ngot:  %s", i+1, wl, gl)
		}
	}
	return "texts equal"
}
