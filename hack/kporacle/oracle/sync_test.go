//go:build linux

package oracle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// twoServices feeds the §1.2 service plus ns2/svc2, an ETP=Cluster LB with
// one local endpoint.
func twoServices(o *Oracle) {
	workedExample(o)
	o.OnServiceAdd(lbService("ns2", "svc2", "172.30.0.42", "5.6.7.8", 3002, v1.ServiceExternalTrafficPolicyCluster))
	o.OnEndpointSliceAdd(slice("ns2", "svc2", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.2", testNodeName}))
}

// svc1LocalOnly is svc1's slice after its remote endpoint went away.
func svc1LocalOnly() *discoveryv1.EndpointSlice {
	return slice("ns1", "svc1", discoveryv1.AddressTypeIPv4, endpoint{"10.180.0.1", testNodeName})
}

// canonical is Canonical or a test failure.
func canonical(t *testing.T, rules string) string {
	t.Helper()
	out, err := Canonical(rules)
	if err != nil {
		t.Fatalf("Canonical: %v", err)
	}
	return out
}

func TestPartialSyncAfterEndpointChange(t *testing.T) {
	o := newOracle(t, workedExampleOptions())
	twoServices(o)
	full := mustSync(t, o, true)

	old := slice("ns1", "svc1", discoveryv1.AddressTypeIPv4,
		endpoint{"10.180.0.1", testNodeName}, endpoint{"10.180.1.1", otherNodeName})
	o.OnEndpointSliceUpdate(old, svc1LocalOnly())
	partial := mustSync(t, o, false)

	// Only svc1's chains are rewritten; its stale endpoint chain is flushed
	// and deleted; svc2 keeps its chains but is still dispatched to from the
	// (always rewritten) KUBE-SERVICES and KUBE-NODEPORTS.
	assertText(t, "canonical partial nat payload", canonical(t, partial.NAT), lines(
		`*nat`,
		`:KUBE-NODEPORTS - [0:0]`,
		`:KUBE-SERVICES - [0:0]`,
		`:KUBE-EXT-XPGD46QRK7WJZT7O - [0:0]`,
		`:KUBE-MARK-MASQ - [0:0]`,
		`:KUBE-POSTROUTING - [0:0]`,
		`:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]`,
		`:KUBE-SEP-TOIS5JUHRKSSXDL7 - [0:0]`,
		`:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]`,
		`:KUBE-SVL-XPGD46QRK7WJZT7O - [0:0]`,
		`-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
		`-A KUBE-NODEPORTS -m comment --comment ns2/svc2:p80 -m tcp -p tcp --dport 3002 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT`,
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O`,
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
		`-A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT`,
		`-A KUBE-SERVICES -m comment --comment "ns2/svc2:p80 loadbalancer IP" -m tcp -p tcp -d 5.6.7.8 --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT`,
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`,
		`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "pod traffic for ns1/svc1:p80 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-XPGD46QRK7WJZT7O`,
		`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "masquerade LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
		`-A KUBE-EXT-XPGD46QRK7WJZT7O -m comment --comment "route LOCAL traffic for ns1/svc1:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-XPGD46QRK7WJZT7O`,
		`-A KUBE-EXT-XPGD46QRK7WJZT7O -j KUBE-SVL-XPGD46QRK7WJZT7O`,
		`-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000`,
		`-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN`,
		`-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000`,
		`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE`,
		`-A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ`,
		`-A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80`,
		`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`,
		`-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ`,
		`-A KUBE-SVL-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ`,
		`-X KUBE-SEP-TOIS5JUHRKSSXDL7`,
		`COMMIT`,
	))
	if got, want := strings.Count(partial.NAT, "\n:"), strings.Count(full.NAT, "\n:"); got >= want {
		t.Errorf("partial sync declared %d nat chains, full sync %d; want fewer", got, want)
	}
	if partial.Filter != full.Filter {
		t.Errorf("filter payload changed although no filter rule depends on the change:\n%s", partial.Filter)
	}
	if len(partial.EnsuredRules) != 0 {
		t.Errorf("partial sync ensured jump rules: %q", partial.EnsuredRules)
	}
}

func TestDumpMatchesFreshFullSync(t *testing.T) {
	incremental := newOracle(t, workedExampleOptions())
	twoServices(incremental)
	mustSync(t, incremental, true)
	o1 := slice("ns1", "svc1", discoveryv1.AddressTypeIPv4,
		endpoint{"10.180.0.1", testNodeName}, endpoint{"10.180.1.1", otherNodeName})
	incremental.OnEndpointSliceUpdate(o1, svc1LocalOnly())
	mustSync(t, incremental, false)

	fresh := newOracle(t, workedExampleOptions())
	twoServices(fresh)
	fresh.OnEndpointSliceUpdate(o1, svc1LocalOnly())
	mustSync(t, fresh, true)

	got, err := incremental.Dump()
	if err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Dump()
	if err != nil {
		t.Fatal(err)
	}
	assertText(t, "canonical dump after full+partial sync", canonical(t, got), canonical(t, want))
	if strings.Contains(got, "KUBE-SEP-TOIS5JUHRKSSXDL7") {
		t.Errorf("dump still holds the deleted endpoint chain:\n%s", got)
	}
	if !strings.Contains(got, `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`) {
		t.Errorf("dump lacks the ensured PREROUTING jump:\n%s", got)
	}
}

func TestDeletedServiceChainsAreRemoved(t *testing.T) {
	o := newOracle(t, workedExampleOptions())
	workedExample(o)
	mustSync(t, o, true)
	o.OnServiceDelete(lbService("ns1", "svc1", "172.30.0.41", "1.2.3.4", 3001, v1.ServiceExternalTrafficPolicyLocal))
	o.OnEndpointSliceDelete(svc1LocalOnly())
	result := mustSync(t, o, false)

	for _, chain := range []string{"KUBE-EXT-XPGD46QRK7WJZT7O", "KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SVL-XPGD46QRK7WJZT7O", "KUBE-SEP-SXIVWICOYRO3J4NJ", "KUBE-SEP-TOIS5JUHRKSSXDL7"} {
		if !strings.Contains(result.NAT, "\n-X "+chain+"\n") {
			t.Errorf("partial sync does not delete %s:\n%s", chain, result.NAT)
		}
	}
	dump, err := o.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, "XPGD46QRK7WJZT7O") {
		t.Errorf("dump still holds svc1's chains:\n%s", dump)
	}
}

func TestForceFullSync(t *testing.T) {
	o := newOracle(t, workedExampleOptions())
	workedExample(o)
	mustSync(t, o, true)

	// Without changes a partial sync rewrites only the top-level chains.
	idle := mustSync(t, o, false)
	assertText(t, "partial nat payload without changes", idle.NAT, join(natTopChains, natMasqueradeRules, []string{
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O`,
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
		`-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 3001 -j KUBE-EXT-XPGD46QRK7WJZT7O`,
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`,
		`COMMIT`,
	}))

	o.ForceFullSync()
	forced := mustSync(t, o, true)
	assertText(t, "forced full nat payload", forced.NAT, workedExampleNAT)
	mustSync(t, o, false)

	o.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
	mustSync(t, o, true)
}

// A UDP endpoint change makes kube-proxy clean stale conntrack entries; the
// oracle's fake conntrack must absorb that.
func TestUDPEndpointChangeUsesFakeConntrack(t *testing.T) {
	o := newOracle(t, workedExampleOptions())
	svc := lbService("ns3", "dns", "172.30.0.53", "1.2.3.53", 3053, v1.ServiceExternalTrafficPolicyCluster)
	svc.Spec.Ports[0].Protocol = v1.ProtocolUDP
	udpSlice := func(ips ...string) *discoveryv1.EndpointSlice {
		es := slice("ns3", "dns", discoveryv1.AddressTypeIPv4)
		es.Ports[0].Protocol = ptr.To(v1.ProtocolUDP)
		for _, ip := range ips {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
		}
		return es
	}
	o.OnServiceAdd(svc)
	o.OnEndpointSliceAdd(udpSlice("10.180.0.53", "10.180.1.53"))
	mustSync(t, o, true)
	o.OnEndpointSliceUpdate(udpSlice("10.180.0.53", "10.180.1.53"), udpSlice("10.180.0.53"))
	result := mustSync(t, o, false)

	const want = `-m udp -p udp -j DNAT --to-destination 10.180.0.53:80`
	if !strings.Contains(result.NAT, want) || strings.Contains(result.NAT, "--to-destination 10.180.1.53:80") {
		t.Errorf("nat payload should DNAT only to 10.180.0.53:\n%s", result.NAT)
	}
}
