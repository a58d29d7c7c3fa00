//go:build linux

package oracle

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// Parts of kube-proxy log through the global klog (e.g. "Service has no
	// healthcheck nodeport" for ETP=Local without one); keep test output clean.
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// The common top of every IPv4 payload with mark bit 14, nfacct and no
// --random-fully.
var (
	filterForwardRules = []string{
		`-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP`,
		`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT`,
		`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
	}
	filterTopChains = []string{
		`*filter`,
		`:KUBE-SERVICES - [0:0]`,
		`:KUBE-EXTERNAL-SERVICES - [0:0]`,
		`:KUBE-FORWARD - [0:0]`,
		`:KUBE-NODEPORTS - [0:0]`,
		`:KUBE-PROXY-FIREWALL - [0:0]`,
	}
	natTopChains = []string{
		`*nat`,
		`:KUBE-SERVICES - [0:0]`,
		`:KUBE-NODEPORTS - [0:0]`,
		`:KUBE-POSTROUTING - [0:0]`,
		`:KUBE-MARK-MASQ - [0:0]`,
	}
	natMasqueradeRules = []string{
		`-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN`,
		`-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000`,
		`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE`,
		`-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000`,
	}
)

// join concatenates line groups into one iptables-restore text.
func join(groups ...[]string) string {
	var all []string
	for _, group := range groups {
		all = append(all, group...)
	}
	return lines(all...)
}

// workedExample feeds the §1.2 input: ns1/svc1 ETP=Local LB with a local and
// a remote endpoint.
func workedExample(o *Oracle) {
	o.OnServiceAdd(lbService("ns1", "svc1", "172.30.0.41", "1.2.3.4", 3001, v1.ServiceExternalTrafficPolicyLocal))
	o.OnEndpointSliceAdd(slice("ns1", "svc1", discoveryv1.AddressTypeIPv4,
		endpoint{"10.180.0.1", testNodeName}, endpoint{"10.180.1.1", otherNodeName}))
}

// workedExampleNAT is the worked example's nat table
// (cmd/kporacle/testdata/worked-example.nat), chain lines and all.
var workedExampleNAT = join(natTopChains, []string{
	`:KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]`,
	`:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]`,
	`:KUBE-SVL-XPGD46QRK7WJZT7O - [0:0]`,
	`:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]`,
	`:KUBE-SEP-TOIS5JUHRKSSXDL7 - [0:0]`,
}, natMasqueradeRules, []string{
	`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O`,
	`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
	`-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
	`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`,
	`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "pod traffic for ns1/svc1:p80 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-XPGD46QRK7WJZT7O`,
	`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
	`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "route LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-XPGD46QRK7WJZT7O`,
	`-A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVL-XPGD46QRK7WJZT7O`,
	`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ`,
	`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.1.1:80" -j KUBE-SEP-TOIS5JUHRKSSXDL7`,
	`-A KUBE-SVL-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ`,
	`-A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ`,
	`-A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80`,
	`-A KUBE-SEP-TOIS5JUHRKSSXDL7 -m comment --comment ns1/svc1:p80 -s 10.180.1.1 -j KUBE-MARK-MASQ`,
	`-A KUBE-SEP-TOIS5JUHRKSSXDL7 -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.1.1:80`,
	`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`,
	`COMMIT`,
})

func TestWorkedExampleETPLocal(t *testing.T) {
	o := newOracle(t, workedExampleOptions())
	workedExample(o)
	result := mustSync(t, o, true)

	assertText(t, "nat payload", result.NAT, workedExampleNAT)
	assertText(t, "filter payload", result.Filter, join(filterTopChains, filterForwardRules, []string{`COMMIT`}))
	if result.Payload != result.Filter+result.NAT {
		t.Errorf("Payload is not the filter section followed by the nat section:\n%s", result.Payload)
	}
	const wantJump = `-t nat -I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`
	if len(result.EnsuredRules) != 14 || !strings.Contains(strings.Join(result.EnsuredRules, "\n"), wantJump) {
		t.Errorf("EnsuredRules = %q, want 14 jump rules including %q", result.EnsuredRules, wantJump)
	}
}

func TestIPv6ClusterPolicy(t *testing.T) {
	o := newOracle(t, Options{
		NodeName:     testNodeName,
		IPv6:         true,
		NodeIPs:      []netip.Addr{testNodeIP, netip.MustParseAddr("2001:db8::1")},
		ClusterCIDRs: []string{podCIDR, "fd00:10::/64"},
	})
	o.OnServiceAdd(lbService("ns1", "svc1", "fd00:172:30::41", "2001:db8:ff::4", 3001, v1.ServiceExternalTrafficPolicyCluster))
	o.OnEndpointSliceAdd(slice("ns1", "svc1", discoveryv1.AddressTypeIPv6,
		endpoint{"fd00:10::1", testNodeName}, endpoint{"fd00:10::2", otherNodeName}))
	result := mustSync(t, o, true)

	assertText(t, "nat payload", result.NAT, join(natTopChains, []string{
		`:KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]`,
		`:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]`,
		`:KUBE-SEP-RT5VHSJR44ZNF7G5 - [0:0]`,
		`:KUBE-SEP-JN7HKNCH6UXE6EAD - [0:0]`,
		`-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN`,
		`-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000`,
		`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
		`-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000`,
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d fd00:172:30::41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O`,
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 2001:db8:ff::4 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
		`-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
		`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d fd00:172:30::41 --dport 80 ! -s fd00:10::/64 -j KUBE-MARK-MASQ`,
		`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade traffic for ns1/svc1:p80 external destinations" -j KUBE-MARK-MASQ`,
		`-A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVC-XPGD46QRK7WJZT7O`,
		`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> [fd00:10::1]:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-RT5VHSJR44ZNF7G5`,
		`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> [fd00:10::2]:80" -j KUBE-SEP-JN7HKNCH6UXE6EAD`,
		`-A KUBE-SEP-RT5VHSJR44ZNF7G5 -m comment --comment ns1/svc1:p80 -s fd00:10::1 -j KUBE-MARK-MASQ`,
		`-A KUBE-SEP-RT5VHSJR44ZNF7G5 -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination [fd00:10::1]:80`,
		`-A KUBE-SEP-JN7HKNCH6UXE6EAD -m comment --comment ns1/svc1:p80 -s fd00:10::2 -j KUBE-MARK-MASQ`,
		`-A KUBE-SEP-JN7HKNCH6UXE6EAD -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination [fd00:10::2]:80`,
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS`,
		`COMMIT`,
	}))
	// No KUBE-FIREWALL chain: localhost NodePorts never exist for IPv6.
	assertText(t, "filter payload", result.Filter, join(filterTopChains, filterForwardRules, []string{`COMMIT`}))
}
